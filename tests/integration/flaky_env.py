import os

from gymnasium.envs.classic_control import CartPoleEnv


class FlakyCartPole(CartPoleEnv):
    """CartPole that raises while the file named in config["fail_flag"] exists (a trial that errors on demand)."""

    def __init__(self, config=None):
        super().__init__()
        self.flag = (config or {}).get("fail_flag")

    def step(self, action):
        if self.flag and os.path.exists(self.flag):
            raise RuntimeError("flaky env: failing on purpose")
        return super().step(action)


class BrokenCartPole(CartPoleEnv):
    """CartPole that cannot be made (an Algorithm whose build fails after RLlib's validation)."""

    def __init__(self, config=None):
        raise RuntimeError("broken env: cannot be made")

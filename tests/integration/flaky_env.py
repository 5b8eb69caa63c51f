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


class LateCartPole(CartPoleEnv):
    """CartPole whose first make in the first Ray actor to get there waits config["delay"] seconds: a trial
    actor that starts late, as one does on a busy host. config["marker"] names the file that claims it."""

    def __init__(self, config=None):
        import time

        import ray

        super().__init__()
        config = config or {}
        if ray.is_initialized() and ray.get_runtime_context().get_actor_id() is not None:
            try:
                os.close(os.open(config["marker"], os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            except FileExistsError:
                return
            time.sleep(config["delay"])

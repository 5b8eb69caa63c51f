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


_started_together = False


class TogetherCartPole(CartPoleEnv):
    """CartPole whose first reset in each Ray actor waits, up to config["timeout"] seconds, until
    config["actors"] actors have reached theirs (a file per actor in the folder config["dir"]): the trials of
    a sweep start sampling together however late one's actor came up. Later resets do not wait."""

    def __init__(self, config=None):
        super().__init__()
        self.together = config or {}

    def reset(self, *, seed=None, options=None):
        global _started_together
        import time

        import ray

        if not _started_together and ray.is_initialized():
            actor = ray.get_runtime_context().get_actor_id()
            if actor is not None:
                _started_together = True
                folder = self.together["dir"]
                os.makedirs(folder, exist_ok=True)
                open(os.path.join(folder, actor), "w").close()
                deadline = time.monotonic() + self.together["timeout"]
                while len(os.listdir(folder)) < self.together["actors"] and time.monotonic() < deadline:
                    time.sleep(0.05)
        return super().reset(seed=seed, options=options)

import os

from gymnasium.envs.classic_control import CartPoleEnv


class FlakyCartPole(CartPoleEnv):
    """CartPole that raises while the file named in config["fail_flag"] exists (a trial that errors on demand):
    in its first step in the main process, and when it is made in an env runner actor (RLlib's EnvContext
    says which: worker_index 0 is the main process)."""

    def __init__(self, config=None):
        super().__init__()
        self.flag = (config or {}).get("fail_flag")
        if getattr(config, "worker_index", 0) > 0 and self.flag and os.path.exists(self.flag):
            raise RuntimeError("flaky env: cannot be made")

    def step(self, action):
        if self.flag and os.path.exists(self.flag):
            raise RuntimeError("flaky env: failing on purpose")
        return super().step(action)


class BrokenCartPole(CartPoleEnv):
    """CartPole that cannot be made (an Algorithm whose build fails after RLlib's validation)."""

    def __init__(self, config=None):
        raise RuntimeError("broken env: cannot be made")


_late_role: str | None = None  # per process: "late" (the first actor to make a LateCartPole) or "early"
_late_steps = 0  # steps taken by this process's LateCartPoles


def _in_ray_actor() -> bool:
    import ray

    return ray.is_initialized() and ray.get_runtime_context().get_actor_id() is not None


def _wait_until(done, timeout: float) -> None:
    """Poll `done()` until it is true or `timeout` seconds have passed."""
    import time

    deadline = time.monotonic() + timeout
    while not done() and time.monotonic() < deadline:
        time.sleep(0.05)


def _wait_for(path: str, timeout: float) -> None:
    _wait_until(lambda: os.path.exists(path), timeout)


class LateCartPole(CartPoleEnv):
    """CartPole whose first Ray actor to make it comes up late, as one does on a busy host, and yet before the
    other trial ends, whatever the machine's speed. In config["dir"]:

    - the late actor waits in its first make until the other actor's envs have taken config["ahead"] steps
      (so that trial reaches its first perturbation points while this one is PENDING);
    - the early actor waits at config["overlap"] steps until the late actor's envs take their first step (it
      is up and training), so the early trial cannot end before the late one runs.

    Each wait gives up after config["timeout"] seconds.
    """

    def __init__(self, config=None):
        global _late_role
        super().__init__()
        self.late = config or {}
        if _late_role is None and _in_ray_actor():
            os.makedirs(self.late["dir"], exist_ok=True)
            try:
                os.close(os.open(os.path.join(self.late["dir"], "late"), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            except FileExistsError:
                _late_role = "early"
            else:
                _late_role = "late"
                _wait_for(os.path.join(self.late["dir"], "ahead"), self.late["timeout"])

    def step(self, action):
        global _late_steps
        _late_steps += 1
        if _late_role == "late" and _late_steps == 1:
            open(os.path.join(self.late["dir"], "late_up"), "w").close()
        elif _late_role == "early" and _late_steps == self.late["ahead"]:
            open(os.path.join(self.late["dir"], "ahead"), "w").close()
        elif _late_role == "early" and _late_steps == self.late["overlap"]:
            _wait_for(os.path.join(self.late["dir"], "late_up"), self.late["timeout"])
        return super().step(action)


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
        if not _started_together and _in_ray_actor():
            import ray

            _started_together = True
            folder = self.together["dir"]
            os.makedirs(folder, exist_ok=True)
            open(os.path.join(folder, ray.get_runtime_context().get_actor_id()), "w").close()
            _wait_until(lambda: len(os.listdir(folder)) >= self.together["actors"], self.together["timeout"])
        return super().reset(seed=seed, options=options)


class SlowCartPole(CartPoleEnv):
    """CartPole whose every step sleeps config["step_s"] seconds while the file config["slow_flag"] exists: a
    trial that cannot run far ahead of a test (an iteration of 200 steps takes at least 200 * step_s seconds,
    however fast the machine), and runs at full speed again once the test removes the file."""

    def __init__(self, config=None):
        super().__init__()
        self.flag = (config or {}).get("slow_flag")
        self.step_s = float((config or {}).get("step_s", 0.005))

    def step(self, action):
        if self.flag and os.path.exists(self.flag):
            import time

            time.sleep(self.step_s)
        return super().step(action)

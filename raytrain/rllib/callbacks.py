"""RLlib callbacks that add raytrain's metrics to every training result.

Why: in Ray 2.60, `env_runners/episode_return_mean` is reduced from a window that is *cleared at
every reduction* (`MeanStats.reduce` empties its values; see ray/rllib/utils/metrics/stats/mean.py),
so it averages only the episodes that finished during that iteration, and across EnvRunners it is a
mean of per-runner means. With small batches that is one or two episodes, so a stop at 450 can fire
on one lucky episode. raytrain keeps the returns of the last N finished episodes on the driver and
reports their true mean as `raytrain/episode_return_mean_<N>`.
"""

from __future__ import annotations

import math
from collections import deque
from typing import TYPE_CHECKING, Any, cast

from ray.rllib.callbacks.callbacks import RLlibCallback

if TYPE_CHECKING:
    from ray.rllib.algorithms.algorithm import Algorithm
    from ray.rllib.evaluation.episode_v2 import EpisodeV2
    from ray.rllib.utils.metrics.metrics_logger import MetricsLogger
    from ray.rllib.utils.typing import EpisodeType

RETURNS_KEY = "raytrain_episode_returns"

EMPTY_ITERATIONS = 2
"""Iterations in a row in which no env runner returned a sample before training stops with an error.

RLlib restarts an env runner that fails (its default `restart_failed_env_runners`) and goes on training
without it: with an env that raises in every step, each iteration waits `sample_timeout_s` (60 s) for
samples that never come, reports 0 env steps, and a run stopped by return or by env steps never ends. One
such iteration can be a node that died and whose env runners RLlib restarts elsewhere; two in a row are not.
"""


def _as_floats(value: Any) -> list[float]:
    """The logged returns as a flat list: RLlib hands over a list, nested lists or a lone number."""
    if value is None:
        return []
    if isinstance(value, (list, tuple)) or type(value).__name__ == "deque":
        return [f for item in value for f in _as_floats(item)]
    if hasattr(value, "tolist"):
        return _as_floats(value.tolist())
    return [float(value)]


def find(algorithm: Algorithm) -> RaytrainCallbacks | None:
    """The RaytrainCallbacks instance of an Algorithm, if it has one."""
    callbacks = getattr(algorithm, "callbacks", None)
    for cb in callbacks if isinstance(callbacks, (list, tuple)) else [callbacks]:
        if isinstance(cb, RaytrainCallbacks):
            return cb
    return None


class RaytrainCallbacks(RLlibCallback):
    """Collects every finished episode's return and reports the running mean over the last N."""

    def __init__(self) -> None:
        super().__init__()
        from raytrain.quiet import quiet_sigterm_at_exit

        quiet_sigterm_at_exit()  # every RLlib process of a quiet job builds these: its trial and env runner actors
        self.returns: deque[float] = deque(maxlen=100)
        self.episodes_total = 0
        self.empty_iterations = 0

    def on_episode_end(self, *, episode: EpisodeType | EpisodeV2, prev_episode_chunks: list[EpisodeType] | None = None,
                       metrics_logger: MetricsLogger | None = None, **kwargs: Any) -> None:
        if metrics_logger is None:
            return
        # RLlib's signature admits the old API stack's EpisodeV2; raytrain runs the new stack only.
        episode = cast("EpisodeType", episode)
        # With truncate_episodes an episode reaches us in chunks, one per sample() call: the
        # finished chunk holds only the last part, so add the chunks already returned.
        ret = float(episode.get_return()) + sum(float(c.get_return()) for c in prev_episode_chunks or [])
        # item_series keeps each value (no reduction), merged across EnvRunners on the driver.
        metrics_logger.log_value(RETURNS_KEY, ret, reduce="item_series")

    def on_train_result(self, *, algorithm: Algorithm, result: dict[str, Any], **kwargs: Any) -> None:
        assert algorithm.config is not None  # Algorithm.__init__ always sets it; RLlib declares it Optional
        self._check_sampled(algorithm.config, result)
        window = int(algorithm.config.metrics_num_episodes_for_smoothing)
        if self.returns.maxlen != window:
            self.returns = deque(self.returns, maxlen=window)
        new = _as_floats(result.get("env_runners", {}).pop(RETURNS_KEY, None))
        if isinstance(result.get("evaluation"), dict):
            result["evaluation"].get("env_runners", {}).pop(RETURNS_KEY, None)
        self.returns.extend(new)
        self.episodes_total += len(new)
        mean = sum(self.returns) / len(self.returns) if self.returns else math.nan
        result["raytrain"] = {
            f"episode_return_mean_{window}": mean,
            "episodes_in_window": len(self.returns),
            "episodes_total": self.episodes_total,
        }

    def _check_sampled(self, config: Any, result: dict[str, Any]) -> None:
        """Stop a run whose env runners keep failing instead of training on nothing forever."""
        if not config.num_env_runners:
            return  # the env runs in this process: its errors are raised here
        sampled = result.get("env_runners", {}).get("num_env_steps_sampled") or 0
        self.empty_iterations = 0 if sampled else self.empty_iterations + 1
        if self.empty_iterations >= EMPTY_ITERATIONS:
            from raytrain.errors import TrainError

            raise TrainError(
                f"no env runner returned a sample in {self.empty_iterations} iterations in a row (each waited "
                f"sample_timeout_s, {config.sample_timeout_s:g} s): they keep failing, and RLlib, which restarts "
                "them, would go on training on nothing. Their output above, prefixed `(SingleAgentEnvRunner "
                "pid=...)`, shows why; most often the env raises in step() or reset()"
            )

    def get_state(self) -> dict[str, Any]:
        """What a checkpoint must keep so a resumed run continues the same running mean."""
        return {"returns": list(self.returns), "episodes_total": self.episodes_total}

    def set_state(self, state: dict[str, Any]) -> None:
        self.returns = deque(state.get("returns", []), maxlen=self.returns.maxlen)
        self.episodes_total = int(state.get("episodes_total", 0))

"""`RaytrainPPO`: RLlib's PPO as a Tune trainable whose trial config is a raytrain config.

A trial's Tune config is `{"raytrain": {"base": <train config>, "overrides": {dotted key: value}}}`.
Tune samples and PBT perturbs the overrides; the trial builds its PPOConfig through the same loader
and translation as `raytrain train`, so nothing is dropped and the keys people read are raytrain's.
"""

from __future__ import annotations

import copy
from collections.abc import Collection
from typing import TYPE_CHECKING, Any, TypeVar

from ray.rllib.algorithms.ppo import PPO

from raytrain.config.load import load_source
from raytrain.config.source import Source
from raytrain.rllib.callbacks import find
from raytrain.rllib.translate import build_ppo_config
from raytrain.tune import TRIAL_KEY  # noqa: F401 - re-exported

if TYPE_CHECKING:
    from ray.rllib.algorithms.algorithm_config import AlgorithmConfig
    from ray.rllib.core.learner.learner import Learner
    from ray.rllib.utils.typing import StateDict
    from ray.tune.execution.placement_groups import PlacementGroupFactory

    from raytrain.config.schema import RaytrainConfig


def trial_config(tune_config: dict[str, Any]) -> RaytrainConfig:
    """The validated RaytrainConfig of one trial."""
    from raytrain.config.sweep_load import trial_source

    spec = tune_config[TRIAL_KEY]
    base = Source(copy.deepcopy(spec["base"]), {}, "<trial>")
    return load_source(trial_source(base, dict(spec.get("overrides", {})))).config


_Config = TypeVar("_Config", bound="AlgorithmConfig | dict[str, Any] | None")


def _ppo_config(config: _Config) -> _Config | AlgorithmConfig:
    """The PPOConfig of a raytrain trial config; any other config as it is."""
    if isinstance(config, dict) and TRIAL_KEY in config:
        return build_ppo_config(trial_config(config))
    return config


def _apply_config_lr(learner: Learner, timestep: int) -> None:
    """Set each optimizer's lr from the learner's (new) config schedule.

    A restored checkpoint brings the optimizer state of the trial it came from, including its lr; RLlib
    only re-applies the configured lr after the next update. After a PBT exploit that would train one
    iteration with the old trial's lr, so apply the new one right away.
    """
    for optimizer, schedule in learner._optimizer_lr_schedules.items():
        learner._set_optimizer_lr(optimizer, lr=schedule.update(timestep=timestep))


class RaytrainPPO(PPO):
    """PPO for Tune with raytrain trial configs, raytrain's metric state in checkpoints, and PBT-safe lr."""

    def __init__(self, config: AlgorithmConfig | dict[str, Any] | None = None, *args: Any, **kwargs: Any) -> None:
        from ray.tune.result import TRIAL_INFO

        self._raytrain_tune_config = {TRIAL_KEY: config[TRIAL_KEY]} if isinstance(config, dict) and TRIAL_KEY in config else None
        # Tune passes the trial's name and id inside the config; RLlib's config conversion drops them, so
        # Trainable.trial_name would be "default". Keep them.
        trial_info = config.get(TRIAL_INFO) if isinstance(config, dict) else None
        # Ray annotates `config` as AlgorithmConfig only; Algorithm.__init__ converts a dict itself.
        super().__init__(_ppo_config(config), *args, **kwargs)  # type: ignore[arg-type]
        if trial_info is not None and getattr(self, "_trial_info", None) is None:
            self._trial_info = trial_info

    def __repr__(self) -> str:
        # Ray shows this on the dashboard's Actors page and before each line a trial prints:
        # the trial's name tells the trials of a sweep apart (RLlib's repr is the same for all of them).
        info = getattr(self, "_trial_info", None)
        return f"RaytrainPPO({info.trial_name})" if info is not None else "RaytrainPPO"

    @classmethod
    def default_resource_request(
        cls, config: AlgorithmConfig | dict[str, Any]
    ) -> PlacementGroupFactory:
        config = _ppo_config(config)
        if not isinstance(config, dict):
            config = config.to_dict()
        # Algorithm annotates Resources | PlacementGroupFactory; it returns a PlacementGroupFactory only.
        return super().default_resource_request(config)  # type: ignore[return-value]

    def get_auto_filled_metrics(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        # Report the trial's raytrain config (base + sampled/perturbed keys), not RLlib's 300-key dict:
        # it is what people read in result.json, TensorBoard and `raytrain tune status`.
        metrics = super().get_auto_filled_metrics(*args, **kwargs)
        if self._raytrain_tune_config is not None and "config" in metrics:
            metrics["config"] = self._raytrain_tune_config
        return metrics

    def get_state(self, components: str | Collection[str] | None = None, *,
                  not_components: str | Collection[str] | None = None, **kwargs: Any) -> StateDict:
        state = super().get_state(components, not_components=not_components, **kwargs)
        cb = find(self)
        if cb is not None:
            state["raytrain_callbacks"] = cb.get_state()
        return state

    def set_state(self, state: StateDict) -> None:
        super().set_state(state)
        cb = find(self)
        if cb is not None and "raytrain_callbacks" in state:
            cb.set_state(state["raytrain_callbacks"])
        if self.learner_group is not None:
            from ray.rllib.utils.metrics import ENV_RUNNER_RESULTS, NUM_ENV_STEPS_SAMPLED_LIFETIME

            # Algorithm.__init__ always sets it; RLlib declares the class attribute Optional.
            assert self.metrics is not None
            steps = int(self.metrics.peek((ENV_RUNNER_RESULTS, NUM_ENV_STEPS_SAMPLED_LIFETIME), default=0) or 0)
            # Ray's annotation says func(learner, kwargs); it calls func(learner, **kwargs), here func(learner).
            self.learner_group.foreach_learner(
                lambda learner: _apply_config_lr(learner, steps))  # type: ignore[arg-type,misc]

    def reset_config(self, new_config: dict[str, Any]) -> bool:
        """Reuse this actor for another trial (Tune `reuse_actors`): rebuild the algorithm in place.

        Saves the process start and the imports of torch and RLlib (seconds per trial); the env
        runners, learners and metrics are built anew from the new trial's config. Trainable.reset()
        then resets the counters, the logger and the storage for the new trial.
        """
        if TRIAL_KEY not in new_config:
            return False
        storage, trial_info = getattr(self, "_storage", None), getattr(self, "_trial_info", None)
        self.cleanup()
        RaytrainPPO.__init__(self, new_config, storage=storage)
        if trial_info is not None:
            self._trial_info = trial_info
        return True

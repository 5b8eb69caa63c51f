"""`RaytrainPPO`: RLlib's PPO as a Tune trainable whose trial config is a raytrain config.

A trial's Tune config is `{"raytrain": {"base": <train config>, "overrides": {dotted key: value}}}`.
Tune samples and PBT perturbs the overrides; the trial builds its PPOConfig through the same loader
and translation as `raytrain train`, so nothing is dropped and the keys people read are raytrain's.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, Any, TypeVar

from ray.rllib.algorithms.ppo import PPO

from raytrain.config.load import load_source
from raytrain.config.source import Source
from raytrain.rllib.callbacks import find
from raytrain.rllib.monitor import prompt_monitor
from raytrain.rllib.translate import build_ppo_config
from raytrain.tune import TRIAL_KEY, unescape_keys  # noqa: F401 - TRIAL_KEY re-exported

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
    base = Source(unescape_keys(spec["base"]), {}, "<trial>")
    return load_source(trial_source(base, dict(spec.get("overrides", {})))).config


_Config = TypeVar("_Config", bound="AlgorithmConfig | dict[str, Any] | None")


def _ppo_config(config: _Config) -> _Config | AlgorithmConfig:
    """The PPOConfig of a raytrain trial config; any other config as it is."""
    if isinstance(config, dict) and TRIAL_KEY in config:
        return build_ppo_config(trial_config(config))
    return config


HOT_SWAPPABLE = frozenset({
    "lr", "clip_param", "vf_clip_param", "vf_loss_coeff", "entropy_coeff", "kl_coeff", "kl_target",
    "grad_clip", "grad_clip_by", "num_epochs", "minibatch_size", "seed",
})
"""RLlib settings that a reused actor can take from a new trial without a rebuild: the PPO learner reads them
at every update (the loss, the optimizer's lr schedule, gradient clipping, the update loop), nothing built
holds them. `seed` is read only at build time; a swapped config must be followed by a restored checkpoint.
Everything else (env, model, batch and runner settings, gamma and lambda baked into the learner's GAE
connector) makes `reset_config` rebuild the algorithm."""

_MISSING = object()


def _built_config(tune_config: dict[str, Any]) -> AlgorithmConfig:
    """The validated, frozen PPOConfig an algorithm would be built with for a trial config."""
    config = build_ppo_config(trial_config(tune_config))
    config.validate()
    config.freeze()
    return config


def _swap_learner_config(learner: Learner, config: AlgorithmConfig) -> None:
    """Give a built learner a new config of `HOT_SWAPPABLE` differences: the config, lr and entropy schedules.

    The optimizers' lr is set from the new schedules by the restore that follows (`RaytrainPPO.set_state`,
    `_apply_config_lr`). The adaptive KL coefficient keeps its current value unless `kl_coeff` itself changed.
    """
    from ray.rllib.utils.schedules.scheduler import Scheduler

    kl_changed = learner.config.kl_coeff != config.kl_coeff  # type: ignore[attr-defined]
    learner.config = config.copy(copy_frozen=False)
    _forget_weights_seq_no(learner)
    for module_id, names in learner._module_optimizers.items():
        module_config = learner.config.get_config_for_module(module_id)
        for name in names:
            optimizer = learner._named_optimizers[name]
            if optimizer in learner._optimizer_lr_schedules:
                learner._optimizer_lr_schedules[optimizer] = Scheduler(
                    fixed_value_or_schedule=module_config.lr, framework=learner.framework, device=learner._device)
    # PPOLearner's per-module schedulers are created on first use from `learner.config`.
    getattr(learner, "entropy_coeff_schedulers_per_module", {}).clear()
    if kl_changed:
        getattr(learner, "curr_kl_coeffs_per_module", {}).clear()


def _forget_weights_seq_no(holder: Any) -> None:
    """Make a learner or env runner take the next weights it is given (RLlib's sequence number 0)."""
    holder._weights_seq_no = 0


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
        prompt_monitor(self)  # the trial's stop, at its end or a PBT pause, need not wait out Tune's 0.7 s sleep
        assert self.config is not None  # Algorithm.__init__ always sets it; RLlib declares it Optional
        self._raytrain_built_config: AlgorithmConfig = self.config
        """The RLlib config the algorithm was built with (Tune's reset sets `self.config` to its dict)."""
        self._raytrain_rebuild_unless_restored: dict[str, Any] | None = None
        """After a config swap: the trial config to rebuild from if no checkpoint is restored."""

    def setup(self, config: Any) -> None:  # Trainable: a dict; Algorithm: its AlgorithmConfig
        from raytrain.rllib.algorithm import building

        with building():
            super().setup(config)

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
        """Reuse this actor for another trial (Tune `reuse_actors`).

        When the new trial's RLlib config differs from this one's only in settings the learners read at
        every update (lr, clip_param, entropy_coeff, ..., `HOT_SWAPPABLE`), the config is swapped in
        place: the env runners keep their envs (mid-episode), the learners their module, and the
        checkpoint Tune restores next (PBT's exploit) brings the weights, optimizer state and the
        running-mean window. That swap is only sound when a checkpoint follows; a trial that starts
        without one gets the full rebuild below before its first iteration.

        Otherwise the algorithm is rebuilt in place: that still saves the process start and the imports of
        torch and RLlib (seconds per trial); env runners, learners and metrics are built anew. Trainable.reset()
        then resets the counters, the logger and the storage for the new trial.
        """
        if TRIAL_KEY not in new_config:
            return False
        config = _built_config(new_config)
        if self._raytrain_swap_config(config):
            self._raytrain_tune_config = {TRIAL_KEY: new_config[TRIAL_KEY]}
            self._raytrain_rebuild_unless_restored = dict(new_config)
            return True
        self._raytrain_rebuild(new_config)
        return True

    def _raytrain_rebuild(self, new_config: dict[str, Any]) -> None:
        """Build the algorithm anew inside this actor, keeping Tune's storage and trial info."""
        storage, trial_info = getattr(self, "_storage", None), getattr(self, "_trial_info", None)
        self._raytrain_rebuild_unless_restored = None
        self.cleanup()
        RaytrainPPO.__init__(self, new_config, storage=storage)
        if trial_info is not None:
            self._trial_info = trial_info

    def _raytrain_swap_config(self, config: AlgorithmConfig) -> bool:
        """Swap in `config` without a rebuild when only `HOT_SWAPPABLE` settings differ; False otherwise."""
        if self.learner_group is None or self.learner_group.is_remote:
            return False
        before, after = self._raytrain_built_config.to_dict(), config.to_dict()
        changed = {k for k in before.keys() | after.keys() if before.get(k, _MISSING) != after.get(k, _MISSING)}
        changed.discard("class")  # present only in the algorithm's own copy (Algorithm.__init__ converts it)
        if not changed <= HOT_SWAPPABLE:
            return False
        self.config = config
        self._raytrain_built_config = config
        self.learner_group.config = config
        # RLlib annotates func(learner, **kwargs); it calls func(learner) here.
        self.learner_group.foreach_learner(lambda learner: _swap_learner_config(learner, config))  # type: ignore[arg-type,misc]
        # Learners and env runners take weights only from a state with a higher sequence number than their
        # own (or 0): this actor's previous trial may have updated more often than the checkpoint that is
        # restored next, whose weights must win. 0 is RLlib's "not synced yet".
        for group in (self.env_runner_group, getattr(self, "eval_env_runner_group", None)):
            if group is not None:
                group.foreach_env_runner(_forget_weights_seq_no)
        return True

    def load_checkpoint(self, checkpoint: Any) -> None:
        super().load_checkpoint(checkpoint)
        self._raytrain_rebuild_unless_restored = None

    def train(self) -> dict[str, Any]:
        pending = self._raytrain_rebuild_unless_restored
        if pending is not None:  # a reused actor whose new trial had no checkpoint to restore
            self._raytrain_rebuild(pending)
        return super().train()

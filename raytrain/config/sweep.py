"""The sweep config of `raytrain tune FILE`: a base train config plus search, scheduler and storage.

Hyperparameters are named by their dotted raytrain key (`training.lr`, `model.fcnet_hiddens`,
`env_runners.num_envs_per_env_runner`), and every sampled trial config goes through the same loader
as `raytrain train` (aliases, schema, checks, no dropped value). The settings section of each search
algorithm (`pbt:`, `asha:`, ...) is defined with the algorithm, in `raytrain.sweeps`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_serializer, field_validator, model_validator

from raytrain.config.schema import Seed, absolute_path, folder_name, thresholds_as_written
from raytrain.sweeps import AlgorithmName
from raytrain.sweeps.asha import ASHAConfig
from raytrain.sweeps.optuna import OptunaConfig
from raytrain.sweeps.pb2 import PB2Config
from raytrain.sweeps.pbt import PBTConfig
from raytrain.sweeps.space import Distribution, Section

_PARAM_SPACE = ("Tune's param_space is written here as space: (what is searched, by the train config's dotted keys: "
                "space: {training.lr: {distribution: loguniform, low: ..., high: ...}}) and set: (one value for every "
                "trial: set: {training.gamma: 0.99})")
TUNE_NAMES = {
    "scheduler": ("Tune's scheduler is chosen by search.algorithm here: pbt, pb2 or asha (search: {algorithm: asha}), "
                  "with its settings in the section of that name (asha: {max_t: ...})"),
    "search_alg": ("Tune's search algorithm is search.algorithm here: random, grid or optuna (search: {algorithm: "
                   "optuna}), with Optuna's settings in optuna:"),
    "param_space": _PARAM_SPACE,
    "config": _PARAM_SPACE,
    "tune_config": ("Tune's TuneConfig is the search section here: search: {algorithm, num_samples, metric, mode, "
                    "max_concurrent_trials}"),
    "run_config": ("Tune's RunConfig is written here as name:, stop:, checkpoint: {storage_path, frequency, "
                   "num_to_keep, at_end} and failure: {max_failures}"),
    "resources_per_trial": ("a trial reserves what its train config's settings ask for: set them for every trial "
                            "with set: {resources.num_cpus_for_main_process: ..., learners.num_cpus_per_learner: ..., "
                            "env_runners.num_env_runners: ...}"),
    "local_dir": "Tune's local_dir is checkpoint: {storage_path: ...} here",
    "checkpoint_freq": "Tune's checkpoint_freq is checkpoint: {frequency: ...} here",
    "keep_checkpoints_num": "Tune's keep_checkpoints_num is checkpoint: {num_to_keep: ...} here",
    "checkpoint_at_end": "Tune's checkpoint_at_end is checkpoint: {at_end: ...} here",
    "resume": ("a sweep is resumed by a command, not a setting: raytrain tune resume EXPERIMENT_FOLDER (the folder "
               "checkpoint.storage_path/name)"),
}
"""Ray Tune's names (Tuner, TuneConfig, RunConfig, tune.run) that a sweep file writes another way, and that way:
the hint of an unknown key of that name, at any depth of a sweep file."""


class SearchConfig(Section):
    """What to search and how trials are ranked."""

    algorithm: AlgorithmName = "random"
    """pbt / pb2 (population based training), asha (random search + early stopping), optuna (TPE and co.), random, grid."""
    num_samples: int = Field(default=1, ge=1)
    """Trials to run (with grid: repeats of the whole grid)."""
    max_concurrent_trials: int | None = Field(default=None, ge=1)
    """Trials running at once (unset: as many as the cluster holds; with optuna, raytrain gives Tune that number, which would otherwise start the trials one at a time)."""
    metric: str | None = None
    """Metric to rank trials on. Default: `raytrain/episode_return_mean_<N>`, the running mean over the last N episodes."""
    mode: Literal["max", "min"] = "max"
    """Whether a higher or a lower `metric` is better."""
    seed: Seed | None = None
    """Seed for the search algorithm, the trials' seeds and PBT/PB2's random choices (Python's and NumPy's global generators, seeded when the sweep starts); 0 to 2**31-1."""


class CheckpointConfig(Section):
    """Trial checkpoints. A key this section leaves out is taken from the base config's `experiment` section where that sets it (`storage_path`, `checkpoint_frequency`, `num_to_keep`, `checkpoint_at_end`), else its default here."""

    storage_path: str = "~/raytrain_results"
    """Absolute directory for the experiment (`~` expanded). On a cluster: the shared (NFS) mount, the same path on every node."""
    frequency: int = Field(default=5, ge=0)
    """Checkpoint every this many iterations (0: only at the end). PBT needs them to exploit."""
    num_to_keep: int | None = Field(default=None, ge=1)
    """Checkpoints kept per trial (unset: all)."""
    at_end: bool = True
    """Checkpoint when a trial ends."""

    _absolute = field_validator("storage_path")(classmethod(lambda cls, value: absolute_path(value)))


class FailureConfig(Section):
    """What happens when a trial fails."""

    max_failures: int = Field(default=0, ge=-1)
    """Retries per trial from its last checkpoint (-1: forever)."""


class SweepConfig(Section):
    """A raytrain sweep: `raytrain tune FILE`."""

    name: str | None = None
    """Experiment name, the folder under checkpoint.storage_path, so one folder name: letters, digits and `_.-`, not starting with `.` or `-`, at most 100 characters. Default: the base config's experiment.name + `_<algorithm>`."""
    base: str | None = None
    """Path of the train config to sweep over, relative to this file. Or embed it as `train:`."""
    train: dict[str, Any] | None = None
    """The train config, embedded (same format as `raytrain train` files)."""
    set: dict[str, Any] = Field(default_factory=dict)
    """Fixed overrides of the base config for every trial ({dotted key: value}); not `stop` (the sweep's own `stop`) nor experiment.name, storage_path and checkpoint settings (the sweep's `name` and `checkpoint`, which default to the base config's), which a trial does not use."""
    search: SearchConfig = Field(default_factory=SearchConfig)
    """Search algorithm, samples, metric."""
    space: dict[str, Distribution] = Field(default_factory=dict)
    """Dotted key -> distribution, sampled for each trial."""
    pbt: PBTConfig | None = None
    """Settings when search.algorithm is pbt."""
    pb2: PB2Config | None = None
    """Settings when search.algorithm is pb2."""
    asha: ASHAConfig | None = None
    """Settings when search.algorithm is asha (or optuna with pruner: asha)."""
    optuna: OptunaConfig | None = None
    """Settings when search.algorithm is optuna."""
    checkpoint: CheckpointConfig = Field(default_factory=CheckpointConfig)
    """Trial checkpoints and where the experiment lives."""
    failure: FailureConfig = Field(default_factory=FailureConfig)
    """Trial retries."""
    stop: dict[str, float] = Field(default_factory=dict)
    """Stop each trial when a metric reaches its threshold (default: the base config's stop)."""
    time_budget_s: float | None = Field(default=None, gt=0)
    """Stop the whole sweep after this many seconds of Tune's loop, summed over its resumes; the sweep is over then
    (exit 0, the budget named)."""
    reuse_actors: bool | None = None
    """Reuse trial actors between trials (saves start-up time). Default: on for pbt and pb2, off otherwise."""

    _name = field_validator("name")(classmethod(lambda cls, value: value if value is None else folder_name(value)))

    @field_serializer("stop")
    def _stop_as_written(self, stop: dict[str, float]) -> dict[str, float | int]:
        return thresholds_as_written(stop)

    @model_validator(mode="after")
    def _one_base(self) -> SweepConfig:
        if (self.base is None) == (self.train is None):
            raise ValueError("give exactly one of `base:` (a train config file) or `train:` (an embedded one)")
        return self

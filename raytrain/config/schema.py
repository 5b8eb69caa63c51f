"""The raytrain train config: one pydantic model per RLlib builder group, with RLlib's new-stack names.

A field left unset (None) means "RLlib's default"; only fields a user set are passed on to RLlib,
and every one of them is (see `raytrain.rllib.translate`). Field docstrings are the documentation:
they feed `raytrain config schema`, the README reference and error messages.

Where a field goes in RLlib is said here too, once: a section's fields are the keywords of its
builder call (`RLLIB_CALL`) under their Python names; an `RLlib(...)` marker on a field says where
it differs (another keyword, another call, a value that is an import path). `rllib_fields()` reads it
for the translation, the reference's RLlib defaults and the table of RLlib's spellings (`aliases`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, ClassVar, Literal

from pydantic import AfterValidator, ConfigDict, Field, StrictBool, field_serializer, field_validator, model_validator
from pydantic.fields import FieldInfo

from raytrain.config.initializers import INITIALIZERS
from raytrain.config.yaml_bools import RefuseBoolsForNumbers

Activation = Literal["linear", "relu", "tanh", "elu", "swish", "silu"]

# Every float of every model is finite (`allow_inf_nan=False` on the models); these add the lower bounds.
Positive = Annotated[float, Field(gt=0)]
NonNegative = Annotated[float, Field(ge=0)]
Size = Annotated[int, Field(ge=1)]
Seed = Annotated[int, Field(ge=0, le=2**31 - 1)]
"""NumPy seeds are 32-bit and RLlib adds the env runner's index (and 1,000,000 for evaluation) to the seed."""

TORCH_INITIALIZERS = tuple(INITIALIZERS)
"""torch.nn.init's in-place initializers, the names RLlib takes for a layer's weights or biases (in any case)."""


def _initializer(value: str) -> str:
    """A name RLlib's `get_initializer_fn` takes for torch, else an error that says what to write: RLlib refused it
    only when it built the network, once Ray had started."""
    import difflib

    name = value.lower()
    if name in TORCH_INITIALIZERS:
        return value
    if name + "_" in TORCH_INITIALIZERS:
        raise ValueError(f"torch's in-place initializer is {name}_, with a trailing _ (RLlib takes torch.nn.init's "
                         f"in-place ones): write {name}_")
    near = difflib.get_close_matches(name, TORCH_INITIALIZERS, n=1)
    raise ValueError(f"not one of torch.nn.init's in-place initializers ({', '.join(TORCH_INITIALIZERS)})"
                     + (f"; did you mean {near[0]}?" if near else ""))


Initializer = Annotated[str, AfterValidator(_initializer)]


def _layers(value: list[int] | None) -> list[int] | None:
    if value is not None and not value:
        raise ValueError("the encoder needs at least one layer, e.g. [64] (RLlib's own: [256, 256])")
    return value


NAME_RULE = "letters, digits and `_.-`, not starting with `.` or `-`, at most 100 characters"
_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}")


def folder_name(value: str) -> str:
    """`value` if it is one folder name by NAME_RULE (so it cannot leave the folder it is put in), else an error."""
    if not _NAME.fullmatch(value):
        raise ValueError(f"must be a single folder name: {NAME_RULE}")
    return value


def as_folder_name(text: str) -> str:
    """`text` made into a name `folder_name` accepts (other characters become `_`)."""
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", text).lstrip(".-")[:100]
    return name or "run"


def absolute_path(value: str) -> str:
    """`~` expanded; an error for a relative path (run folders and checkpoints must not depend on the cwd)."""
    expanded = os.path.expanduser(value)
    if not os.path.isabs(expanded):
        from raytrain.config.cluster import variable_hint

        raise ValueError(f"must be an absolute path (or start with ~), got {value!r}{variable_hint(value, tilde=True)}")
    return expanded


def custom_resources(per: str) -> Callable[[dict[str, float] | None], dict[str, float] | None]:
    """The check of an actor's custom resources (`custom_resources_per_<per>`): names a Ray takes, none of
    Ray's own (`{CPU: 1}` failed once Ray had started: "Use the 'num_cpus' ... keyword instead")."""

    def check(value: dict[str, float] | None) -> dict[str, float] | None:
        from raytrain.config.cluster import resource_names_problem

        instead = (f"reserve CPUs and GPUs with num_cpus_per_{per} and num_gpus_per_{per}; RLlib reserves no memory "
                   "per actor")
        if value is not None and (problem := resource_names_problem(value, instead)):
            raise ValueError(problem)
        return value

    return check


@dataclass(frozen=True)
class RLlib:
    """Field metadata, `Annotated[type, RLlib(...)]`: where the field reaches RLlib, where that is not the
    keyword of its Python name in its section's builder call."""

    name: str | None = None
    """RLlib's keyword, where it is not the field's Python name."""
    call: str | None = None
    """The PPOConfig builder method, where it is not the section's `RLLIB_CALL` (or the section has none)."""
    values: Mapping[str | bool, str | None] = field(default_factory=dict)
    """raytrain value -> RLlib value, where they differ; None: leave the setting at RLlib's default."""
    import_path: bool = False
    """A value with a `:` is an import path `"pkg.module:Name"`, imported when the PPOConfig is built."""


class _Section(RefuseBoolsForNumbers):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, validate_default=True, allow_inf_nan=False)

    RLLIB_CALL: ClassVar[str | None] = None
    """The PPOConfig builder method whose keywords the fields are; None: raytrain's own section (only
    fields marked with a `call` reach RLlib)."""
    RLLIB_WITHIN: ClassVar[str | None] = None
    """The keyword of that call whose dict the fields go in (`rl_module(model_config={...})`), if any."""


class LinearSchedule(_Section):
    """Linear interpolation from `start` to `end` over `timesteps` env steps, then constant at `end`."""

    schedule: Literal["linear"]
    """Schedule type."""
    start: float
    """Value at env step 0."""
    end: float
    """Value from env step `timesteps` on."""
    timesteps: int = Field(gt=0)
    """Env steps (sampled, lifetime) over which the value moves from `start` to `end`."""

    def to_rllib(self) -> list[list[float]]:
        return [[0, self.start], [self.timesteps, self.end]]

    @property
    def values(self) -> list[float]:
        return [self.start, self.end]


class PiecewiseSchedule(_Section):
    """Piecewise-linear schedule through `points`, RLlib's `[[timestep, value], ...]` format."""

    schedule: Literal["piecewise"]
    """Schedule type."""
    points: list[tuple[int, float]] = Field(min_length=1)
    """`[[timestep, value], ...]`, at least two points; the first timestep must be 0, timesteps increasing."""

    @field_validator("points")
    @classmethod
    def _check_points(cls, points: list[tuple[int, float]]) -> list[tuple[int, float]]:
        if points[0][0] != 0:
            raise ValueError(f"the first point must be at timestep 0, not {points[0][0]} (RLlib requires it)")
        steps = [p[0] for p in points]
        if steps != sorted(steps) or len(set(steps)) != len(steps):
            raise ValueError(f"timesteps must increase strictly, got {steps}")
        if len(points) < 2:
            raise ValueError("a schedule needs at least two points (RLlib requires it); for a constant, give a number")
        return points

    @property
    def values(self) -> list[float]:
        return [v for _, v in self.points]

    def to_rllib(self) -> list[list[float]]:
        return [[t, v] for t, v in self.points]


Schedule = Annotated[LinearSchedule | PiecewiseSchedule, Field(discriminator="schedule")]


def _check_schedule(value: Any, what: str, some_positive: bool) -> Any:
    """Every value of a schedule >= 0 (and, for a learning rate, not all 0); a number passes through."""
    if isinstance(value, LinearSchedule | PiecewiseSchedule):
        if min(value.values) < 0:
            raise ValueError(f"every {what} in the schedule must be >= 0, got {value.values}")
        if some_positive and max(value.values) == 0:
            raise ValueError(f"the {what} is 0 all along the schedule, so nothing would be learned")
    return value


class ExperimentConfig(_Section):
    """Where and how the run is recorded."""

    name: str | None = None
    """Experiment name: the run folder is `storage_path/name/<timestamp>`, so one folder name: letters, digits and `_.-`, not starting with `.` or `-`, at most 100 characters. Default: `ppo_<env>`."""
    seed: Annotated[Seed | None, RLlib(call="debugging")] = None
    """Seed for RLlib (env runners, learners, envs), 0 to 2**31-1. Unset: not seeded."""
    storage_path: str = "~/raytrain_results"
    """Absolute directory for run folders (`~` is expanded). On a cluster: a shared (NFS) path. A sweep over this config keeps its experiment here too unless its `checkpoint.storage_path` says otherwise (and takes the checkpoint settings below the same way)."""
    checkpoint_frequency: int = Field(default=10, ge=0)
    """Save a checkpoint every this many training iterations (0: only at the end and on Ctrl-C)."""
    num_to_keep: int | None = Field(default=None, ge=1)
    """Keep only this many most recent checkpoints (unset: keep all)."""
    checkpoint_at_end: bool = True
    """Save a checkpoint when training stops (stop criteria reached or Ctrl-C)."""
    return_window: Annotated[int, RLlib(call="reporting", name="metrics_num_episodes_for_smoothing")] = Field(
        default=100, ge=1
    )
    """N for `raytrain/episode_return_mean_<N>`: the running mean over the last N finished episodes."""

    _absolute = field_validator("storage_path")(classmethod(lambda cls, value: absolute_path(value)))
    _name = field_validator("name")(classmethod(lambda cls, value: value if value is None else folder_name(value)))


class EnvironmentConfig(_Section):
    """The environment to train on (RLlib `config.environment()`)."""

    RLLIB_CALL = "environment"

    env: Annotated[str, RLlib(import_path=True)]
    """A registered Gymnasium id (`CartPole-v1`); an id that a package registers when imported, named as gymnasium.make takes it (`"ale_py:ALE/Pong-v5"`); or an import path `"pkg.module:Class"` of a gymnasium.Env. Modules are found in the current directory first (as Ray's workers find them), then among what is installed."""
    env_config: dict[str, Any] = Field(default_factory=dict)
    """Keyword arguments for the env: passed to `gymnasium.make` (a key neither it nor the registered env's constructor takes is refused, with the keys it takes) or to the class as its `config`."""
    clip_rewards: Positive | StrictBool | None = None
    """Clip rewards to [-x, x] (a number > 0) or to their sign (true); false: never clip."""
    normalize_actions: bool | None = None
    """Let the policy act in [-1, 1] and unsquash to the env's Box bounds."""
    clip_actions: bool | None = None
    """Clip actions to the env's Box bounds before stepping."""


class EnvRunnersConfig(_Section):
    """Sampling (RLlib `config.env_runners()`)."""

    RLLIB_CALL = "env_runners"

    num_env_runners: int | None = Field(default=None, ge=0)
    """Remote EnvRunner actors (0: sample in the driver process)."""
    num_envs_per_env_runner: int | None = Field(default=None, ge=1)
    """Vectorized sub-environments in each EnvRunner."""
    rollout_fragment_length: Size | Literal["auto"] | None = None
    """Steps per env per sample call; "auto" derives it from the train batch size."""
    batch_mode: Literal["truncate_episodes", "complete_episodes"] | None = None
    """Cut episodes at the fragment length, or only return complete episodes."""
    # On the new stack RLlib ignores `observation_filter`; the filter is an env-to-module connector.
    observation_filter: Annotated[
        Literal["NoFilter", "MeanStdFilter"] | None,
        RLlib(
            name="env_to_module_connector",
            values={"MeanStdFilter": "raytrain.rllib.connectors:mean_std_filter", "NoFilter": None},
            import_path=True,
        ),
    ] = None
    """MeanStdFilter normalizes observations with running statistics (RLlib's MeanStdFilter connector)."""
    flatten_observations: Annotated[
        bool | None,
        RLlib(name="env_to_module_connector", values={True: "raytrain.rllib.connectors:flatten_observations",
                                                      False: None}, import_path=True),
    ] = None
    """true: give the network each observation as one vector (RLlib's FlattenObservations connector: a Discrete becomes one-hot, a MultiDiscrete one-hot per part, a Tuple or Dict one vector), for envs whose observations PPO's network cannot take as they are (FrozenLake-v1, Taxi-v3, Blackjack-v1); before the observation_filter."""
    num_cpus_per_env_runner: float | None = Field(default=None, ge=0)
    """CPUs reserved for each EnvRunner actor."""
    num_gpus_per_env_runner: float | None = Field(default=None, ge=0)
    """GPUs reserved for each EnvRunner actor (fractions allowed)."""
    custom_resources_per_env_runner: Annotated[dict[str, NonNegative] | None,
                                               AfterValidator(custom_resources("env_runner"))] = None
    """Custom Ray resources each EnvRunner needs, e.g. `{node_m8: 0.01}`: checked against the Ray's (a local Ray has none); not Ray's own (`CPU`, `GPU`, `memory`)."""
    explore: bool | None = None
    """Sample stochastic actions while training (true) or greedy ones."""
    sample_timeout_s: float | None = Field(default=None, gt=0)
    """Seconds to wait for samples before an EnvRunner is considered stuck."""


class TrainingConfig(_Section):
    """PPO loss and optimisation (RLlib `config.training()`)."""

    RLLIB_CALL = "training"

    lr: Positive | Schedule | None = None
    """Learning rate > 0: a number, or `{schedule: linear, start, end, timesteps}` / `{schedule: piecewise, points}` with values >= 0 (a warm-up may start at 0)."""
    gamma: float | None = Field(default=None, gt=0, le=1)
    """Discount factor, 0 < gamma <= 1."""
    lambda_: float | None = Field(default=None, alias="lambda", ge=0, le=1)
    """GAE lambda, 0 to 1 (written `lambda` in YAML)."""
    clip_param: float | None = Field(default=None, gt=0)
    """PPO surrogate clip range."""
    vf_clip_param: float | None = Field(default=None, gt=0)
    """Clip for the value-function loss; scale it with your returns."""
    vf_loss_coeff: float | None = Field(default=None, ge=0)
    """Weight of the value-function loss."""
    entropy_coeff: NonNegative | Schedule | None = None
    """Entropy bonus >= 0: a number or a schedule (see `lr`)."""
    use_critic: bool | None = None
    """Use a value-function baseline (required for GAE)."""
    use_gae: bool | None = None
    """Use Generalized Advantage Estimation."""
    use_kl_loss: bool | None = None
    """Add the adaptive KL penalty to the loss."""
    kl_coeff: float | None = Field(default=None, ge=0)
    """Initial KL penalty coefficient."""
    kl_target: float | None = Field(default=None, gt=0)
    """KL divergence target for the adaptive coefficient."""
    grad_clip: float | None = Field(default=None, gt=0)
    """Clip gradients to this value (see `grad_clip_by`)."""
    grad_clip_by: Literal["value", "norm", "global_norm"] | None = None
    """How `grad_clip` is applied."""
    train_batch_size: Annotated[int | None, RLlib(name="train_batch_size_per_learner")] = Field(default=None, gt=0)
    """Env steps per training iteration, per learner (RLlib `train_batch_size_per_learner`)."""
    minibatch_size: int | None = Field(default=None, gt=0)
    """SGD minibatch size."""
    num_epochs: int | None = Field(default=None, gt=0)
    """Passes over the train batch per iteration."""
    shuffle_batch_per_epoch: bool | None = None
    """Shuffle the train batch before each epoch."""

    _lr = field_validator("lr")(classmethod(lambda cls, v: _check_schedule(v, "learning rate", some_positive=True)))
    _entropy = field_validator("entropy_coeff")(
        classmethod(lambda cls, v: _check_schedule(v, "entropy coefficient", some_positive=False))
    )


class ModelConfig(_Section):
    """The default RLModule's network (RLlib `DefaultModelConfig`)."""

    RLLIB_CALL = "rl_module"
    RLLIB_WITHIN = "model_config"

    fcnet_hiddens: Annotated[list[Size] | None, AfterValidator(_layers)] = None
    """Hidden layer sizes of the MLP encoder (at least one)."""
    fcnet_activation: Activation | None = None
    """Activation of the MLP layers."""
    fcnet_kernel_initializer: Initializer | None = None
    """torch.nn.init function name for MLP weights, e.g. `orthogonal_`."""
    fcnet_kernel_initializer_kwargs: dict[str, Any] | None = None
    """Keyword arguments for `fcnet_kernel_initializer`."""
    fcnet_bias_initializer: Initializer | None = None
    """torch.nn.init function name for MLP biases, e.g. `zeros_`."""
    fcnet_bias_initializer_kwargs: dict[str, Any] | None = None
    """Keyword arguments for `fcnet_bias_initializer`."""
    fcnet_use_layernorm: bool | None = None
    """LayerNorm after each MLP layer."""
    conv_filters: list[tuple[Size, Size | tuple[Size, Size], Size | tuple[Size, Size]]] | None = None
    """CNN encoder layers `[[out_channels, kernel, stride], ...]` for image observations."""
    conv_activation: Activation | None = None
    """Activation of the CNN layers."""
    conv_kernel_initializer: Initializer | None = None
    """torch.nn.init function name for CNN weights."""
    conv_kernel_initializer_kwargs: dict[str, Any] | None = None
    """Keyword arguments for `conv_kernel_initializer`."""
    conv_bias_initializer: Initializer | None = None
    """torch.nn.init function name for CNN biases."""
    conv_bias_initializer_kwargs: dict[str, Any] | None = None
    """Keyword arguments for `conv_bias_initializer`."""
    head_fcnet_hiddens: list[Size] | None = None
    """Hidden layer sizes of the policy and value heads."""
    head_fcnet_activation: Activation | None = None
    """Activation of the head layers."""
    head_fcnet_kernel_initializer: Initializer | None = None
    """torch.nn.init function name for head weights."""
    head_fcnet_kernel_initializer_kwargs: dict[str, Any] | None = None
    """Keyword arguments for `head_fcnet_kernel_initializer`."""
    head_fcnet_bias_initializer: Initializer | None = None
    """torch.nn.init function name for head biases."""
    head_fcnet_bias_initializer_kwargs: dict[str, Any] | None = None
    """Keyword arguments for `head_fcnet_bias_initializer`."""
    head_fcnet_use_layernorm: bool | None = None
    """LayerNorm after each head layer."""
    free_log_std: bool | None = None
    """Continuous actions: a state-independent learned log-std."""
    log_std_clip_param: float | None = Field(default=None, gt=0)
    """Continuous actions: clip the log-std to [-x, x]."""
    vf_share_layers: bool | None = None
    """Policy and value function share the encoder (then tune `training.vf_loss_coeff`)."""
    use_lstm: bool | None = None
    """Wrap the encoder in an LSTM."""
    max_seq_len: int | None = Field(default=None, gt=0)
    """LSTM: maximum sequence length for training."""
    lstm_cell_size: int | None = Field(default=None, gt=0)
    """LSTM: cell size."""
    lstm_use_prev_action: bool | None = None
    """LSTM: feed the previous action."""
    lstm_use_prev_reward: bool | None = None
    """LSTM: feed the previous reward."""
    lstm_kernel_initializer: Initializer | None = None
    """torch.nn.init function name for LSTM weights."""
    lstm_kernel_initializer_kwargs: dict[str, Any] | None = None
    """Keyword arguments for `lstm_kernel_initializer`."""
    lstm_bias_initializer: Initializer | None = None
    """torch.nn.init function name for LSTM biases."""
    lstm_bias_initializer_kwargs: dict[str, Any] | None = None
    """Keyword arguments for `lstm_bias_initializer`."""
    fusionnet_hiddens: list[Size] | None = None
    """Multi-input (Dict) observations: hidden sizes of the net that fuses the per-input encodings."""
    fusionnet_activation: Activation | None = None
    """Activation of the fusion net."""
    fusionnet_kernel_initializer: Initializer | None = None
    """torch.nn.init function name for fusion-net weights."""
    fusionnet_kernel_initializer_kwargs: dict[str, Any] | None = None
    """Keyword arguments for `fusionnet_kernel_initializer`."""
    fusionnet_bias_initializer: Initializer | None = None
    """torch.nn.init function name for fusion-net biases."""
    fusionnet_bias_initializer_kwargs: dict[str, Any] | None = None
    """Keyword arguments for `fusionnet_bias_initializer`."""


class LearnersConfig(_Section):
    """Learner actors (RLlib `config.learners()`)."""

    RLLIB_CALL = "learners"

    num_learners: int | None = Field(default=None, ge=0)
    """Remote Learner actors (0: learn in the driver process)."""
    num_cpus_per_learner: NonNegative | Literal["auto"] | None = None
    """CPUs per Learner actor ("auto": 1 without a GPU, else 0)."""
    num_gpus_per_learner: float | None = Field(default=None, ge=0)
    """GPUs per Learner actor (fractions allowed)."""
    local_gpu_idx: int | None = Field(default=None, ge=0)
    """GPU index the local Learner uses when `num_learners` is 0."""
    custom_resources_per_learner: Annotated[dict[str, NonNegative] | None,
                                            AfterValidator(custom_resources("learner"))] = None
    """Custom Ray resources each remote Learner needs: checked against the Ray's (a local Ray has none); not Ray's own (`CPU`, `GPU`, `memory`)."""


class ResourcesConfig(_Section):
    """The algorithm process and its placement (RLlib `config.resources()`)."""

    RLLIB_CALL = "resources"

    num_cpus_for_main_process: float | None = Field(default=None, ge=0)
    """CPUs reserved for the main (driver/trainable) process."""
    placement_strategy: Literal["PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD"] | None = None
    """Ray placement-group strategy for a sweep trial's actors (Tune's placement group; checked against the Ray's nodes). `raytrain train` places no group: it warns."""


class EvaluationConfig(_Section):
    """Periodic evaluation (RLlib `config.evaluation()`)."""

    RLLIB_CALL = "evaluation"

    evaluation_interval: int | None = Field(default=None, ge=1)
    """Evaluate every this many training iterations (unset: never)."""
    evaluation_duration: Size | Literal["auto"] | None = None
    """How much to evaluate, in `evaluation_duration_unit`s."""
    evaluation_duration_unit: Literal["episodes", "timesteps"] | None = None
    """Unit of `evaluation_duration`."""
    evaluation_num_env_runners: int | None = Field(default=None, ge=0)
    """EnvRunners dedicated to evaluation (0: evaluate in the driver)."""
    evaluation_parallel_to_training: bool | None = None
    """Run evaluation while the next training step runs."""
    evaluation_explore: Annotated[bool | None, RLlib(name="evaluation_config", values={
        True: {"explore": True}, False: {"explore": False}})] = None
    """Evaluate with sampled actions (true, as in training) or the greedy ones (false): RLlib `evaluation_config={explore: ...}`."""


class RaytrainConfig(RefuseBoolsForNumbers):
    """A raytrain train config: `raytrain train FILE`."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, allow_inf_nan=False)

    experiment: ExperimentConfig = Field(default_factory=ExperimentConfig)
    """Where and how the run is recorded."""
    environment: EnvironmentConfig
    """The environment."""
    env_runners: EnvRunnersConfig = Field(default_factory=EnvRunnersConfig)
    """Sampling."""
    training: TrainingConfig = Field(default_factory=TrainingConfig)
    """PPO hyperparameters."""
    model: ModelConfig = Field(default_factory=ModelConfig)
    """The network."""
    learners: LearnersConfig = Field(default_factory=LearnersConfig)
    """Learner actors."""
    resources: ResourcesConfig = Field(default_factory=ResourcesConfig)
    """Main process and placement."""
    evaluation: EvaluationConfig = Field(default_factory=EvaluationConfig)
    """Periodic evaluation."""
    stop: dict[str, float] = Field(default_factory=dict)
    """Stop when any reported metric reaches its threshold (>=), e.g. `raytrain/episode_return_mean_100: 450`."""

    @field_serializer("stop")
    def _stop_as_written(self, stop: dict[str, float]) -> dict[str, float | int]:
        return thresholds_as_written(stop)

    @model_validator(mode="after")
    def _default_name(self) -> RaytrainConfig:
        if self.experiment.name is None:
            env = self.environment.env.rsplit(":", 1)[-1].rsplit("/", 1)[-1]
            self.experiment.name = as_folder_name(f"ppo_{env}")
        return self

    @property
    def return_metric(self) -> str:
        """Name of the running-mean return metric for this config's window."""
        return f"raytrain/episode_return_mean_{self.experiment.return_window}"

    def to_yaml_dict(self, *, only_written: bool = False) -> dict[str, Any]:
        """The config as a YAML-ready dict with the user-facing (new) names, unset fields left out.

        only_written: also leave out every field at its default that the file did not write (a converted
        file stays short and portable: `~/raytrain_results`, not the converting machine's home).
        """
        return self.model_dump(mode="json", by_alias=True, exclude_none=True, exclude_unset=only_written)


def thresholds_as_written(stop: dict[str, float]) -> dict[str, float | int]:
    """Stop thresholds for a file: a whole number as the integer it was written as (`training_iteration: 3`,
    not `3.0`); the schema keeps them as floats."""
    return {k: int(v) if v.is_integer() else v for k, v in stop.items()}


SECTIONS: dict[str, type[_Section]] = {
    "experiment": ExperimentConfig,
    "environment": EnvironmentConfig,
    "env_runners": EnvRunnersConfig,
    "training": TrainingConfig,
    "model": ModelConfig,
    "learners": LearnersConfig,
    "resources": ResourcesConfig,
    "evaluation": EvaluationConfig,
}


def whole_numbers_only(key: str) -> bool:
    """Whether the setting at a dotted key (`training.num_epochs`) takes whole numbers and no fractions."""
    import types
    import typing

    section, _, name = key.partition(".")
    model = SECTIONS.get(section)
    field = None if model is None else next(
        (f for n, f in model.model_fields.items() if name in (n, f.alias)), None)
    if field is None:
        return False
    found, stack = set(), [field.annotation]
    while stack:
        annotation = stack.pop()
        origin = typing.get_origin(annotation)
        if origin is typing.Annotated:
            stack.append(typing.get_args(annotation)[0])
        elif origin in (typing.Union, types.UnionType):
            stack.extend(typing.get_args(annotation))
        elif annotation in (int, float):
            found.add(annotation)
    return found == {int}


def section_keys(section: str) -> list[str]:
    """The YAML keys a section accepts (aliases such as `lambda` included)."""
    model = SECTIONS[section]
    return [f.alias or name for name, f in model.model_fields.items()]


@dataclass(frozen=True)
class RLlibField:
    """One schema field that reaches RLlib, and where: `call(within={keyword: value})` or `call(keyword=value)`."""

    section: str
    name: str
    """The field's Python name (`lambda_`)."""
    key: str
    """The field's YAML key (`lambda`)."""
    call: str
    """The PPOConfig builder method."""
    within: str | None
    """The keyword of the dict the value goes in (`model_config`), or None."""
    keyword: str
    """RLlib's name of the setting."""
    marker: RLlib

    @property
    def renamed_only(self) -> bool:
        """RLlib takes the same value under another name in the section's own call: RLlib's spelling of the key."""
        in_section_call = self.call == SECTIONS[self.section].RLLIB_CALL
        return in_section_call and self.keyword != self.key and not self.marker.values


def _marker(info: FieldInfo) -> RLlib:
    return next((m for m in info.metadata if isinstance(m, RLlib)), RLlib())


def rllib_fields() -> list[RLlibField]:
    """Every field that reaches RLlib: the fields of sections with an `RLLIB_CALL` and the marked ones
    of the others, in section and field order."""
    found: list[RLlibField] = []
    for section, model in SECTIONS.items():
        for name, info in model.model_fields.items():
            marker = _marker(info)
            call = marker.call or model.RLLIB_CALL
            if call is None:
                continue
            within = None if marker.call else model.RLLIB_WITHIN
            found.append(RLlibField(section, name, info.alias or name, call, within, marker.name or name, marker))
    return found

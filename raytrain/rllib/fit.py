"""Whether a checkpoint's network fits a config: checked before a `--resume` starts Ray.

A resume builds the algorithm from the resumed config and then loads the checkpoint's weights into it. When
the config's `model` or `environment` changed so that the network has other shapes (wider layers, another
env's observation or action space), torch's `load_state_dict` fails with a page of size mismatches, after Ray
started and the algorithm was built. Here the network is built in this process (no Ray) and its shapes are
compared with the checkpoint's saved weights, only when one of those sections differs from the checkpoint's.
"""

from __future__ import annotations

import logging
import pickle
from collections.abc import Collection
from pathlib import Path
from typing import TYPE_CHECKING, Any

from raytrain.errors import ConfigIssue

if TYPE_CHECKING:
    from raytrain.config.schema import RaytrainConfig
    from raytrain.config.source import Source

SECTIONS = ("environment", "model")
"""The sections whose values decide the network's shapes."""
FIELDS = (("env_runners", "flatten_observations"),)
"""The fields of other sections that do: what the network's input is."""

MODULE_STATE = Path("learner_group", "learner", "rl_module", "default_policy", "module_state.pkl")


def _dotted(section: str, data: dict[str, Any]) -> dict[str, Any]:
    return {f"{section}.{key}": value for key, value in data.items()}


def changed_keys(saved: RaytrainConfig, cfg: RaytrainConfig) -> dict[str, tuple[Any, Any]]:
    """{dotted key: (saved value, value)} of the keys of `SECTIONS` and `FIELDS` that differ between two configs, in
    schema order."""
    changed = {}
    for section in SECTIONS:
        old = _dotted(section, getattr(saved, section).model_dump(mode="json"))
        new = _dotted(section, getattr(cfg, section).model_dump(mode="json"))
        changed.update({key: (old.get(key), value) for key, value in new.items() if old.get(key) != value})
    for section, name in FIELDS:
        was, value = getattr(getattr(saved, section), name), getattr(getattr(cfg, section), name)
        if was != value:
            changed[f"{section}.{name}"] = (was, value)
    return changed


def _saved_shapes(checkpoint: Path) -> dict[str, tuple[int, ...]] | None:
    try:
        with (checkpoint / MODULE_STATE).open("rb") as f:
            state = pickle.load(f)  # raytrain's own checkpoint, as RLlib's restore reads it
    except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError):
        return None
    import numpy as np

    return {key: tuple(np.shape(value)) for key, value in state.items()} if isinstance(state, dict) else None


def _make_env(config: Any) -> Any:
    """One env as RLlib's env runners make it from the PPOConfig `config`, or None when it cannot be made here
    (the env's own errors: RLlib reports them when it makes the env). Gymnasium's DependencyNotInstalled (a
    package the env needs is missing: an install step, not the env's own error) is raised."""
    return _made_env(config)[0]


def _made_env(config: Any) -> tuple[Any, tuple[str, str] | None]:
    """`_make_env`'s env, and when it is None for a key the env read from its env_config and did not find there
    (`config["size"]`: a KeyError raised where the mapping RLlib passes is at hand), that key and where it was read
    (` (envs.py:5: self.size = config["size"])`)."""
    import gymnasium
    from gymnasium.error import DependencyNotInstalled
    from ray.rllib.env.env_context import EnvContext

    maker: Any = config.env  # an id for gymnasium.make, or the env's class (an import path resolved)
    context = EnvContext(dict(config.env_config), worker_index=0)
    try:
        if callable(maker):
            return maker(context), None
        return gymnasium.make(maker, **config.env_config), None
    except DependencyNotInstalled:
        raise
    except KeyError as exc:
        key = exc.args[0] if len(exc.args) == 1 else None
        if not isinstance(key, str) or key in context or not _raised_with(exc, context):
            return None, None
        from raytrain.imports import raised_at

        return None, (key, raised_at(exc))
    except Exception:
        return None, None


def _raised_with(exc: BaseException, mapping: Any) -> bool:
    """Whether `exc` was raised in a frame that holds `mapping` itself (the env reading its own config)."""
    import traceback

    frames = [frame for frame, _ in traceback.walk_tb(exc.__traceback__)]
    return bool(frames) and any(value is mapping for value in frames[-1].f_locals.values())


def _missing_key(cfg: RaytrainConfig, key: str, where: str) -> str:
    has = ", ".join(sorted(map(str, cfg.environment.env_config))) or "nothing"
    return (f"{cfg.environment.env} reads env_config[{key!r}]{where}, and environment.env_config has no {key!r} "
            f"(it has {has}): set it, e.g. environment: {{env_config: {{{key}: ...}}}}")


def observation_problem(cfg: RaytrainConfig, searched: Collection[str] = ()) -> str | None:
    """Why PPO's default network cannot take the env's observations or actions, else None.

    RLlib's encoders take a Box of one dimension (a vector: an MLP) or three (an image: a CNN). Any other
    observation space (a Dict, a Tuple, a Discrete, a 2D Box) failed in every env runner and learner once Ray
    had started, with a page of tracebacks per actor; so did an action space with no action distribution
    (MultiBinary, a 2D Box). PPO's catalog, which RLlib's build asks, is asked here with
    one env made in this process (the env's make time; the catalog builds no network). An env Gymnasium
    cannot make for a missing package (`LunarLander-v3` without Box2D) failed the same way: said here too. So is
    an env that reads a key its env_config lacks (`KeyError: 'size'`, exit 1 once Ray had started), unless the
    dotted key is among `searched` (a sweep's trials each set it).
    """
    found = unfit(cfg, searched)
    return None if found is None else found[1]


ENV = "environment.env"


def unfit(cfg: RaytrainConfig, searched: Collection[str] = ()) -> tuple[str, str] | None:
    """`observation_problem`'s problem and the dotted key it is at: `environment.env`, or the model setting that
    the env's spaces cannot take (`model.free_log_std`)."""
    from gymnasium.error import DependencyNotInstalled
    from ray.rllib.algorithms.ppo.ppo_catalog import PPOCatalog

    from raytrain.rllib.translate import build_ppo_config

    config = build_ppo_config(cfg)
    try:
        env, missing = _made_env(config)
    except DependencyNotInstalled as exc:
        return ENV, (f"{cfg.environment.env!r} cannot be made here: a package it needs is not installed: {exc} (install it "
                "into the Python that runs raytrain, and on every node of a cluster)")
    if env is None:
        if missing is not None:
            return None if f"environment.env_config.{missing[0]}" in searched else (ENV, _missing_key(cfg, *missing))
        misnamed = _misnamed_config(config.env) if isinstance(config.env, type) else None
        return None if misnamed is None else (ENV, misnamed)
    try:
        problem = _space_problem(cfg, env, PPOCatalog, dict(config.model_config)) or _api_problem(env)
        return (ENV, problem) if problem is not None else _model_problem(cfg, env, PPOCatalog, dict(config.model_config))
    finally:
        env.close()


def _model_problem(cfg: RaytrainConfig, env: Any, catalog_class: Any, model_config: dict[str, Any]) -> tuple[str, str] | None:
    """A model setting the env's actions cannot take, and why, else None: `free_log_std` asserted `free_log_std
    is only supported for DiagGaussian action distributions` in every learner once Ray had started."""
    if not model_config.get("free_log_std"):
        return None
    from ray.rllib.core.distribution.torch.torch_distribution import TorchDiagGaussian

    try:
        catalog = catalog_class(network_observations(cfg, env), env.action_space, model_config)
        distribution = catalog.get_action_dist_cls(framework="torch")
    except Exception:
        return None
    if isinstance(distribution, type) and issubclass(distribution, TorchDiagGaussian):
        return None
    return ("model.free_log_std", "is for continuous actions (a Gaussian's log-std learned apart from the observation), "
            f"and the env's action space {env.action_space} has no Gaussian: leave it out")


_CONV = ("conv_filters", "conv_activation", "conv_kernel_initializer", "conv_kernel_initializer_kwargs",
         "conv_bias_initializer", "conv_bias_initializer_kwargs")
_FCNET = ("fcnet_hiddens", "fcnet_activation", "fcnet_kernel_initializer", "fcnet_kernel_initializer_kwargs",
          "fcnet_bias_initializer", "fcnet_bias_initializer_kwargs", "fcnet_use_layernorm")


def env_idle_settings(cfg: RaytrainConfig, searched: Collection[str] = ()) -> dict[str, str]:
    """{dotted key: why} for each model setting `cfg` writes (or a sweep searches: `searched`) that the network RLlib
    builds for the env's spaces never reads: `conv_*` for vector observations (an MLP encoder), `fcnet_*` for images
    (a CNN encoder, without an LSTM), `log_std_clip_param` for actions with no Gaussian. Each was dropped without a
    word. One env is made only when there is one of them ({} when it cannot be made here: other checks say why)."""
    m = cfg.model
    written = [name for name in (*_CONV, *_FCNET, "log_std_clip_param")
               if getattr(m, name) is not None or f"model.{name}" in searched]
    if not written:
        return {}
    from ray.rllib.algorithms.ppo.ppo_catalog import PPOCatalog

    from raytrain.rllib.translate import build_ppo_config

    config = build_ppo_config(cfg)
    try:
        env, _ = _made_env(config)
    except Exception:
        return {}
    if env is None:
        return {}
    idle: dict[str, str] = {}
    try:
        observations = network_observations(cfg, env)
        dims = len(observations.shape) if getattr(observations, "shape", None) is not None else None
        if dims == 1:
            idle |= {f"model.{name}": f"has no effect: the network's observations ({_space(observations)}) are a vector, which "
                     "RLlib's encoder takes with an MLP (model.fcnet_*), not a CNN: leave it out"
                     for name in written if name in _CONV}
        elif dims == 3 and not m.use_lstm:
            idle |= {f"model.{name}": f"has no effect: the network's observations ({_space(observations)}) are images, which "
                     "RLlib's encoder takes with a CNN (model.conv_*; model.head_fcnet_* shape the heads after it): "
                     "leave it out" for name in written if name in _FCNET}
        if "log_std_clip_param" in written:
            from ray.rllib.core.distribution.torch.torch_distribution import TorchDiagGaussian

            distribution = PPOCatalog(observations, env.action_space, dict(config.model_config)
                                      ).get_action_dist_cls(framework="torch")
            if not (isinstance(distribution, type) and issubclass(distribution, TorchDiagGaussian)):
                idle["model.log_std_clip_param"] = (
                    f"has no effect: it clips a Gaussian's log-std, and the env's action space {env.action_space} has "
                    "no Gaussian: leave it out")
    except Exception:  # what RLlib cannot build: other checks say why
        return idle
    finally:
        env.close()
    return idle


def _space(space: Any) -> str:
    """A Box as its shape and dtype (`Box(4,) float32`): its repr lists every bound."""
    from gymnasium.spaces import Box

    return f"Box{space.shape} {space.dtype}" if isinstance(space, Box) else str(space)


def _misnamed_config(maker: Any) -> str | None:
    """For a custom env class that could not be made here: when its one required parameter is not named for the
    config RLlib passes (`def __init__(self, size)`), that this is why, else None. RLlib's message was the env's
    own error about the mapping it got (`Expected all Box shape elements to be integer, actual type=(EnvContext,)`),
    in every env runner once Ray had started."""
    import inspect

    try:
        signature = inspect.signature(maker)
    except (TypeError, ValueError):
        return None
    required = [p for p in signature.parameters.values() if p.default is p.empty
                and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(required) != 1 or required[0].name in _CONFIG_NAMES:
        return None
    name, first = getattr(maker, "__name__", str(maker)), required[0].name
    return (f"RLlib makes a custom env as {name}(env_config), one argument (environment.env_config, a mapping), and "
            f"{name}{signature} takes that mapping as {first}: take one argument and read {first} from it "
            f"(environment.env_config: {{{first}: ...}})")


_CONFIG_NAMES = {"config", "env_config", "cfg", "conf", "configuration", "env_context", "context", "ctx", "options"}


_OLD_GYM = ("uses the Gym API of before Gymnasium 0.26, and RLlib calls Gymnasium's: reset(seed=None, options=None) "
            "returns (observation, info) and step(action) returns (observation, reward, terminated, truncated, info). "
            "Port the env (https://gymnasium.farama.org/introduction/migration_guide), or wrap an old Gym env with "
            "shimmy's GymV21CompatibilityV0")


def _api_problem(env: Any) -> str | None:
    """Why `env` does not follow Gymnasium's API as RLlib calls it (reset with a seed, a step of a sampled action),
    else None. The env's own errors are left to RLlib, which reports them where it makes the env."""
    import numpy as np

    def observation_misfit(what: str, observation: Any) -> str | None:
        space = env.observation_space
        shape = getattr(space, "shape", None)
        if shape is None or not isinstance(observation, np.ndarray | list | tuple | float | int) \
                or np.shape(observation) == tuple(shape) or type(space).__name__ != "Box":
            return None
        return (f"the env's {what} returned an observation of shape {np.shape(observation)}, and its observation_space "
                f"is {space}: RLlib sizes the network by the space, so make the two agree")

    try:
        reset = env.reset(seed=0)
    except TypeError as exc:
        if "seed" in str(exc) or "options" in str(exc) or "positional argument" in str(exc):
            return f"the env's reset() takes no seed ({type(exc).__name__}: {exc}): it {_OLD_GYM}"
        return None
    except Exception:  # the env's own error: RLlib reports it
        return None
    if not (isinstance(reset, tuple) and len(reset) == 2 and isinstance(reset[1], dict)):
        return f"the env's reset() returned {_kind_of(reset)}, not (observation, info): it {_OLD_GYM}"
    if (misfit := observation_misfit("reset()", reset[0])) is not None:
        return misfit
    try:
        step = env.step(env.action_space.sample())
    except Exception:
        return None
    if not (isinstance(step, tuple) and len(step) == 5):
        got = f"{len(step)} values" if isinstance(step, tuple) else _kind_of(step)
        return f"the env's step() returned {got}, not 5: it {_OLD_GYM}"
    return observation_misfit("step()", step[0])


def _kind_of(value: Any) -> str:
    if isinstance(value, tuple):
        return f"a tuple of {len(value)}"
    name = type(value).__name__
    return f"an {name}" if name[:1].lower() in "aeiou" or name == "ndarray" else f"a {name}"


FLATTEN = "env_runners.flatten_observations"


def network_observations(cfg: RaytrainConfig, env: Any) -> Any:
    """The observation space the network of `cfg` takes from `env`: the env's, or with `env_runners.flatten_observations`
    what RLlib's FlattenObservations connector makes of it (raises what that raises for a space it cannot flatten)."""
    if not cfg.env_runners.flatten_observations:
        return env.observation_space
    from ray.rllib.connectors.env_to_module import FlattenObservations

    return FlattenObservations(input_observation_space=env.observation_space,
                               input_action_space=env.action_space).observation_space


def _integer_box(observations: Any) -> str | None:
    """Why a Box of integers (uint8 pixels, int64 counts) cannot reach PPO's network, else None: torch's layers
    take floats, and RLlib passes the observations on as they are (`RuntimeError: mat1 and mat2 must have the
    same dtype` or `Input type (unsigned char) and bias type (float) should be the same`, in the first iteration,
    once Ray had started and the run folder was made)."""
    import gymnasium
    import numpy as np

    if not isinstance(observations, gymnasium.spaces.Box) or np.issubdtype(observations.dtype, np.floating):
        return None
    if len(observations.shape) == 3:
        return (f"the env's observations are images of {observations.dtype}, {observations}, and RLlib's CNN takes "
                "floats: make them float32 where the env is made (scaled to [0, 1], with a float32 Box: "
                "gymnasium.wrappers.TransformObservation), or set `" + FLATTEN + ": true` for a vector of floats "
                "(an MLP over the pixels)")
    return (f"the env's observations are {observations.dtype}, {observations}, and PPO's network takes floats: set `"
            f"{FLATTEN}: true` (it gives float32 vectors), or make them float32 where the env is made")


def _integer_actions(actions: Any) -> str | None:
    """Why a bounded Box of integers cannot be PPO's action space, with the MultiDiscrete that can, else None."""
    import gymnasium
    import numpy as np

    if not isinstance(actions, gymnasium.spaces.Box) or not np.issubdtype(actions.dtype, np.integer) \
            or len(actions.shape) != 1 or not actions.is_bounded():
        return None
    low, high = actions.low.astype(np.int64), actions.high.astype(np.int64)
    nvec = [int(n) for n in high - low + 1]
    shift = f" (add the Box's low, {[int(v) for v in low]}, in the env)" if low.any() else ""
    return (f"the env's action space {actions} holds integers, and PPO's Box actions are floats (a Gaussian): for "
            f"integer actions use MultiDiscrete({nvec}), whose actions count from 0{shift}")


def _space_problem(cfg: RaytrainConfig, env: Any, catalog_class: Any, model_config: dict[str, Any]) -> str | None:
    from ray.rllib.utils.error import UnsupportedSpaceException

    try:
        observations = network_observations(cfg, env)
    except Exception as exc:
        return (f"the env's observation space {env.observation_space} cannot be flattened ({FLATTEN}): RLlib's "
                f"FlattenObservations says {type(exc).__name__}: {exc}. Give the env an observation space of Boxes, "
                "Discretes and MultiDiscretes (in a Tuple or Dict where need be)")
    if (integers := _integer_box(observations)) is not None:
        return integers
    try:
        catalog = catalog_class(observations, env.action_space, model_config)
    except ValueError:
        shape = getattr(observations, "shape", None)
        if shape is not None and len(shape) == 3:  # an image of a size RLlib has no default CNN for
            return (f"the env's observations are images of shape {list(shape)}, for which RLlib has no default CNN (it "
                    "has one for 42x42, 64x64, 84x84 and 10x10 images, any number of channels): set model.conv_filters, "
                    "a [out_channels, kernel, stride] per layer, or resize the images in the env (Atari's wrappers give "
                    "84x84)")
        return (f"the env's observation space {env.observation_space} has no network of PPO's: RLlib's encoders take a "
                f"Box of one dimension (a vector) or three (an image). Set `{FLATTEN}: true` to give the network each "
                "observation as one vector (RLlib's FlattenObservations: a Discrete becomes one-hot, a Dict or Tuple "
                "one vector)")
    except Exception:  # anything else: RLlib's build reports it as it does now
        return None
    if (integers := _integer_actions(env.action_space)) is not None:
        return integers
    try:
        catalog.get_action_dist_cls(framework="torch")
    except (UnsupportedSpaceException, NotImplementedError, ValueError):
        return (f"the env's action space {env.action_space} has no action distribution of PPO's: RLlib takes a "
                "Discrete, a MultiDiscrete, a Box of one dimension, or a Tuple or Dict of these. Change the env's "
                "action space (a MultiBinary(n) as MultiDiscrete([2] * n), a Box of more dimensions flattened to one)")
    except Exception:
        return None
    return None


def observation_issue(cfg: RaytrainConfig, source: Source, searched: Collection[str] = ()) -> ConfigIssue | None:
    """`observation_problem` at `environment.env` of `source`."""
    found = unfit(cfg, searched)
    if found is None:
        return None
    key, problem = found
    return ConfigIssue(source.where(tuple(key.split("."))), key, problem)


def built_shapes(cfg: RaytrainConfig) -> dict[str, tuple[int, ...]] | None:
    """The shapes of the network `cfg` builds, or None when its env cannot be made here (RLlib says why later)."""
    from gymnasium.error import DependencyNotInstalled

    from raytrain.rllib.translate import build_ppo_config

    config = build_ppo_config(cfg)
    try:
        env = _make_env(config)
    except DependencyNotInstalled:
        return None  # left to RLlib's build, as the env's own errors are
    if env is None:
        return None
    # RLlib's own build warns that it makes a deprecated RLModuleConfig (through Ray's deprecation logger).
    loggers = [logging.getLogger(name) for name in ("ray._common.deprecation", "ray.rllib")]
    levels = [log.level for log in loggers]
    for log in loggers:
        log.setLevel(logging.ERROR)
    try:
        from ray.rllib.core import DEFAULT_MODULE_ID

        spaces = {DEFAULT_MODULE_ID: (network_observations(cfg, env), env.action_space)}
        module = config.get_rl_module_spec(spaces=spaces).build()
    finally:
        for log, level in zip(loggers, levels):
            log.setLevel(level)
        env.close()
    state: dict[str, Any] = module.get_state()  # the torch module's weights, as RLlib saves them
    return {key: tuple(value.shape) for key, value in state.items()}


def _shape(shape: tuple[int, ...] | None) -> str:
    return "absent" if shape is None else str(list(shape))


Shapes = dict[str, tuple[int, ...]]


def first_misfit(old: Shapes, new: Shapes) -> tuple[str, str, str]:
    """The first weight whose shape differs between two networks' shapes, and its shape in each (or `absent`)."""
    param = next(key for key in sorted(old.keys() | new.keys()) if old.get(key) != new.get(key))
    return param, _shape(old.get(param)), _shape(new.get(param))


def _shapes_first(key: str) -> int:
    """The changed key a misfit is blamed on, by what it changes: the network's own settings (model.*) first, then
    the env and what makes its spaces, then the rest (environment.normalize_actions changes no shape)."""
    if key.startswith("model."):
        return 0
    if key in ("environment.env", "environment.env_config", "env_runners.flatten_observations"):
        return 1
    return 2


def network_misfit(cfg: RaytrainConfig, source: Source, checkpoint: Path, saved: RaytrainConfig) -> ConfigIssue | None:
    """An issue at the changed key when the network `cfg` builds cannot take `checkpoint`'s weights, else None.

    `saved` is the config the checkpoint was written with. Nothing is built when no key of `SECTIONS` or `FIELDS`
    changed.
    """
    changed = changed_keys(saved, cfg)
    if not changed:
        return None
    old, new = _saved_shapes(checkpoint), None
    if old is not None:
        new = built_shapes(cfg)
    if old is None or new is None or old == new:
        return None
    param, saved_shape, built_shape = first_misfit(old, new)
    # min() keeps the first of equals: schema order decides last
    key = min(changed, key=lambda k: (_shapes_first(k), not (source.where(k.split(".")) or "").startswith("--set ")))
    was, value = changed[key]
    others = [k for k in changed if k != key]
    return ConfigIssue(
        source.where(key.split(".")),
        key,
        f"the checkpoint's network does not fit this config: {was!r} in {checkpoint.name}, {value!r} "
        f"here ({param}: {saved_shape} saved, {built_shape} built"
        f"{'; also changed: ' + ', '.join(others) if others else ''}). A resumed run continues the network it "
        "trained: keep the checkpoint's value, or start a new run (raytrain train FILE)",
    )

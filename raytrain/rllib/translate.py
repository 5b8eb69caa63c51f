"""Validated raytrain config -> the exact keyword arguments of each `PPOConfig` builder call -> PPOConfig.

`rllib_calls` is pure data (JSON-ready, no Ray import) so it can be printed by `raytrain config show`,
compared in golden tests and stored in run folders. `build_ppo_config` applies it.
"""

from __future__ import annotations

from typing import Any

from raytrain.config.schema import RaytrainConfig

# Import paths of the callables raytrain plugs into RLlib.
MEAN_STD_FILTER = "raytrain.rllib.connectors:mean_std_filter"
CALLBACKS = "raytrain.rllib.callbacks:RaytrainCallbacks"


def _set(section) -> dict[str, Any]:
    """The fields of a section that the user set (None means RLlib's default)."""
    return {name: getattr(section, name) for name in type(section).model_fields if getattr(section, name) is not None}


def _schedule_or_value(value: Any) -> Any:
    return value.to_rllib() if hasattr(value, "to_rllib") else value


def rllib_calls(cfg: RaytrainConfig) -> dict[str, dict[str, Any]]:
    """The PPOConfig builder calls for `cfg`: {method name: keyword arguments}, in call order.

    Every field the user set appears here (the invariant the golden tests check).
    """
    calls: dict[str, dict[str, Any]] = {}

    env = _set(cfg.environment)
    calls["environment"] = env

    runners = _set(cfg.env_runners)
    obs_filter = runners.pop("observation_filter", None)
    if obs_filter == "MeanStdFilter":
        # On the new stack `observation_filter` is ignored; the filter is an env-to-module connector.
        runners["env_to_module_connector"] = MEAN_STD_FILTER
    calls["env_runners"] = runners

    training = _set(cfg.training)
    if "train_batch_size" in training:
        training["train_batch_size_per_learner"] = training.pop("train_batch_size")
    for key in ("lr", "entropy_coeff"):
        if key in training:
            training[key] = _schedule_or_value(training[key])
    calls["training"] = training

    calls["rl_module"] = {"model_config": _set(cfg.model)}
    calls["learners"] = _set(cfg.learners)
    calls["resources"] = _set(cfg.resources)
    calls["evaluation"] = _set(cfg.evaluation)
    calls["reporting"] = {"metrics_num_episodes_for_smoothing": cfg.experiment.return_window}
    calls["callbacks"] = {"callbacks_class": CALLBACKS}
    if cfg.experiment.seed is not None:
        calls["debugging"] = {"seed": cfg.experiment.seed}
    return calls


def resolve_import(path: str) -> Any:
    """Import `"pkg.module:Name"` and return the object."""
    import importlib

    module_name, _, attr = path.partition(":")
    obj = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def build_ppo_config(cfg: RaytrainConfig, calls: dict[str, dict[str, Any]] | None = None):
    """Build the RLlib `PPOConfig` for `cfg` (imports Ray; does not start it)."""
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig
    from ray.util import log_once

    # raytrain only runs the new API stack; RLlib's "you are on the new stack" notice is noise here.
    log_once("PPO_on_new_api_stack")
    calls = rllib_calls(cfg) if calls is None else calls
    config = PPOConfig()
    for method, kwargs in calls.items():
        kwargs = dict(kwargs)
        if method == "environment" and ":" in kwargs["env"]:
            kwargs["env"] = resolve_import(kwargs["env"])
        if method == "env_runners" and "env_to_module_connector" in kwargs:
            kwargs["env_to_module_connector"] = resolve_import(kwargs["env_to_module_connector"])
        if method == "rl_module":
            kwargs["model_config"] = DefaultModelConfig(**kwargs["model_config"])
        if method == "callbacks":
            kwargs["callbacks_class"] = resolve_import(kwargs["callbacks_class"])
        getattr(config, method)(**kwargs)
    return config

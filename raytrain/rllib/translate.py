"""Validated raytrain config -> the exact keyword arguments of each `PPOConfig` builder call -> PPOConfig.

`rllib_calls` is pure data (JSON-ready, no Ray import) so it can be printed by `raytrain config show`,
compared in golden tests and stored in run folders. `build_ppo_config` applies it. Where each field
goes is read from the schema (`raytrain.config.schema.rllib_fields`), so a new field needs no edit here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from raytrain.config.schema import RaytrainConfig, RLlibField, rllib_fields
from raytrain.imports import gym_module_id, resolve_import

if TYPE_CHECKING:
    from ray.rllib.algorithms.ppo import PPOConfig

# Import path of the callbacks raytrain plugs into every run (its running-mean return metrics).
CALLBACKS = "raytrain.rllib.callbacks:RaytrainCallbacks"


def _rllib_value(field: RLlibField, value: Any) -> Any:
    """The value RLlib takes for a field's value (None: leave RLlib's default)."""
    if value is None:
        return None
    if field.marker.values:
        return field.marker.values.get(value, value)
    return value.to_rllib() if hasattr(value, "to_rllib") else value  # schedules


def rllib_calls(cfg: RaytrainConfig) -> dict[str, dict[str, Any]]:
    """The PPOConfig builder calls for `cfg`: {method name: keyword arguments}, in call order.

    Every field the user set appears here (the invariant the golden tests check). A section with a
    builder call of its own gets it even when empty; a call only marked fields lead to (`debugging`),
    only when one of them is set.
    """
    calls: dict[str, dict[str, Any]] = {}
    # The sections' own calls first (environment, env_runners, ...), then those of single fields (reporting).
    for field in sorted(rllib_fields(), key=lambda f: f.marker.call is not None):
        value = _rllib_value(field, getattr(getattr(cfg, field.section), field.name))
        if value is None and field.marker.call:
            continue
        kwargs = calls.setdefault(field.call, {})
        if field.within is not None:
            kwargs = kwargs.setdefault(field.within, {})
        if value is not None:
            kwargs[field.keyword] = value
    calls["callbacks"] = {"callbacks_class": CALLBACKS}
    return calls


def _import_paths() -> set[tuple[str, str]]:
    """(builder method, keyword) of every value that is an import path."""
    paths = {(f.call, f.keyword) for f in rllib_fields() if f.marker.import_path and f.within is None}
    return paths | {("callbacks", "callbacks_class")}


def build_ppo_config(cfg: RaytrainConfig, calls: dict[str, dict[str, Any]] | None = None) -> PPOConfig:
    """Build the RLlib `PPOConfig` for `cfg` (imports Ray; does not start it)."""
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig
    from ray.util import log_once

    # raytrain only runs the new API stack; RLlib's "you are on the new stack" notice is noise here.
    log_once("PPO_on_new_api_stack")
    calls = rllib_calls(cfg) if calls is None else calls
    import_paths = _import_paths()
    config = PPOConfig()
    for method, kwargs in calls.items():
        kwargs = {
            key: resolve_import(value) if (method, key) in import_paths and ":" in value and not gym_module_id(value) else value
            for key, value in kwargs.items()
        }
        if method == "rl_module":
            kwargs["model_config"] = DefaultModelConfig(**kwargs["model_config"])
        getattr(config, method)(**kwargs)
    return config

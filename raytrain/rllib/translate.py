"""Validated raytrain config -> the exact keyword arguments of each `PPOConfig` builder call -> PPOConfig.

`rllib_calls` is pure data (JSON-ready, no Ray import) so it can be printed by `raytrain config show`,
compared in golden tests and stored in run folders. `build_ppo_config` applies it. Where each field
goes is read from the schema (`raytrain.config.schema.rllib_fields`), so a new field needs no edit here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from raytrain.config.schema import RaytrainConfig, RLlibField, rllib_fields
from raytrain.imports import gym_module_id, resolve_import

if TYPE_CHECKING:
    from ray.rllib.algorithms.ppo import PPOConfig

    from raytrain.config.source import Source
    from raytrain.errors import ConfigIssue

# Import path of the callbacks raytrain plugs into every run (its running-mean return metrics).
CALLBACKS = "raytrain.rllib.callbacks:RaytrainCallbacks"
# The env-to-module connectors of env_runners.flatten_observations and observation_filter: MeanStdFilter together.
FLAT_MEAN_STD = "raytrain.rllib.connectors:flat_mean_std_filter"


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
    if cfg.env_runners.flatten_observations and cfg.env_runners.observation_filter == "MeanStdFilter":
        calls["env_runners"]["env_to_module_connector"] = FLAT_MEAN_STD  # both fields' connectors, in order
    calls["callbacks"] = {"callbacks_class": CALLBACKS}
    return calls


def rejected_setting(message: str, written: Callable[[str], bool]) -> str | None:
    """The dotted key (`evaluation.evaluation_parallel_to_training`) of the first setting that RLlib's error
    `message` names, by RLlib's name or raytrain's, and that `written` says the config writes; None when it
    names none. RLlib's cross-field checks name its settings ("`evaluation_parallel_to_training` can only be
    done if `evaluation_num_env_runners` > 0!"); the error then points at the line that wrote one."""
    import re

    keys: dict[str, list[str]] = {}
    for f in rllib_fields():
        for name in {f.keyword, f.key}:
            keys.setdefault(name, []).append(f"{f.section}.{f.key}")
    for token in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", message):
        for key in keys.get(token, []):
            if written(key):
                return key
    return None


def writes(source: Source, key: str) -> bool:
    """Whether `source` writes the dotted `key` (a file's line, or a `--set` of it or of its section)."""
    path = tuple(key.split("."))
    section = source.data.get(path[0])
    return path in source.origins or isinstance(section, dict) and path[-1] in section


def rllib_rejection(exc: Exception, source: Source, file: str) -> ConfigIssue:
    """RLlib's `validate()` error for the config loaded from `source` (read from `file`): at the setting it
    names that the config writes, else at the file."""
    from raytrain.errors import ConfigIssue

    text = rllib_error_text(exc)
    key = rejected_setting(text, lambda k: writes(source, k))
    where = file if key is None else source.where(tuple(key.split(".")))
    return ConfigIssue(where, key or "", f"RLlib rejects the config: {text}")


_SUPPRESS_HINT = "To suppress all validation errors, set `config.experimental(_validate_config=False)` at your own risk."


def rllib_error_text(exc: Exception) -> str:
    """RLlib's error, less its advice to turn validation off (`config.experimental(...)`), which a raytrain
    config cannot follow."""
    return " ".join(str(exc).replace(_SUPPRESS_HINT, "").split())


@contextmanager
def rllib_warnings() -> Iterator[list[str]]:
    """The warnings RLlib logs while the block runs (its config checks, some of them run several times over),
    each once, instead of printed raw with a timestamp: the list is filled as they come."""
    import logging

    found: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            text = " ".join(record.getMessage().split())
            if record.levelno >= logging.WARNING and text not in found:
                found.append(text)

    import ray.rllib  # noqa: F401  (importing RLlib gives its logger a stderr handler of its own, replaced here)

    logger = logging.getLogger("ray.rllib")
    handlers, propagate = logger.handlers[:], logger.propagate
    logger.handlers[:] = [Collect()]
    logger.propagate = False
    try:
        yield found
    finally:
        logger.handlers[:] = handlers
        logger.propagate = propagate


def located_warnings(found: list[str], written: Callable[[str], bool], where: Callable[[str], str | None],
                     file: str | None) -> list[str]:
    """RLlib's warnings (`rllib_warnings`) as raytrain's: at the setting each names that the config writes,
    else at the file."""
    from raytrain.errors import config_warning

    lines = []
    for text in found:
        key = rejected_setting(text, written)
        at = file if key is None else where(key)
        lines.append(config_warning(at, key or "", f"RLlib: {text}"))
    return lines


def check_with_rllib(cfg: RaytrainConfig, source: Source, file: str, *, network: bool = True,
                     then: Callable[[], None] | None = None) -> list[str]:
    """RLlib's own `validate()` of `cfg` (loaded from `source`, read from `file`) and, with `network`, whether
    PPO has a network for the env's spaces; then `then` (the CPU checks, whose resource request RLlib validates
    again). Returns the warnings RLlib logged meanwhile, each once, at the setting each names.

    Raises:
        ConfigError: RLlib rejects the config (at the setting it names), or PPO has no network for the env.
    """
    from raytrain.errors import ConfigError

    with rllib_warnings() as found:
        try:
            build_ppo_config(cfg).validate()
        except Exception as exc:  # RLlib raises ValueError and friends
            raise ConfigError([rllib_rejection(exc, source, file)]) from None
        if network:
            from raytrain.rllib.fit import observation_issue

            if (unfit := observation_issue(cfg, source)) is not None:
                raise ConfigError([unfit])
        if then is not None:
            then()
    return located_warnings(found, lambda key: writes(source, key), lambda key: source.where(tuple(key.split("."))),
                            file) + (env_idle_warnings(cfg, source) if network else [])


def env_idle_warnings(cfg: RaytrainConfig, source: Source, searched: Mapping[str, tuple[str | None, str]] | None = None
                      ) -> list[str]:
    """A warning at each model setting of `cfg` that the network built for the env's spaces never reads
    (`env_idle_settings`). `searched`: {dotted key: (where, the field's path)} of what a sweep searches; such a key is
    said there, as a search whose trials all train alike."""
    from raytrain.errors import config_warning
    from raytrain.rllib.fit import env_idle_settings

    searched = searched or {}
    lines = []
    for key, why in env_idle_settings(cfg, searched).items():
        if key in searched:
            where, field = searched[key]
            lines.append(config_warning(where, field, f"is searched, and no trial reads it: it {why}; the sweep would "
                                        "rank noise"))
        else:
            lines.append(config_warning(source.where(tuple(key.split("."))), key, why))
    return lines


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

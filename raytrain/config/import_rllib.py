"""Convert RLlib's former tuned-example YAML (`rllib train -f`) into a raytrain config.

The old format:

    cartpole-ppo:
        env: CartPole-v1
        run: PPO
        stop: {episode_reward_mean: 150, timesteps_total: 100000}
        config: {gamma: 0.99, num_workers: 1, num_sgd_iter: 6, model: {fcnet_hiddens: [32]}}

Flat `config` keys are placed in their raytrain sections; old names become new ones through the same
alias table `raytrain train` uses. Whatever cannot be translated is listed, never silently dropped.

A setting written `{grid_search: [...]}` (Tune's grid, the one search the old YAML could write) makes the
result a sweep file instead: the train config every trial starts from, embedded as `train:`, and a `space:`
of `distribution: grid` entries over the new names (`raytrain tune`, search.algorithm grid).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from raytrain.config import aliases
from raytrain.config.kind import KIND_NAMES, is_rllib_experiment, raytrain_kind, taken_by
from raytrain.config.load import KNOWN_NAMESPACES
from raytrain.config.schema import SECTIONS, section_keys
from raytrain.config.source import Source
from raytrain.errors import ConfigError, ConfigIssue

# Old switches that have no effect on (or are implied by) the new API stack.
NO_OPS = {
    "enable_connectors",
    "_enable_new_api_stack",
    "enable_rl_module_and_learner",
    "enable_env_runner_and_connector_v2",
    "_enable_learner_api",
    "_enable_rl_module_api",
    "log_level",
}

# The old model settings whose new-stack names differ: the policy and value heads after the encoder were
# `post_fcnet_*` on the old stack (RLlib's DefaultModelConfig: "use `head_fcnet_hiddens`").
MODEL_RENAMES = {
    "post_fcnet_hiddens": "head_fcnet_hiddens",
    "post_fcnet_activation": "head_fcnet_activation",
}

# Keys placed somewhere other than where the schema's field names would put them.
SPECIAL_PLACES = {
    "seed": ("experiment", "seed"),
    "vf_share_layers": ("model", "vf_share_layers"),
    "env": ("environment", "env"),
}


@dataclass
class ImportResult:
    data: dict[str, Any]
    """The raytrain config as YAML-ready data (still to be validated)."""
    untranslated: list[str] = field(default_factory=list)
    """`config.key: why` for each key that has no raytrain counterpart."""
    notes: list[str] = field(default_factory=list)
    origins: dict[tuple[str, ...], str] = field(default_factory=dict)
    """The `file:line` of the old key each converted path came from: errors and notices name the old file's lines."""
    space: dict[str, list[Any]] = field(default_factory=dict)
    """The grid_search values of each setting the old file searched, by its new dotted key (left out of `data`)."""
    sweep_origins: dict[tuple[str, ...], str] = field(default_factory=dict)
    """The `file:line` of the old key of each path of `sweep()` that is not in the train config (`space`, ...)."""
    num_samples: int | None = None
    """The old experiment's `num_samples` (how many times the grid runs), where it set one."""
    search_seed: int | None = None
    """The old config's `seed` in a conversion with a `space`: the sweep's search.seed (each trial draws its own)."""

    def sweep(self) -> dict[str, Any]:
        """The sweep file (YAML-ready data) of a conversion with a `space`: a grid over it, `data` embedded."""
        search: dict[str, Any] = {"algorithm": "grid"}
        if self.num_samples is not None:
            search["num_samples"] = self.num_samples
        if self.search_seed is not None:
            search["seed"] = self.search_seed
        return {"train": self.data, "search": search,
                "space": {key: {"distribution": "grid", "values": values} for key, values in self.space.items()}}

    def sweep_source(self, file: str) -> Source:
        """`sweep()` as a Source whose every path names its line in the old `file`."""
        import json

        origins = {("train", *path): where for path, where in self.origins.items()} | self.sweep_origins
        return Source(json.loads(json.dumps(self.sweep())), origins, file)


def _placement() -> dict[str, tuple[str, str]]:
    place: dict[str, tuple[str, str]] = {}
    for section in SECTIONS:
        for key in section_keys(section):
            place.setdefault(key, (section, key))
    place.update(SPECIAL_PLACES)
    return place


def _a(value: Any) -> str:
    """`a list`, `an int`: what YAML made of a value, for an error."""
    name = {"NoneType": "null", "str": "text"}.get(type(value).__name__, type(value).__name__)
    return f"{'an' if name[0] in 'aeiou' else 'a'} {name}"


def _mapping(source: Source, path: tuple[str, ...], what: str) -> dict[str, Any]:
    """The mapping at `path` of the old file ({} when absent or null); an error at its line when it is not one."""
    value: Any = source.data
    for part in path:
        value = value.get(part) if isinstance(value, dict) else None
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError([ConfigIssue(source.where(path), ".".join(path), f"must be a mapping of {what} (got {_a(value)})")])
    return value


def config_note(where: str | None, key: str, text: str) -> str:
    """A note about the old file's `config.<key>`, at its line."""
    return str(ConfigIssue(where, f"config.{key}", text))


def _is_grid(value: Any) -> bool:
    return isinstance(value, dict) and "grid_search" in value


def _grid_values(value: Any, source: Source, path: tuple[str, ...]) -> list[Any]:
    values = value["grid_search"]
    if len(value) != 1 or not isinstance(values, list) or not values:
        raise ConfigError([ConfigIssue(source.where(path), ".".join(path[1:]),
                                       "a grid_search needs a list of at least one value: `{grid_search: [a, b]}`")])
    return list(values)


def _nested_grids(value: Any, path: tuple[str, ...]) -> list[tuple[str, ...]]:
    """The paths of the grid_searches anywhere in `value` (at `path`)."""
    if _is_grid(value):
        return [path]
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    return [found for key, item in items for found in _nested_grids(item, (*path, str(key)))]


def convert(source: Source, experiment: str | None = None) -> ImportResult:
    """Convert a parsed old-format file. Raises ConfigError when it is not one."""
    flat = is_rllib_experiment(source.data)
    if flat:  # one experiment with no name above it: named after --experiment or the file
        # A file name may hold what a folder name may not (`my run.yaml`): the experiment names the run's folder.
        experiment = experiment or re.sub(r"[^A-Za-z0-9_.-]", "_", Path(source.file or "").stem).lstrip(".-")[:100] or "experiment"
        source = Source({experiment: source.data}, _under(experiment, source.origins), source.file,
                        _under(experiment, source.written))
    data = source.data
    if not flat and (mine := raytrain_kind(source)) is not None:
        raise ConfigError([ConfigIssue(source.file, "", f"already {KIND_NAMES[mine]}, not RLlib's tuned-example format: "
                                                        f"nothing to convert; {taken_by(mine, source.file)}")])
    names = [k for k, v in data.items() if isinstance(v, dict)]
    if not names:
        raise ConfigError([ConfigIssue(source.file, "", "not an RLlib tuned example: expected `NAME: {env:, run:, config:}`")])
    if experiment is None:
        if len(names) > 1:
            raise ConfigError(
                [ConfigIssue(source.file, "", f"holds {len(names)} experiments ({', '.join(names)}); pick one with --experiment")]
            )
        experiment = names[0]
    if experiment not in data:
        raise ConfigError([ConfigIssue(source.file, experiment, f"no such experiment; the file has {', '.join(names)}")])
    if experiment not in names:
        raise ConfigError([ConfigIssue(source.where((experiment,)), experiment,
                                       f"is not an experiment (a mapping with env, run and config); the file has {', '.join(names)}")])
    old = data[experiment]

    def shown(*path: str) -> str:
        """A path of the old file as it is written there."""
        return ".".join(path if flat else (experiment, *path))

    result = ImportResult(data={"experiment": {"name": experiment}})
    out = result.data

    run = old.get("run", "PPO")
    if str(run).upper() != "PPO":
        raise ConfigError([ConfigIssue(source.where((experiment, "run")), shown("run"), f"raytrain trains PPO; {run!r} cannot be imported")])

    config = dict(_mapping(source, (experiment, "config"), "RLlib settings"))
    stop = _mapping(source, (experiment, "stop"), "stop criteria")
    origins = result.origins

    def came_from(new: tuple[str, ...], old_path: tuple[str, ...]) -> None:
        where = source.where((experiment, *old_path))
        if where is not None:
            origins[new] = where
    consumed: set[tuple[str, ...]] = set()

    def searched(value: Any, new: tuple[str, ...], old_path: tuple[str, ...], convert_value: Any = None) -> bool:
        """Whether `value` is a grid_search: its values go to the sweep's space at `new`, not to the config."""
        if not _is_grid(value):
            return False
        values = _grid_values(value, source, (experiment, *old_path))
        consumed.add(old_path)
        key = ".".join(new)
        result.space[key] = [convert_value(v) for v in values] if convert_value else values
        where = source.where((experiment, *old_path))
        if where is not None:
            result.sweep_origins[("space", key)] = where
        return True

    env = old.get("env", config.get("env"))
    if "env" in old and "env" in config and config["env"] != env:
        result.notes.append(config_note(source.where((experiment, "config", "env")), "env",
                                        f"dropped: the experiment's env ({env}, {source.where((experiment, 'env'))}) "
                                        "replaces it, as RLlib's `rllib train -f` did"))
    config.pop("env", None)
    if env is None:
        raise ConfigError([ConfigIssue(source.where((experiment,)), shown(), "has no env")])
    env_path = ("env",) if "env" in old else ("config", "env")
    if _is_grid(env):
        raise ConfigError([ConfigIssue(
            source.where((experiment, *env_path)), ".".join(env_path),
            "a grid_search over the env cannot be converted: a raytrain sweep trains one env (its trials may vary "
            "environment.env_config.<key>); convert the file once per env, each with one env")])
    if isinstance(env, str) and ":" not in env and (module := KNOWN_NAMESPACES.get(env.partition("/")[0])) and "/" in env:
        # Gymnasium before 1.0 found Atari's ids through ale-py's plugin; since 1.0 the module is named with the id.
        result.notes.append(str(ConfigIssue(source.where((experiment, *env_path)), ".".join(env_path),
                                            f"written '{module}:{env}', Gymnasium's form that imports {module} (which "
                                            "registers the id) before making the env")))
        env = f"{module}:{env}"
    out["environment"] = {"env": env}
    came_from(("environment", "env"), env_path)
    if "env_config" in config:
        env_config = config.pop("env_config")
        if isinstance(env_config, dict):
            env_config = {k: v for k, v in env_config.items()
                          if not searched(v, ("environment", "env_config", str(k)), ("config", "env_config", str(k)))}
        out["environment"]["env_config"] = env_config
        came_from(("environment", "env_config"), ("config", "env_config"))
    if stop:
        out["stop"] = dict(stop)
        for key in stop:
            came_from(("stop", key), ("stop", key))
    for key, new_key in (("checkpoint_freq", "checkpoint_frequency"), ("checkpoint_frequency", "checkpoint_frequency"),
                         ("checkpoint_at_end", "checkpoint_at_end"), ("keep_checkpoints_num", "num_to_keep"),
                         ("local_dir", "storage_path"), ("storage_path", "storage_path")):
        if key in old:
            out["experiment"][new_key] = old[key]
            came_from(("experiment", new_key), (key,))
    known_top = {"run", "env", "config", "stop", "checkpoint_freq", "checkpoint_frequency", "checkpoint_at_end",
                 "keep_checkpoints_num", "num_samples", "local_dir", "storage_path"}
    for key in old:
        if key not in known_top:
            result.untranslated.append(f"{key}: no raytrain counterpart for this experiment-level setting")

    place = _placement()
    for key, value in config.items():
        if key in NO_OPS:
            result.notes.append(config_note(source.where((experiment, "config", key)), key,
                                            "dropped, it has no effect on RLlib's new API stack"))
        elif key == "framework":
            out["framework"] = value  # aliases.normalize accepts torch and rejects tf with the reason
            came_from(("framework",), ("config", key))
        elif key == "model":
            model_keys = set(section_keys("model"))
            for old_key, mvalue in _mapping(source, (experiment, "config", "model"), "model settings").items():
                mkey = MODEL_RENAMES.get(old_key, old_key)
                if mkey != old_key:
                    result.notes.append(config_note(source.where((experiment, "config", "model", old_key)),
                                                    f"model.{old_key}", f"is model.{mkey} on RLlib's new API stack"))
                if mkey in model_keys and searched(mvalue, ("model", mkey), ("config", "model", old_key)):
                    continue
                if mkey in model_keys:
                    out.setdefault("model", {})[mkey] = mvalue
                    came_from(("model", mkey), ("config", "model", old_key))
                else:
                    result.untranslated.append(f"config.model.{old_key}: not a field of RLlib's DefaultModelConfig")
        elif key == "evaluation_config" and isinstance(value, dict):
            # RLlib's overrides for evaluation: raytrain takes the one RLlib examples set, explore
            for other in value:
                if other != "explore":
                    result.untranslated.append(f"config.evaluation_config.{other}: raytrain takes only explore of "
                                               "evaluation_config (evaluation.evaluation_explore)")
            if "explore" in value:
                out.setdefault("evaluation", {})["evaluation_explore"] = value["explore"]
                came_from(("evaluation", "evaluation_explore"), ("config", key, "explore"))
        elif key in aliases.KEY_ALIASES and searched(value, aliases.KEY_ALIASES[key][:2], ("config", key),
                                                     aliases.KEY_ALIASES[key][2]):
            continue
        elif key in aliases.KEY_ALIASES or key in aliases.UNSUPPORTED:
            out[key] = value  # moved (with a notice) or rejected by aliases.normalize
            came_from((key,), ("config", key))
        elif key in place and searched(value, place[key], ("config", key)):
            continue
        elif key in place:
            section, new_key = place[key]
            out.setdefault(section, {})[new_key] = value
            came_from((section, new_key), ("config", key))
        else:
            result.untranslated.append(f"config.{key}: unknown on RLlib's new API stack or not supported by raytrain")
    _refuse_other_grids(source, experiment, consumed)
    if result.space and "num_samples" in old:
        result.num_samples = old["num_samples"]
        came = source.where((experiment, "num_samples"))
        if came is not None:
            result.sweep_origins[("search", "num_samples")] = came
    elif "num_samples" in old:
        result.untranslated.append("num_samples: no raytrain counterpart for a train config (a sweep's "
                                   "search.num_samples repeats trials)")
    if result.space and "seed" in result.data.get("experiment", {}):
        # Every trial of a raytrain sweep draws its own seed: the seed written would be dropped unsaid.
        seed = result.search_seed = result.data["experiment"].pop("seed")
        came = result.origins.pop(("experiment", "seed"), None)
        if came is not None:
            result.sweep_origins[("search", "seed")] = came
        result.notes.append(f"{came + ': ' if came else ''}config.seed: {seed} became search.seed: {seed}: each trial "
                            f"draws its own seed from it (RLlib gave every trial seed {seed})")
    return result


def _under(name: str, table: dict[tuple[str, ...], str]) -> dict[tuple[str, ...], str]:
    return {(name, *path): value for path, value in table.items()}


def _refuse_other_grids(source: Source, experiment: str, consumed: set[tuple[str, ...]]) -> None:
    """A grid_search the conversion did not take as a searched setting (inside a list or a setting's value,
    in `stop:`, in an untranslated key): an error at its line rather than a type error or a silent drop."""
    for path in _nested_grids(source.data[experiment], (experiment,)):
        if path[1:] not in consumed:
            raise ConfigError([ConfigIssue(
                source.where(path), ".".join(path[1:]),
                "this grid_search cannot be converted: a raytrain sweep searches a setting's whole value (`space: "
                "{KEY: {distribution: grid, values: [...]}}`); write the whole value in each of its values")])

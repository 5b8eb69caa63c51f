"""Load a train config: YAML -> overrides -> old names -> schema -> semantic checks.

`load_config` is the one entry point the CLI and the other commands use.
"""

from __future__ import annotations

import copy
import difflib
import inspect
import json
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from raytrain.config import aliases, yaml_bools
from raytrain.config.initializers import idle_arguments, initializer_problems
from raytrain.config.schema import SECTIONS, RaytrainConfig, section_keys
from raytrain.config.source import Source, apply_overrides, read_yaml
from raytrain.errors import ConfigError, ConfigIssue, config_warning
from raytrain.imports import gym_module_id, import_module, resolve_import


@dataclass
class LoadedConfig:
    """A validated config and what was said about it on the way."""

    config: RaytrainConfig
    source: Source
    notices: list[str] = field(default_factory=list)
    """Old names translated, overrides applied."""
    warnings: list[str] = field(default_factory=list)
    """Legal but suspicious settings, with numbers and a recommendation."""


def _nearest(word: str, candidates: list[str]) -> str:
    match = difflib.get_close_matches(word, candidates, n=1, cutoff=0.6)
    return f"; did you mean '{match[0]}'?" if match else ""


_OTHER_FILES_SECTIONS = {
    "checkpoint": "a train run's checkpoints are set in experiment: checkpoint_frequency, num_to_keep, checkpoint_at_end",
    "time_budget_s": "a train run's time limit is stop: {{time_total_s: {value}}}",
    "workers": "a train config's env runners are env_runners: {{num_env_runners: N}}",
}
"""Sections of a sweep or cluster file that a train config writes for a setting it has elsewhere."""
_ALGORITHM = "raytrain trains PPO, and no setting names the algorithm: leave it out"
_RLLIB_EXPERIMENT_NAMES = {
    "checkpoint_freq": "RLlib's checkpoint_freq is experiment: {checkpoint_frequency: ...} here",
    "keep_checkpoints_num": "RLlib's keep_checkpoints_num is experiment: {num_to_keep: ...} here",
    "local_dir": "RLlib's local_dir is experiment: {storage_path: ...} here",
    "run": _ALGORITHM,
    "algorithm": _ALGORITHM,
    "algo": _ALGORITHM,
    "resume": "a run is resumed by a command, not a setting: raytrain train --resume RUN_FOLDER",
}
"""The experiment-level names of RLlib's and Tune's former files (`rllib train -f`, `tune.run`) at the top level
of a train config, and where raytrain writes each."""


_STEPS = "stop: {num_env_steps_sampled_lifetime: N}"
_RLLIB_WHOLE = {
    "evaluation_config": ("; RLlib's evaluation_config (settings that differ in evaluation) is not taken whole here: "
                          "greedy evaluation is evaluation.evaluation_explore: false"),
}
"""RLlib settings that take a mapping of other settings, which raytrain does not take: what it takes instead."""

_SB3_NAMES = {
    "learning_rate": "training.lr",
    "n_steps": "training.train_batch_size| (SB3's n_steps times n_envs: the env steps of one update)",
    "batch_size": "training.minibatch_size",
    "n_epochs": "training.num_epochs",
    "gae_lambda": "training.lambda",
    "clip_range": "training.clip_param",
    "clip_range_vf": "training.vf_clip_param",
    "ent_coef": "training.entropy_coeff",
    "vf_coef": "training.vf_loss_coeff",
    "max_grad_norm": "training.grad_clip",
    "target_kl": "training.kl_target| (with training.use_kl_loss: true)",
    "n_envs": "env_runners.num_envs_per_env_runner",
    "num_envs": "env_runners.num_envs_per_env_runner",
    "n_timesteps": _STEPS,
    "total_timesteps": _STEPS,
    "net_arch": "model.fcnet_hiddens",
    "activation_fn": "model.fcnet_activation",
    "policy_kwargs": "model| (net_arch: fcnet_hiddens, activation_fn: fcnet_activation)",
    "policy": "the default network| (model: its layers)",
}
"""stable-baselines3's PPO arguments (and RL Baselines3 Zoo's hyperparameter files, which write them flat), and where
raytrain writes each (`|` before a note): unknown keys that said nothing, or named a wrong nearest key (clip_range_vf:
clip_param)."""


def _sb3_hint(key: str) -> str:
    if key not in _SB3_NAMES:
        return ""
    target, _, note = _SB3_NAMES[key].partition("|")
    return f"; stable-baselines3's {key} is {target} here{note}"


def _stray_section_hint(key: str, value: Any, model: type[BaseModel] = RaytrainConfig, where: str | None = None) -> str:
    """Where a key written at the top level of a file of `model` goes: `; it belongs in the 'experiment' section
    (...)` for a key of one of its sections, a sweep's `set:` for a train config's setting, and what a section of
    another kind of file is; else nothing."""
    from raytrain.config.kind import KIND_NAMES, telling_sections
    from raytrain.config.sweep import SweepConfig

    if model is RaytrainConfig:
        owners = [s for s in SECTIONS if key in section_keys(s)]
    else:
        owners = [name for name in model.model_fields if (sub := _model_at(model, [name])) is not None
                  and key in {f.alias or n for n, f in sub.model_fields.items()}]
    if owners:
        named = " or ".join(f"'{o}'" for o in owners)
        return f"; it belongs in the {named} section" + (f" ({owners[0]}: {{{key}: ...}})" if len(owners) == 1 else "")
    if model is RaytrainConfig and key in _RLLIB_EXPERIMENT_NAMES:
        said = _RLLIB_EXPERIMENT_NAMES[key]
        if said is _ALGORITHM and isinstance(value, str) and value.upper() != "PPO":
            said = f"raytrain trains PPO only, not {value}: leave it out"
        return f"; {said}"
    if model is RaytrainConfig and key in _OTHER_FILES_SECTIONS:
        shown = value if isinstance(value, int | float) and not isinstance(value, bool) else "SECONDS"
        return "; " + _OTHER_FILES_SECTIONS[key].format(value=shown)
    if model is SweepConfig:
        if key in SECTIONS:
            inner = next(iter(value), "KEY") if isinstance(value, dict) and value else "KEY"
            return (f"; '{key}' is a section of a train config: every trial starts from base: (or train:); set a value "
                    f"for every trial with {_set_form(f'{key}.{inner}', where)}, or search it under space:")
        if section := next((s for s in SECTIONS if key in section_keys(s)), None):
            from raytrain.config.sweep_load import check_key, sweep_owns

            dotted = f"{section}.{key}"
            if owned := sweep_owns(dotted):
                return f"; {dotted} {owned}"
            return (f"; it is a train config's {dotted}: set it for every trial with {_set_form(dotted, where)}"
                    + (", or search it under space:" if check_key(dotted) is None else ""))
    own = {RaytrainConfig: "train", SweepConfig: "sweep"}.get(model)
    for kind, sections in telling_sections().items():
        if key in sections and kind != own:
            command = {"sweep": "raytrain tune", "cluster": "raytrain cluster up", "slurm": "--slurm"}[kind]
            return (f"; '{key}' is a section of {KIND_NAMES[kind]} ({command})"
                    + (", whose base: names a train config like this one" if kind == "sweep" and own == "train" else ""))
    return ""


def _set_form(dotted: str, where: str | None) -> str:
    """How a sweep sets `dotted` for every trial: in the file (`set: {training.lr: ...}`), or with --set when that is
    where the stray key came from."""
    if where is not None and where.startswith("--set ") and "=" in where:
        return f"--set set.{dotted}={where.partition('=')[2]}"
    return f"set: {{{dotted}: ...}}"


def _section_as_value(section: type[BaseModel], loc: list[str], value: Any, listed: bool = False) -> str:
    """For a section written as one value (`environment: CartPole-v1`, `head: localhost`), an item of a list of
    sections (`workers: [m8]`), or with `listed` such a list written as one item (`workers: m8`): the setting of
    the section that value is for, where one or a few take it, else the section's first keys."""
    import yaml

    name = loc[-1]
    if listed:
        what, write = "a list of mappings of settings", lambda mapping: f"{name}: [{mapping}]"
    elif name.isdigit() and len(loc) > 1:
        what, write = "a mapping of its settings", lambda mapping: f"{mapping} for this item of {loc[-2]}"
    else:
        what, write = "a section (a mapping of its settings)", lambda mapping: f"{name}: {mapping}"

    shown = yaml.safe_dump(value, default_flow_style=True, width=10**6).strip().removesuffix("...").strip()
    takers = []
    # A number, a truth value or a list fits too many settings, or one by a coercion (true as 1): only a text's
    # setting is named.
    for field_name, field_info in section.model_fields.items() if isinstance(value, str) else ():
        key = field_info.alias or field_name
        try:
            section.model_validate({key: value})
        except ValidationError as exc:
            if any(e["loc"][:1] == (key,) for e in exc.errors()):
                continue
        except Exception:  # noqa: BLE001 - a check of another setting: not this one's to say
            continue
        takers.append(key)
    first = next(iter(section.model_fields.values()), None)
    named = [k for k in takers if _is_literal(section.model_fields[_field_name(section, k)].annotation)]
    if len(named) == 1:  # a value that names a choice (search: random, auth: token)
        takers = named
    elif isinstance(value, str) and first is not None and (first.alias or next(iter(section.model_fields))) in takers[:1]:
        takers = takers[:1]  # a section about its first key (environment: its env, head: its host)
    if len(takers) == 1:
        return f"is {what}, not one value: write {write(f'{{{takers[0]}: {shown}}}')}"
    if 1 < len(takers) <= 6:
        return (f"is {what}, not one value: write {write(f'{{KEY: {shown}}}')} with the setting it is for: "
                f"{', '.join(takers)}")
    keys = [f.alias or n for n, f in section.model_fields.items()]
    some = ", ".join(keys[:6]) + (", ...; raytrain config schema lists them" if len(keys) > 6 else "")
    return f"is {what.removesuffix(')')}: {some}{')' if what.endswith(')') else ''}, not one value (got {shown})"


_SCALAR_TYPES = ("float_type", "int_type", "string_type", "bool_type", "literal_error", "enum")
"""The errors of a setting of one value given something else (a list)."""


def flow_yaml(data: Any) -> str:
    """`data` as one line of YAML's flow style, in the order written."""
    import yaml

    return yaml.safe_dump(data, default_flow_style=True, sort_keys=False, width=10**6).strip()


def as_space(value: Any) -> dict[str, Any] | None:
    """A value written as a search (a sweep's `{distribution: ...}`, or Tune's `{grid_search: [...]}`) as its
    `space:` entry, else None."""
    if not isinstance(value, dict):
        return None
    if "distribution" in value:
        return value
    if list(value) == ["grid_search"]:
        return {"distribution": "grid", "values": value["grid_search"]}
    return None


ENV_CONFIG = "environment.env_config."


def _searches_in_env_config(cfg: RaytrainConfig, source: Source) -> list[str]:
    """A warning for each env_config value written as a search: legal (a value may be a mapping), and the env got
    the mapping itself. RLlib's old YAML ran through Tune, which expanded `grid_search` anywhere."""
    return [config_warning(source.where(("environment", "env_config", str(key))), f"{ENV_CONFIG}{key}", (
                "is a search, and the env gets it as this mapping (neither RLlib nor raytrain expands a search in "
                f"env_config): to try each value, search it under a sweep's space: {flow_yaml({ENV_CONFIG + str(key): space})}"))
            for key, value in cfg.environment.env_config.items() if (space := as_space(value)) is not None]


def _search_in_train_config(source: Source, loc: list[str], err: Any) -> tuple[list[str], str] | None:
    """For an error at `loc` of a train config whose value there (or above it) is a search, RLlib's and Tune's
    `{grid_search: [...]}`, a sweep's `{distribution: ...}` or a list of values for a setting of one value, of a
    setting a sweep can search: where, and the sweep that searches it."""

    from raytrain.config.sweep_load import check_key

    base = Path(source.file).name if source.file else "THIS_FILE"
    for depth in range(1, len(loc) + 1):
        at = loc[:depth]
        written = _lookup(source.data, at)
        if isinstance(written, dict) and ("grid_search" in written or "distribution" in written):
            if check_key(".".join(at)) is not None:
                return None
            what, space = (("a grid_search", {"distribution": "grid", "values": written["grid_search"]})
                           if "grid_search" in written else ("a search distribution", written))
            return at, (f"{what}, and a train config trains one value of each setting: search it with raytrain tune, in "
                        f"a sweep file with base: {base} and space: {flow_yaml({'.'.join(at): space})}")
    scalars = (bool, int, float, str)
    value = err.get("input")
    if (isinstance(value, list) and value and all(isinstance(p, list) and len(p) == 2 for p in value)
            and _lookup(source.data, loc) == value and len(loc) == 2 and loc[0] in SECTIONS
            and (field := next((f for n, f in SECTIONS[loc[0]].model_fields.items() if (f.alias or n) == loc[1]), None)) is not None
            and "PiecewiseSchedule" in repr(field.annotation)):
        return loc, ("[timestep, value] points are a schedule, written "
                     f"{flow_yaml({'schedule': 'piecewise', 'points': value})}")
    if (err["type"] in _SCALAR_TYPES and isinstance(value, list) and value and all(isinstance(v, scalars) for v in value)
            and _lookup(source.data, loc) == value and check_key(".".join(loc)) is None):
        return loc, ("a list of values, and a train config trains one value of each setting: write one, or try each "
                     f"with raytrain tune, in a sweep file with base: {base} and space: "
                     f"{flow_yaml({'.'.join(loc): {'distribution': 'grid', 'values': value}})}")
    return None


def _list_item_model(model: type[BaseModel], loc: list[str]) -> type[BaseModel] | None:
    """The model of the items of the list field at `loc` (`workers: list[WorkerConfig]`), else None."""
    import typing

    parent = _model_at(model, loc[:-1])
    field = parent.model_fields.get(loc[-1]) if parent is not None and loc else None
    if field is None or typing.get_origin(field.annotation) is not list:
        return None
    (item,) = typing.get_args(field.annotation) or (None,)
    return item if isinstance(item, type) and issubclass(item, BaseModel) else None


_OTHER_SEARCHERS = {"hyperopt", "bayesopt", "bohb", "hyperband", "ax", "nevergrad", "hebo", "zoopt", "skopt",
                    "dragonfly", "flaml", "blendsearch", "cfo"}
"""Ray Tune's search algorithms and schedulers that raytrain does not offer."""


def _distribution_issue(entry: Any) -> str:
    """A space entry without a `distribution:` raytrain has: which there are, and Tune's `grid_search` form, a near
    name (`log_uniform`), or the name under another key (`type:`)."""
    from raytrain.sweeps.space import DISTRIBUTION_NAMES

    return f"a distribution needs `distribution:` one of {', '.join(DISTRIBUTION_NAMES)}" + _distribution_hint(
        entry, DISTRIBUTION_NAMES)


def _distribution_hint(entry: Any, names: tuple[str, ...]) -> str:
    if not isinstance(entry, dict):
        return ""
    if isinstance(values := entry.get("grid_search"), list) and len(entry) == 1:
        return f"; Tune's grid_search is written {{distribution: grid, values: {json.dumps(values, default=str)}}} here"
    given = entry.get("distribution")
    if isinstance(given, str):
        near = difflib.get_close_matches(given.lower().replace("_", ""), names, n=1)
        return f"; did you mean {near[0]}? (got {given!r})" if near else ""
    for key in ("type", "dist", "kind", "sampler"):
        if isinstance(named := entry.get(key), str) and named.lower() in names:
            return f"; write distribution: {named.lower()} (got {key}: {named})"
    return ""


def _choice_hint(path: str, err: Any) -> str:
    """For a text that is not one of a setting's choices: the choice it is in another case (`PBT`), or, for
    search.algorithm, what raytrain offers in place of another of Tune's searchers."""
    value = err.get("input")
    if err["type"] != "literal_error" or not isinstance(value, str):
        return ""
    import re

    choices = re.findall(r"'([^']*)'", str(err.get("ctx", {}).get("expected", "")))
    if value.lower() in choices:
        return f"; write it in lower case: {value.lower()}"
    if path == "search.algorithm" and value.lower() in _OTHER_SEARCHERS:
        return (f"; Tune's {value} is not offered here: search: {{algorithm: optuna}} is the model-based search (TPE, "
                "as hyperopt's), asha the early stopping")
    return ""


def _field_name(model: type[BaseModel], key: str) -> str:
    return next((n for n, f in model.model_fields.items() if (f.alias or n) == key), key)


def _is_literal(annotation: Any) -> bool:
    import types
    import typing

    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return True
    if origin is typing.Annotated:
        return _is_literal(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return any(_is_literal(a) for a in typing.get_args(annotation))
    return False


def _tune_name_hint(key: str, model: type[BaseModel]) -> str:
    """Where a sweep file writes a setting that Ray Tune names `key` (`checkpoint_freq`, `param_space`, ...)."""
    from raytrain.config.sweep import TUNE_NAMES, SweepConfig

    return f"; {TUNE_NAMES[key]}" if model is SweepConfig and key in TUNE_NAMES else ""


def _old_names_for(section: str) -> list[str]:
    return [old for old, (sec, _, _) in aliases.KEY_ALIASES.items() if sec == section]


def _lookup(data: Any, path: list[str]) -> Any:
    for part in path:
        if isinstance(data, dict):
            data = data.get(part)
        elif isinstance(data, list) and part.isdigit() and int(part) < len(data):
            data = data[int(part)]
        else:
            return None
    return data


_TAGS = ("float", "linear", "piecewise", "uniform", "loguniform", "quniform", "randint", "choice", "grid")
# How pydantic names the members of a union in an error's location (`number | "auto"`, `number | schedule`).
_MEMBERS = ("int", "bool", "constrained-float", "constrained-int")
_NUMBER = ("float", "constrained-float")
# The members of a union with a mapping (a schedule, a distribution) that are not mappings: PBT's mutation of a
# key is a distribution or a list of values.
_NOT_MAPPING = (*_NUMBER, "list[any]")


def _model_at(model: type[BaseModel], loc: list[str]) -> type[BaseModel] | None:
    """The pydantic model class reached by walking `loc` through nested fields (None if not a model)."""
    import typing

    for part in loc:
        if part.isdigit():  # an index into a list of models: stay on the element model
            continue
        fields = model.model_fields
        field = fields.get(part) or next((f for f in fields.values() if f.alias == part), None)
        if field is None:
            return None
        candidates = [field.annotation, *typing.get_args(field.annotation)]
        inner = next((c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)), None)
        if inner is None:
            return None
        model = inner
    return model


def pydantic_issues(exc: ValidationError, source: Source, model: type[BaseModel] = RaytrainConfig) -> list[ConfigIssue]:
    """Turn a pydantic ValidationError into ConfigIssues with file:line and a hint."""
    issues: list[tuple[ConfigIssue, str | None]] = []
    for err in exc.errors():
        raw_loc = [str(p) for p in err["loc"]]
        if err["type"] == yaml_bools.ERROR_TYPE:  # raised by the model: the key and the items below it
            raw_loc += [str(p) for p in err["ctx"]["where"]]
        # A `number | schedule` field reports a failure for each member of the union: keep the
        # member that matches what the user wrote (a mapping means they meant a schedule).
        members = [p for p in raw_loc if p in _NOT_MAPPING or p.startswith("tagged-union[")]
        if members:
            head = raw_loc[: raw_loc.index(members[0])]
            wrote_mapping = isinstance(_lookup(source.data, head), dict)
            if wrote_mapping == (members[0] in _NOT_MAPPING):
                continue
        loc = [
            p
            for p in raw_loc
            if p not in _TAGS + _MEMBERS + _NOT_MAPPING and not p.startswith(("tagged-union[", "function-", "literal["))
        ]
        path = ".".join(loc)
        where = source.where(loc)
        kind = err["type"]
        if model is RaytrainConfig and (search := _search_in_train_config(source, loc, err)) is not None:
            at, msg = search
            if not any(issue.path == ".".join(at) for issue, _ in issues):
                issues.append((ConfigIssue(source.where(at), ".".join(at), msg), None))
            continue
        if kind == "extra_forbidden" and model is not RaytrainConfig:
            parent = _model_at(model, loc[:-1])
            names = [f.alias or n for n, f in parent.model_fields.items()] if parent else []
            stray = _stray_section_hint(loc[-1], _lookup(source.data, loc), model, where) if len(loc) == 1 else ""
            hint = _tune_name_hint(loc[-1], model) or stray or _nearest(loc[-1], names) or (f"; valid keys: {', '.join(names)}" if names else "")
            msg = f"unknown key{hint}"
        elif kind == "extra_forbidden":
            key = loc[-1]
            if len(loc) == 1:
                hint = _stray_section_hint(key, _lookup(source.data, loc)) or _sb3_hint(key) or _nearest(
                    key, [*SECTIONS, "stop", *aliases.SECTION_ALIASES])
                msg = f"unknown section{hint or '; valid sections: ' + ', '.join([*SECTIONS, 'stop'])}"
            elif len(loc) == 2 and loc[0] in SECTIONS:
                candidates = section_keys(loc[0]) + _old_names_for(loc[0])
                hint = _sb3_hint(key) or _RLLIB_WHOLE.get(key) or _nearest(key, candidates)
                other = [s for s in SECTIONS if s != loc[0] and key in section_keys(s)]
                if other:
                    hint = f"; it belongs in the '{other[0]}' section"
                msg = f"unknown key{hint or f' (see raytrain config schema for the keys of {loc[0]})'}"
            else:
                msg = "unknown key"
        elif kind == "model_type" and (section := _model_at(model, loc)) is not None and section.__name__ in err["msg"]:
            msg = _section_as_value(section, loc, err.get("input"))
        elif kind == "list_type" and (item := _list_item_model(model, loc)) is not None:
            msg = _section_as_value(item, loc, err.get("input"), listed=True)
        elif (kind == "list_type" and "list[any]" not in raw_loc and isinstance(value := err.get("input"), int | float | str)
              and not isinstance(value, bool)):
            import yaml

            msg = f"is a list, not one value: write {loc[-1]}: [{yaml.safe_dump(value, default_flow_style=True).strip().removesuffix('...').strip()}]"
        elif kind == "dict_type" and loc == ["stop"]:
            value = err.get("input")
            count = value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 100
            msg = (f"is a mapping of metric: threshold (training stops when any is reached), not one value: e.g. "
                   f"stop: {{training_iteration: {count}}}")
        elif kind == "missing":
            msg = "is required"
            if path == "environment":
                msg = "is required: add `environment: {env: CartPole-v1}` (a Gymnasium id or 'pkg.module:Class')"
        elif kind in ("union_tag_invalid", "union_tag_not_found") and "distribution" in str(err.get("ctx", {})):
            msg = _distribution_issue(err.get("input"))
        elif kind == "model_attributes_type" and len(loc) == 2 and loc[0] == "space":
            # A sweep's space entry written as its values alone (`training.lr: [0.001, 0.002]`) or as one value.
            value = err.get("input")
            shown = json.dumps(value, default=str) if isinstance(value, list) else repr(value)
            example = f"{{distribution: choice, values: {shown if isinstance(value, list) else '[...]'}}}"
            msg = (f"must be a distribution, e.g. `{example}` (choice, grid, uniform, loguniform, quniform or "
                   f"randint), not {shown}")
        elif kind == "list_type" and "list[any]" in raw_loc:
            msg = (f"must be a list of values or a distribution (`{{distribution: uniform, low: ..., high: ...}}`), "
                   f"not {err.get('input')!r}")
        elif kind == "string_type" and isinstance(value := err.get("input"), (bool, int, float)):
            # `name: 2024` or `--set name=yes`: YAML reads a bare 2024 as a number and yes as true.
            read_as = "true/false" if isinstance(value, bool) else "a number"
            written = source.written.get(tuple(loc))
            if written is not None:
                msg = f"must be text, but YAML reads {written} as {read_as} ({value!r}): put it in quotes: '{written}'"
            else:
                msg = f"must be text, but YAML reads the value as {read_as} ({value!r}): put it in quotes, e.g. '2024'"
        elif kind == yaml_bools.ERROR_TYPE:
            msg = yaml_bools.describe(err["ctx"]["value"], source.written.get(tuple(loc)))
        elif kind == "union_tag_invalid" or kind == "union_tag_not_found":
            msg = "a schedule needs `schedule: linear` (start, end, timesteps) or `schedule: piecewise` (points)"
        else:
            msg = err["msg"].removeprefix("Value error, ")
            # The input, unless the check's own message shows what it found already ("..., got [0, 5, 3]").
            if "input" in err and not isinstance(err["input"], dict) and ", got " not in msg:
                got = f" (got {err['input']!r})"
                # `number | "auto"`, `number | bool`: one message for the members, "X or Y (got v)".
                if any(p in _MEMBERS or p.startswith("literal[") for p in raw_loc):
                    issues.append((ConfigIssue(where, path, msg.split(", unable to")[0]), got))
                    continue
                msg += got + _choice_hint(path, err)
        issues.append((ConfigIssue(where, path, msg), None))
    # A float|schedule union reports one error per member; keep the most specific per path.
    seen: dict[tuple[str, str], ConfigIssue] = {}
    for issue, input_text in issues:
        if input_text is None:
            seen.setdefault((issue.path, issue.message), issue)
        elif (issue.path, "") in seen:
            first = seen[(issue.path, "")]
            first.message = (
                f"{first.message.removesuffix(input_text)} or "
                f"{issue.message.removeprefix('Input should be ')}{input_text}"
            )
        else:
            seen[(issue.path, "")] = ConfigIssue(issue.where, issue.path, issue.message + input_text)
    return list(seen.values())


def _check_env(cfg: RaytrainConfig, source: Source) -> list[ConfigIssue]:
    env = cfg.environment.env
    where = source.where(("environment", "env"))
    gym_form = gym_module_id(env)
    if gym_form is not None:  # "ale_py:ALE/Pong-v5": the module registers the id when imported
        import gymnasium

        module_name, env_id = gym_form
        try:
            import_module(module_name)
        except ImportError as exc:
            old_gym = (f"; gym is Gymnasium now, and Gymnasium's own ids need no package: write env: {env_id}"
                       if module_name == "gym" and env_id in gymnasium.envs.registry else "")
            return [ConfigIssue(where, "environment.env", f"cannot import module {module_name!r}: {exc}{old_gym}")]
        if env_id in gymnasium.envs.registry:
            return _unknown_env_kwargs(env, env_id, cfg, source)
        return [ConfigIssue(where, "environment.env", (
            f"importing {module_name!r} registered no Gymnasium id {env_id!r}{_nearest_ids(env_id)} ('module:EnvId' is Gymnasium's "
            "form for an id that a package registers when imported; a custom env class is written 'pkg.module:Class')"))]
    if ":" in env:
        module_name, _, attr = env.partition(":")
        try:
            import_module(module_name)
        except ImportError as exc:
            return [ConfigIssue(where, "environment.env", f"cannot import module {module_name!r}: {exc}")]
        try:
            obj = resolve_import(env)
        except AttributeError:
            return [ConfigIssue(where, "environment.env", f"module {module_name!r} has no attribute {attr!r}")]
        if not callable(obj):
            return [ConfigIssue(where, "environment.env", f"{env} is not a class or factory")]
        import gymnasium

        if inspect.isbuiltin(obj) or isinstance(obj, type) and not issubclass(obj, gymnasium.Env):
            what = "a built-in function" if inspect.isbuiltin(obj) else "a class that is not a gymnasium.Env"
            return [ConfigIssue(where, "environment.env", (
                f"{env} is {what}, not a gymnasium.Env class: name the env's class "
                "'pkg.module:Class' (a subclass of gymnasium.Env)"))]
        if not isinstance(obj, type):
            what = "a function" if inspect.isfunction(obj) else f"a {type(obj).__name__} object"
            return [ConfigIssue(where, "environment.env", (
                f"{env} is {what}, not a class: RLlib makes a custom env from a class only (a function it refuses "
                f"once Ray has started). Name a class, e.g. one that wraps what {attr} makes: `class "
                f"{attr[:1].upper() + attr[1:]}Env(gymnasium.Wrapper):` with `def __init__(self, config=None): "
                f"super().__init__({attr}(config))`"))]
        if (takes := _takes_no_config(obj)) is not None:
            init = "its __init__" if isinstance(obj, type) else "it"
            return [ConfigIssue(where, "environment.env", (
                f"{attr}{takes} cannot be called as {attr}(env_config), which is how RLlib creates the env in every "
                f"env runner: {init} needs one parameter for it, the others with defaults (e.g. `config=None`; "
                "environment.env_config arrives there)"))]
        return []
    import gymnasium

    registry = gymnasium.envs.registry
    if env in registry:
        return _unknown_env_kwargs(env, env, cfg, source)
    namespace = env.partition("/")[0] if "/" in env else None
    if namespace is not None and not any(name.startswith(namespace + "/") for name in registry):
        # Another package's namespace (Atari's ALE): its ids exist once that package is imported.
        package = KNOWN_NAMESPACES.get(namespace)
        example = f"'{package}:{env}' (pip install {package.replace('_', '-')})" if package else f"'PACKAGE:{env}'"
        return [ConfigIssue(where, "environment.env", (
            f"no Gymnasium id of the namespace {namespace!r} is registered: the package that provides it registers "
            f"them when imported, so name it first, as gymnasium.make takes it: {example}; a custom env is written "
            "'pkg.module:Class'"))]
    return [
        ConfigIssue(
            where,
            "environment.env",
            f"{env!r} is not a registered Gymnasium id{_nearest_ids(env)} (a custom env is written 'pkg.module:Class'; an id "
            "another package registers, 'package:EnvId')",
        )
    ]


MAKE_KWARGS = ("max_episode_steps", "disable_env_checker")
"""gymnasium.make's own keywords: RLlib makes a registered env as gymnasium.make(id, **env_config)."""


def _unknown_env_kwargs(env: str, env_id: str, cfg: RaytrainConfig, source: Source) -> list[ConfigIssue]:
    """An issue at each `environment.env_config` key that neither gymnasium.make nor the registered env's
    constructor takes (which fails with a TypeError in every env runner), unless the constructor takes any
    keyword (`**kwargs`) or cannot be looked at here (its module fails to import: RLlib says why)."""
    import gymnasium

    spec = gymnasium.envs.registry[env_id]
    try:
        maker: Any = gymnasium.envs.registration.load_env_creator(spec.entry_point) \
            if isinstance(spec.entry_point, str) else spec.entry_point
        params = inspect.signature(maker).parameters.values()
    except Exception:  # the env's module fails to import (a missing package), or a signature cannot be read
        return []
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return []
    takes = [p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    known = {*takes, *MAKE_KWARGS, *(spec.kwargs or {})}
    issues = []
    for key in cfg.environment.env_config:
        if key in known:
            continue
        near = difflib.get_close_matches(str(key), sorted(known), n=1, cutoff=0.6)
        hint = f"; did you mean {near[0]!r}?" if near else "."
        listed = ", ".join(takes) + ", and " if takes else ""
        issues.append(ConfigIssue(
            source.where(("environment", "env_config", key)), f"environment.env_config.{key}",
            f"{env} takes no keyword {key!r} (gymnasium.make({env_id!r}, {key}=...) would fail in every env runner)"
            f"{hint} It takes: {listed}gymnasium.make's {', '.join(MAKE_KWARGS)}"))
    return issues


def _nearest_ids(env_id: str) -> str:
    """`; did you mean 'A', 'B'?` for the registered Gymnasium ids nearest `env_id`, or nothing."""
    import gymnasium

    near = difflib.get_close_matches(env_id, list(gymnasium.envs.registry), n=3, cutoff=0.5)
    return f"; did you mean {', '.join(repr(n) for n in near)}?" if near else ""


KNOWN_NAMESPACES = {"ALE": "ale_py"}
"""Gymnasium id namespaces of other packages, and the module that registers them (RLlib's own Atari examples
name `ale_py:ALE/...`)."""


def _takes_no_config(obj: object) -> str | None:
    """The signature of an env class or factory that cannot be called with RLlib's one argument, else None."""
    import inspect

    try:
        signature = inspect.signature(obj)  # type: ignore[arg-type]  # a class: its __init__ without self
    except (TypeError, ValueError):
        return None  # no signature to read (a builtin): RLlib's call will tell
    try:
        signature.bind({})
    except TypeError:
        return str(signature)
    return None


def _check_stop(cfg: RaytrainConfig, source: Source) -> list[ConfigIssue]:
    from raytrain.metrics import counts_from_zero, known_metrics

    known = known_metrics(cfg.experiment.return_window, cfg.evaluation.evaluation_interval is not None)
    issues = []
    for key, threshold in cfg.stop.items():
        if key in known:
            if counts_from_zero(key) and threshold <= 0:
                issues.append(ConfigIssue(source.where(("stop", key)), f"stop.{key}", (
                    f"{threshold:g} is passed by the first iteration: {key} counts up from 0, so the run would stop "
                    "after one iteration whatever it reached; give a threshold > 0 (or leave the key out)"
                )))
            continue
        near = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.6)
        if key.startswith("evaluation/") and cfg.evaluation.evaluation_interval is None:
            msg = "is only reported with evaluation on: set evaluation.evaluation_interval"
        elif key.startswith("raytrain/episode_return_mean_"):
            msg = f"does not match experiment.return_window; use '{cfg.return_metric}'"
        else:
            msg = (
                "is a metric PPO never reports, so training would never stop on it"
                + (f"; did you mean '{near[0]}'?" if near else "")
                + " (raytrain config show lists the metrics)"
            )
        issues.append(ConfigIssue(source.where(("stop", key)), f"stop.{key}", msg))
    return issues


_RLLIB_DEFAULTED = ("environment", "env_runners", "training", "model", "learners", "resources", "evaluation")
"""The sections whose unset settings take RLlib's defaults (experiment's null seed means no seed)."""


def _no_values(source: Source) -> list[str]:
    """A warning for each setting of an RLlib section written with no value: YAML reads `lr:` as null, which
    leaves the setting unset, and RLlib's default applied without a word."""
    return [config_warning(source.where((section, key)), f"{section}.{key}", (
                "has no value (YAML reads an empty value as null), so RLlib's default applies: write a value, or leave "
                "the key out"))
            for section in _RLLIB_DEFAULTED if isinstance(values := source.data.get(section), dict)
            for key, value in values.items() if value is None]


def _cross_checks(cfg: RaytrainConfig, source: Source, searched: Collection[str]) -> tuple[list[ConfigIssue], list[str]]:
    issues: list[ConfigIssue] = []
    warnings: list[str] = []
    t, r = cfg.training, cfg.env_runners

    def warn(path: tuple[str, ...], text: str) -> None:
        warnings.append(config_warning(source.where(path), ".".join(path), text))

    if t.minibatch_size and t.train_batch_size and t.minibatch_size > t.train_batch_size:
        issues.append(
            ConfigIssue(
                source.where(("training", "minibatch_size")),
                "training.minibatch_size",
                f"{t.minibatch_size} is larger than training.train_batch_size {t.train_batch_size}; "
                "a minibatch is drawn from the train batch, so make it smaller",
            )
        )
    elif t.minibatch_size and t.train_batch_size and t.train_batch_size % t.minibatch_size:
        minibatch = t.minibatch_size
        n = t.train_batch_size // minibatch
        divisors = [d for d in range(1, t.train_batch_size + 1) if t.train_batch_size % d == 0]
        nearest = min(divisors, key=lambda d: abs(d - minibatch))
        warn(
            ("training", "minibatch_size"),
            f"{t.minibatch_size} does not divide train_batch_size {t.train_batch_size} "
            f"({t.train_batch_size} = {n} x {t.minibatch_size} + {t.train_batch_size - n * minibatch}): "
            "the minibatches do not tile the batch, so some samples weigh more than others in an epoch; "
            f"use a divisor such as {nearest}",
        )
    if isinstance(r.rollout_fragment_length, int) and t.train_batch_size:
        per_sample = r.rollout_fragment_length * (r.num_envs_per_env_runner or 1) * max(r.num_env_runners or 1, 1)
        if per_sample > t.train_batch_size:
            issues.append(
                ConfigIssue(
                    source.where(("env_runners", "rollout_fragment_length")),
                    "env_runners.rollout_fragment_length",
                    f"one round of sampling collects {per_sample} steps (fragment x envs x runners), more than "
                    f"training.train_batch_size {t.train_batch_size}; lower it or use 'auto'",
                )
            )
        elif t.train_batch_size % per_sample:
            warn(
                ("env_runners", "rollout_fragment_length"),
                f"train_batch_size {t.train_batch_size} is not a multiple of one sampling round ({per_sample} "
                "steps = fragment x envs x runners); RLlib will over-sample. Use 'auto' or a divisor.",
            )
    if isinstance(t.lr, float) and t.lr > 0.01:
        warn(("training", "lr"), f"{t.lr} is unusually high for PPO with Adam (typical 1e-5 to 1e-3)")
    if t.num_epochs and t.num_epochs > 40:
        warn(("training", "num_epochs"), f"{t.num_epochs} epochs per batch usually over-fits it (typical 3 to 30)")
    if t.use_gae is True and t.use_critic is False:
        issues.append(
            ConfigIssue(
                source.where(("training", "use_gae")), "training.use_gae", "GAE needs a critic: set use_critic: true"
            )
        )
    if cfg.model.vf_share_layers and t.vf_loss_coeff is None:
        warn(
            ("model", "vf_share_layers"),
            "with a shared encoder the value loss competes with the policy loss; set training.vf_loss_coeff "
            "(e.g. 0.01 to 0.5) rather than RLlib's 1.0",
        )
    main_cpus = cfg.resources.num_cpus_for_main_process
    if main_cpus is not None and not cfg.learners.num_learners and cfg.learners.num_cpus_per_learner in (None, "auto"):
        if main_cpus < 1 and not cfg.learners.num_gpus_per_learner:
            warn(
                ("resources", "num_cpus_for_main_process"),
                f"{main_cpus:g} has no effect on its own: with no remote learners the main process also hosts the "
                "learner, and RLlib reserves max(num_cpus_per_learner, num_cpus_for_main_process) = 1 CPU "
                f"(num_cpus_per_learner 'auto' means 1); set learners.num_cpus_per_learner: {main_cpus:g} too",
            )
    ev = cfg.evaluation
    idle = sorted((name for name in type(ev).model_fields if name != "evaluation_interval" and getattr(ev, name) is not None),
                  key=lambda name: name != "evaluation_num_env_runners")  # the one that costs CPUs first
    if ev.evaluation_interval is None and idle:
        also = f" (nor does {', '.join(idle[1:])})" if idle[1:] else ""
        cost = "; its evaluation env runners would reserve CPUs and never run" if ev.evaluation_num_env_runners else ""
        warn(("evaluation", idle[0]), f"no evaluation runs without evaluation.evaluation_interval, so this does "
             f"nothing{also}{cost}; set evaluation_interval: N to evaluate every N iterations")
    e = cfg.experiment
    if e.num_to_keep is not None and e.checkpoint_frequency == 0 and not e.checkpoint_at_end:
        warn(("experiment", "num_to_keep"), "no checkpoint will ever be written (frequency 0, at_end false)")
    issues += [ConfigIssue(source.where(("model", *at)), ".".join(("model", *at)), problem)
               for at, problem in initializer_problems(cfg.model)]
    warnings += [config_warning(source.where(path), ".".join(path), text) for path, text in idle_settings(cfg, searched).items()]
    return issues, warnings


def idle_settings(cfg: RaytrainConfig, searched: Collection[str] = ()) -> dict[tuple[str, str], str]:
    """{path: why} for each setting that another setting turns off: RLlib reads it only when the other is set.

    searched: the dotted keys a sweep varies; a setting whose switch is among them is used by some trials (no warning).
    """
    idle: list[tuple[tuple[str, str], str, str]] = []  # (path, the switch's dotted key, why)
    for kwargs in idle_arguments(cfg.model):
        initializer = kwargs.removesuffix("_kwargs")
        idle.append((("model", kwargs), f"model.{initializer}", (
            f"has no effect without model.{initializer} (RLlib passes them to that initializer only, and layers keep "
            f"torch's default initialization): set it, e.g. {initializer}: orthogonal_, or leave these out")))
    t, m = cfg.training, cfg.model
    if t.use_kl_loss is False:
        idle += [(("training", name), "training.use_kl_loss", "has no effect with training.use_kl_loss: false (no KL "
                  "term in the loss): set use_kl_loss: true, or leave it out")
                 for name in ("kl_coeff", "kl_target") if getattr(t, name) is not None]
    if not m.use_lstm:
        idle += [(("model", name), "model.use_lstm", "has no effect without model.use_lstm: true (the network has no "
                  "LSTM): set use_lstm: true, or leave it out") for name in _LSTM_ONLY if getattr(m, name) is not None]
    if t.grad_clip_by is not None and t.grad_clip is None:
        idle.append((("training", "grad_clip_by"), "training.grad_clip", "has no effect without training.grad_clip (no "
                     "gradient is clipped): set grad_clip, e.g. 0.5, or leave it out"))
    said: dict[tuple[str, str], str] = {}
    for path, switch, why in idle:
        if switch not in searched:
            said.setdefault(path, why)  # one warning a setting: the first said of it
    return said


_LSTM_ONLY = ("max_seq_len", "lstm_cell_size", "lstm_use_prev_action", "lstm_use_prev_reward", "lstm_kernel_initializer",
              "lstm_kernel_initializer_kwargs", "lstm_bias_initializer", "lstm_bias_initializer_kwargs")


def load_source(source: Source, overrides: list[str] | None = None, searched: Collection[str] = ()) -> LoadedConfig:
    """Validate a parsed `Source` (the data is modified in place).

    searched: the dotted keys a sweep varies over this config (its base config), for what is said of them.
    """
    notices = apply_overrides(source, overrides or [])
    notices += aliases.normalize(source)
    try:
        cfg = RaytrainConfig.model_validate(source.data)
    except ValidationError as exc:
        raise ConfigError(pydantic_issues(exc, source)) from None
    issues = _check_env(cfg, source) + _check_stop(cfg, source)
    cross_issues, warnings = _cross_checks(cfg, source, searched)
    warnings = _no_values(source) + warnings + _searches_in_env_config(cfg, source)
    issues += cross_issues
    if issues:
        raise ConfigError(issues)
    return LoadedConfig(cfg, source, notices, warnings)


def load_config(path: str | Path, overrides: list[str] | None = None) -> LoadedConfig:
    """Read, override, translate and validate a train config file.

    Raises:
        ConfigError: every problem found, each with file:line, dotted path and what to do.
    """
    from raytrain.config.kind import wrong_kind

    source = read_yaml(path)
    as_read = Source(copy.deepcopy(source.data), dict(source.origins), source.file)  # load_source rewrites old names
    try:
        return load_source(source, overrides)
    except ConfigError as exc:
        raise wrong_kind(as_read, "train") or exc from None

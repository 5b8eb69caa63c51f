"""The schema as JSON Schema (editors) and as a Markdown reference (README)."""

from __future__ import annotations

import types
import typing
from collections.abc import Callable, Iterable
from typing import Any, Literal, Union

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from raytrain.config.schema import SECTIONS, RaytrainConfig, rllib_fields


def json_schema(kind: str = "train") -> dict[str, Any]:
    """The JSON Schema of a train, sweep, cluster or Slurm file."""
    model: type[BaseModel] = RaytrainConfig
    if kind == "sweep":
        from raytrain.config.sweep import SweepConfig

        model = SweepConfig
    elif kind == "cluster":
        from raytrain.config.cluster import ClusterConfig

        model = ClusterConfig
    elif kind == "slurm":
        from raytrain.config.slurm import SlurmConfig

        model = SlurmConfig
    schema = model.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = f"raytrain {kind} config"
    return schema


def bounds(metadata: list[Any]) -> str:
    """The numeric bounds among pydantic constraints, as text: `> 0`, `>= 1`, `0 to 1`, `> 0, <= 1`."""
    limits = {}
    for entry in metadata:
        for item in getattr(entry, "metadata", None) or [entry]:  # a FieldInfo carries its constraints
            for name in ("gt", "ge", "lt", "le"):
                if getattr(item, name, None) is not None:
                    limits[name] = getattr(item, name)
    found = {name: str(value) if isinstance(value, int) else f"{value:g}" for name, value in limits.items()}
    if "ge" in found and "le" in found:
        return f"{found['ge']} to {found['le']}"
    ops = {"gt": ">", "ge": ">=", "lt": "<", "le": "<="}
    return ", ".join(f"{ops[name]} {value}" for name, value in found.items())


def type_name(annotation: Any) -> str:
    """A short, readable name for a field's type, with its bounds (`float > 0`)."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        limit = bounds(list(args[1:]))
        return type_name(args[0]) + (f" {limit}" if limit else "")
    if origin in (Union, types.UnionType):
        names = [type_name(a) for a in args if a is not type(None)]
        if any("Schedule" in n for n in names):
            names = [n for n in names if "Schedule" not in n] + ["schedule"]
        return " or ".join(dict.fromkeys(names))
    if origin is Literal:
        return " / ".join(str(a) for a in args)
    if origin in (list, tuple, dict):
        inner = ", ".join(type_name(a) for a in args if a is not Ellipsis)
        return f"{origin.__name__}[{inner}]"
    if annotation is Any:
        return "any"
    return getattr(annotation, "__name__", str(annotation))


def _rllib_defaults() -> dict[str, Any]:
    """RLlib's PPO defaults for the fields raytrain leaves unset, as raytrain values (imports Ray)."""
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig

    ppo, model = PPOConfig(), DefaultModelConfig()
    out: dict[str, Any] = {}
    for f in rllib_fields():
        if f.marker.call:  # a raytrain setting RLlib also takes: raytrain's own default applies
            continue
        if f.marker.values:  # a value raytrain maps: the one that leaves the setting to RLlib is its default
            out.update({f"{f.section}.{f.name}": mine for mine, theirs in f.marker.values.items() if theirs is None})
        elif f.within == "model_config":
            out[f"{f.section}.{f.name}"] = getattr(model, f.keyword, None)
        elif hasattr(ppo, f.keyword):
            out[f"{f.section}.{f.name}"] = getattr(ppo, f.keyword)
    return out


def _table(
    fields: Iterable[tuple[str, str, FieldInfo]], unset: Callable[[str], str] = lambda name: "unset"
) -> list[str]:
    """A Markdown table of (shown key, field name, pydantic field): key, type, default, meaning.

    `unset(name)` says what a field without a default of its own falls back to."""
    rows = ["| key | type | default | meaning |", "|---|---|---|---|"]
    for key, name, f in fields:
        if f.is_required():
            default = "required"
        elif f.default is not None or f.default_factory is not None:
            default = f"`{f.get_default(call_default_factory=True)!r}`"
        else:
            default = unset(name)
        meaning = (f.description or "").replace("|", "\\|")
        kind = type_name(f.annotation) + (f" {bounds(f.metadata)}" if bounds(f.metadata) else "")
        rows.append(f"| `{key}` | {kind.replace('|', '/')} | {default} | {meaning} |")
    return rows


def markdown_reference() -> str:
    """A Markdown table per section: key, type, default, meaning."""
    defaults = _rllib_defaults()
    lines = []
    for section, model in SECTIONS.items():
        lines.append(f"#### `{section}`\n")
        if model.__doc__:
            lines.append(model.__doc__.strip().splitlines()[0] + "\n")

        def unset(name: str, section: str = section) -> str:
            key = f"{section}.{name}"
            return f"RLlib: `{defaults[key]!r}`" if key in defaults else "unset"

        lines += _table([(f.alias or name, name, f) for name, f in model.model_fields.items()], unset)
        lines.append("")
    lines.append("#### `stop`\n")
    lines.append(f"{RaytrainConfig.model_fields['stop'].description}\n")
    return "\n".join(lines)


def _model_of(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model inside `X | None`, or None."""
    for candidate in (annotation, *typing.get_args(annotation)):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


def sweep_reference() -> str:
    """A Markdown table of the sweep file's top-level keys, then one per section (search, pbt, ...)."""
    from raytrain.config.sweep import SweepConfig

    def table(model: type[BaseModel], prefix: str) -> list[str]:
        return _table([(f"{prefix}{name}", name, f) for name, f in model.model_fields.items()
                       if prefix or _model_of(f.annotation) is None])

    lines = ["#### top level\n", *table(SweepConfig, ""), ""]
    for name, f in SweepConfig.model_fields.items():
        model = _model_of(f.annotation)
        if model is None:
            continue
        lines.append(f"#### `{name}`\n")
        if model.__doc__:
            lines.append(model.__doc__.strip().splitlines()[0] + "\n")
        lines += table(model, f"{name}.")
        lines.append("")
    return "\n".join(lines).rstrip()

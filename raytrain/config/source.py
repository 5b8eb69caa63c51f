"""Read YAML while remembering where every key came from, and apply `--set` overrides.

Every error message names `file:line`; that needs the line of each key, which `yaml.safe_load`
throws away. We compose the node tree once to record lines, then construct plain Python data.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from raytrain.errors import ConfigError, ConfigIssue

Path_ = tuple[str, ...]


@dataclass
class Source:
    """Raw config data plus the origin (`file:line` or `--set ...`) of each dotted path."""

    data: dict[str, Any]
    origins: dict[Path_, str] = field(default_factory=dict)
    file: str | None = None

    def where(self, path: Path_ | list) -> str | None:
        """The origin of `path`, or of its nearest ancestor that has one."""
        path = tuple(str(p) for p in path)
        while path:
            if path in self.origins:
                return self.origins[path]
            path = path[:-1]
        return self.file

    def move(self, old: Path_, new: Path_) -> None:
        """Carry the origins of `old` and everything below it over to `new`."""
        for p in [p for p in self.origins if p[: len(old)] == old]:
            self.origins[new + p[len(old) :]] = self.origins.pop(p)


def _record_lines(node: yaml.Node, path: Path_, file: str, out: dict[Path_, str]) -> None:
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            key = str(key_node.value)
            out[path + (key,)] = f"{file}:{key_node.start_mark.line + 1}"
            _record_lines(value_node, path + (key,), file, out)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            out[path + (str(i),)] = f"{file}:{item.start_mark.line + 1}"
            _record_lines(item, path + (str(i),), file, out)


def parse_yaml(text: str, file: str) -> Source:
    """Parse YAML text into a `Source`. Raises ConfigError with the line of a syntax error."""
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f"{file}:{mark.line + 1}" if mark else file
        raise ConfigError([ConfigIssue(where, "", f"invalid YAML: {exc.problem}")]) from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(
            [ConfigIssue(f"{file}:1", "", "the file must be a mapping of sections (experiment:, environment:, ...)")]
        )
    origins: dict[Path_, str] = {}
    if node is not None:
        _record_lines(node, (), file, origins)
    return Source(data=data, origins=origins, file=file)


def read_yaml(path: str | Path) -> Source:
    """Read a YAML file into a `Source`."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError([ConfigIssue(str(path), "", "no such file")])
    return parse_yaml(p.read_text(), str(path))


def parse_override(text: str) -> tuple[Path_, Any]:
    """Split `a.b=value` into (("a", "b"), value), the value parsed as YAML."""
    if "=" not in text:
        raise ConfigError(
            [ConfigIssue(f"--set {text}", "", "an override is KEY=VALUE, e.g. --set training.lr=0.001")]
        )
    key, _, raw = text.partition("=")
    key = key.strip()
    if not key or any(not part for part in key.split(".")):
        raise ConfigError([ConfigIssue(f"--set {text}", key, "the key must be a dotted path like training.lr")])
    try:
        value = yaml.safe_load(raw) if raw.strip() else None
    except yaml.YAMLError as exc:
        raise ConfigError([ConfigIssue(f"--set {text}", key, f"the value is not valid YAML: {exc}")]) from None
    return tuple(key.split(".")), value


_MISSING = object()


def apply_overrides(source: Source, overrides: list[str]) -> list[str]:
    """Apply `--set` overrides in order; return one line per override describing what changed."""
    changes = []
    for text in overrides:
        path, value = parse_override(text)
        node = source.data
        for i, part in enumerate(path[:-1]):
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            elif not isinstance(child, dict):
                raise ConfigError(
                    [ConfigIssue(f"--set {text}", ".".join(path[: i + 1]), "is not a section, cannot set a key inside it")]
                )
            node = child
        old = node.get(path[-1], _MISSING)
        node[path[-1]] = value
        for p in [p for p in source.origins if p[: len(path)] == path]:
            del source.origins[p]
        source.origins[path] = f"--set {text}"
        before = "unset" if old is _MISSING else yaml.safe_dump(old, default_flow_style=True).strip().removesuffix("\n...")
        after = yaml.safe_dump(value, default_flow_style=True).strip().removesuffix("\n...")
        changes.append(f"override: {'.'.join(path)} = {after} (was {before})")
    return changes

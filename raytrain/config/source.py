"""Read YAML while remembering where every key came from, and apply `--set` overrides.

Every error message names `file:line`; that needs the line of each key, which `yaml.safe_load`
throws away. We compose the node graph once, walk it once (lines, duplicate keys, alias expansion,
nesting), then construct plain Python data from the same graph.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Callable, Collection, Sequence
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
    written: dict[Path_, str] = field(default_factory=dict)
    """The text of each plain scalar that YAML read as a boolean or a number (`yes`, `4:00:00`), by path:
    an error about what YAML made of it can show what was written."""

    def where(self, path: Sequence[str | int]) -> str | None:
        """The origin of `path`, or of its nearest ancestor that has one."""
        key = tuple(str(p) for p in path)
        while key:
            if key in self.origins:
                return self.origins[key]
            key = key[:-1]
        return self.file

    def move(self, old: Path_, new: Path_) -> None:
        """Carry the origins of `old` and everything below it over to `new`."""
        for table in (self.origins, self.written):
            for p in [p for p in table if p[: len(old)] == old]:
                table[new + p[len(old) :]] = table.pop(p)


MAX_DEPTH = 100
"""Deepest nesting of collections a file may have, counted through aliases too. Configs need under 10."""
MIN_EXPANSION = 10_000
EXPANSION_FACTOR = 10
"""A document may expand (aliases written out) to max(MIN_EXPANSION, EXPANSION_FACTOR x its own nodes) nodes."""

_MERGE_TAG = "tag:yaml.org,2002:merge"
_KEY_TAGS = (_MERGE_TAG, "tag:yaml.org,2002:value")  # `<<` and `=` keys: the constructor rewrites the mapping


class _Problem(Exception):
    """Something the loader refuses, at a 1-based line (None: no line) and dotted path.

    `message` may be a function of the origin of `first_line` (a duplicate key names both places).
    """

    def __init__(self, line: int | None, path: Path_, message: str | Callable[[str | None], str],
                 first_line: int | None = None) -> None:
        super().__init__(message)
        self.line, self.path, self.message, self.first_line = line, path, message, first_line


class _Problems(Exception):
    """Several problems at once (every duplicate key of a file)."""

    def __init__(self, problems: list[_Problem]) -> None:
        super().__init__(problems)
        self.problems = problems


def _syntax_problem(exc: yaml.MarkedYAMLError) -> _Problem:
    """A PyYAML syntax error as a _Problem at the line where it was found."""
    mark = exc.problem_mark or exc.context_mark
    if exc.context and "duplicate anchor" in exc.context and exc.context_mark:
        text = f"{exc.context.removesuffix('; first occurrence')}, first defined at line {exc.context_mark.line + 1}"
    elif exc.context and exc.problem:
        where = f" at line {exc.context_mark.line + 1}" if exc.context_mark else ""
        text = f"{exc.problem} ({exc.context}{where})"
    else:
        text = exc.problem or exc.context or "cannot parse it"
    if exc.problem and "'\\t'" in exc.problem:
        text += ": YAML indents with spaces only; replace the tab with spaces"
    return _Problem(mark.line + 1 if mark else None, (), f"invalid YAML: {text}")


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader that counts the nodes it composes and refuses deep nesting.

    PyYAML composes collections recursively, so 20,000 nested `[` would end in a RecursionError;
    the depth is checked before each collection is opened instead.
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.depth = 0
        self.nodes = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node:
        if self.check_event(yaml.AliasEvent):
            return super().compose_node(parent, index)
        self.nodes += 1
        if self.depth >= MAX_DEPTH:
            line = self.peek_event().start_mark.line + 1
            raise _Problem(line, (), f"nested more than {MAX_DEPTH} levels deep; a config needs far fewer")
        self.depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


class _Walk:
    """One pass over the composed node graph, before anything is constructed.

    Each node is entered once (an alias points at the node of its anchor, which is not walked again):
    that records the line of every key and list item written in the file, finds keys given twice in a
    mapping, builds every scalar (so a bad value is reported with its line), and computes how large and
    how deep the document becomes once every alias is written out, refusing it past the limits. Time
    and memory are linear in the size of the file, whatever the aliases expand to.
    """

    def __init__(self, loader: _Loader, budget: int):
        self.loader = loader
        self.budget = budget
        self.lines: dict[Path_, int] = {}
        self.written: dict[Path_, str] = {}
        self.duplicates: list[_Problem] = []
        self._done: dict[int, tuple[int, int]] = {}  # id(node) -> (expanded size, expanded depth)
        self._open: set[int] = set()

    def visit(self, node: yaml.Node, path: Path_, key: bool = False) -> tuple[int, int]:
        known = self._done.get(id(node))
        if known is not None:
            return known
        line = node.start_mark.line + 1
        if id(node) in self._open:
            raise _Problem(line, path, "an alias refers to a value that contains it (a recursive structure); remove it")
        self._open.add(id(node))
        size, depth = 1, 0
        if isinstance(node, yaml.MappingNode):
            first: dict[Any, yaml.Node] = {}
            for key_node, value_node in node.value:
                child = path + (str(key_node.value),)
                if key_node.tag != _MERGE_TAG:
                    self.lines.setdefault(child, key_node.start_mark.line + 1)
                for sub in (key_node, value_node):
                    sub_size, sub_depth = self.visit(sub, child, key=sub is key_node)
                    size, depth = size + sub_size, max(depth, sub_depth)
                if isinstance(key_node, yaml.ScalarNode) and key_node.tag not in _KEY_TAGS:
                    self._check_duplicate(first, key_node, child)
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                child = path + (str(i),)
                self.lines.setdefault(child, item.start_mark.line + 1)
                sub_size, sub_depth = self.visit(item, child)
                size, depth = size + sub_size, max(depth, sub_depth)
        elif node.tag not in _KEY_TAGS:
            try:
                value = self.loader.construct_object(node)
                if not key and isinstance(value, (bool, int, float)) and isinstance(node, yaml.ScalarNode) and node.style is None:
                    self.written[path] = node.value
            except yaml.YAMLError:
                raise
            except Exception as exc:  # e.g. a timestamp with month 13: PyYAML raises a plain ValueError
                raise _Problem(line, path, f"cannot read this value ({exc})") from None
        depth += 1
        if size > self.budget:
            raise _Problem(
                line,
                path,
                f"this value expands to {size:,} YAML nodes once its aliases (*name) are written out, more than "
                f"the {self.budget:,} raytrain reads from a file this size; write the values out or use fewer aliases",
            )
        if depth > MAX_DEPTH:
            raise _Problem(line, path, f"nested more than {MAX_DEPTH} levels deep once its aliases are written out")
        self._open.discard(id(node))
        self._done[id(node)] = (size, depth)
        return size, depth

    def _check_duplicate(self, first: dict[Any, yaml.Node], key_node: yaml.Node, path: Path_) -> None:
        key = self.loader.construct_object(key_node)
        try:
            earlier = first.get(key)
        except TypeError:  # unhashable: the constructor reports it with its line
            return
        if earlier is None:
            first[key] = key_node
        else:
            name = key_node.value

            def message(first: str | None) -> str:
                return (
                    f"duplicate key: {name!r} is written twice in one mapping{f', first at {first}' if first else ''}; "
                    "YAML would keep only the last one and drop the values of the first, so give it once"
                )

            self.duplicates.append(_Problem(key_node.start_mark.line + 1, path, message, earlier.start_mark.line + 1))


def _unshare(value: Any) -> Any:
    """A copy in which every alias has its own dicts and lists, so changing one path changes no other."""
    if isinstance(value, dict):
        return {k: _unshare(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_unshare(v) for v in value]
    return value


_CONTROL = re.compile(yaml.reader.Reader.NON_PRINTABLE.pattern)


def _load(text: str) -> tuple[Any, dict[Path_, int], dict[Path_, str]]:
    """Parse one YAML document into plain data, the line of each path and the text of each plain scalar
    read as a boolean or a number.

    Raises:
        _Problem: everything refused, first the characters, then syntax, nesting, aliases, duplicate keys.
    """
    bad = _CONTROL.search(text)
    if bad:
        char = bad.group()
        name = "a NUL byte" if char == "\0" else f"the control character U+{ord(char):04X}"
        line = text.count("\n", 0, bad.start()) + 1
        column = bad.start() - (text.rfind("\n", 0, bad.start()) + 1) + 1
        raise _Problem(line, (), f"{name} at column {column}: YAML text cannot contain it")
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None, {}, {}
        walk = _Walk(loader, max(MIN_EXPANSION, EXPANSION_FACTOR * loader.nodes))
        walk.visit(node, ())
        if walk.duplicates:
            raise walk.duplicates[0] if len(walk.duplicates) == 1 else _Problems(walk.duplicates)
        return _unshare(loader.construct_document(node)), walk.lines, walk.written
    except yaml.MarkedYAMLError as exc:
        raise _syntax_problem(exc) from None
    except yaml.YAMLError as exc:  # PyYAML marks nearly all of its errors; this is the rest
        raise _Problem(None, (), f"invalid YAML: {exc}") from None
    finally:
        loader.dispose()


def _issues(exc: _Problem | _Problems, where: Callable[[int | None], str | None]) -> list[ConfigIssue]:
    """ConfigIssues for `_load`'s exception; `where(line)` names a place (None: no line to name)."""
    problems = exc.problems if isinstance(exc, _Problems) else [exc]
    return [
        ConfigIssue(
            where(p.line),
            ".".join(p.path),
            p.message if isinstance(p.message, str) else p.message(where(p.first_line) if p.first_line else None),
        )
        for p in problems
    ]


def parse_yaml(text: str, file: str) -> Source:
    """Parse YAML text into a `Source`.

    Raises:
        ConfigError: with `file:line` for a syntax error, a control character, nesting deeper than
            MAX_DEPTH, aliases that expand past the budget, or a key written twice in one mapping.
    """
    try:
        data, lines, written = _load(text)
    except (_Problem, _Problems) as exc:
        raise ConfigError(_issues(exc, lambda line: f"{file}:{line}" if line else file)) from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(
            [ConfigIssue(f"{file}:1", "", "the file must be a mapping of sections (experiment:, environment:, ...)")]
        )
    origins = {path: f"{file}:{line}" for path, line in lines.items()}
    return Source(data=data, origins=origins, file=file, written=written)


def decode(raw: bytes, file: str) -> str:
    """UTF-8 bytes (a leading BOM allowed) as text; a ConfigError with the line of the first bad byte."""
    raw = raw.removeprefix(codecs.BOM_UTF8)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        column = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise ConfigError(
            [
                ConfigIssue(
                    f"{file}:{line}",
                    "",
                    f"byte 0x{raw[exc.start]:02x} at column {column} is not UTF-8; save the file as UTF-8",
                )
            ]
        ) from None


def read_yaml(path: str | Path) -> Source:
    """Read a YAML file into a `Source` (see `parse_yaml` for what is refused)."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError([ConfigIssue(str(path), "", _not_a_file(p))])
    if p.suffix == ".py":  # an RLlib script: its YAML errors said nothing of what raytrain reads
        raise ConfigError([ConfigIssue(str(path), "", "a Python file: raytrain reads YAML (a train config: `raytrain "
                                                      "config schema` lists its settings, and README's table maps "
                                                      "RLlib's names)")])
    try:
        raw = p.read_bytes()
    except OSError as exc:
        raise ConfigError([ConfigIssue(str(path), "", f"cannot read it: {exc.strerror or exc}")]) from None
    return parse_yaml(decode(raw, str(path)), str(path))


def _not_a_file(path: Path) -> str:
    """What `path`, which is no regular file, is instead, and what to give."""
    if path.is_dir():
        found = sorted(p.name for p in path.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file())
        if not found:
            return "is a folder, and holds no YAML file: give a YAML file"
        shown = ", ".join(found[:3]) + (", ..." if len(found) > 3 else "")
        return f"is a folder: give one of its YAML files ({shown})"
    if path.exists():
        return "is not a regular file: give a YAML file"
    return f"no such file{did_you_mean(path)}"


def did_you_mean(path: Path) -> str:
    """`; did you mean F?` for the file F beside `path`, which does not exist, whose name is nearest to its
    name (a typo), or nothing."""
    import difflib

    folder = path.parent
    try:
        names = [p.name for p in folder.iterdir() if p.is_file()] if folder.is_dir() else []
    except OSError:
        names = []
    near = difflib.get_close_matches(path.name, names, n=1, cutoff=0.8)
    return f"; did you mean {folder / near[0]}?" if near else ""


_DOTTED_KEY = r"[A-Za-z_]\w*(?:\.[\w/-]+)+"
_MORE_OVERRIDES = re.compile(r"[,;\s]" + _DOTTED_KEY + "=")
"""Another `key.path=` after a separator in an override's value: overrides written together, as Hydra takes them
(`training.lr=3e-4,training.gamma=0.9`) or as one quoted shell word."""


def parse_override(text: str) -> tuple[Path_, Any]:
    """Split `a.b=value` into (("a", "b"), value), the value parsed as YAML."""
    path, value, _ = _parse_override(text)
    return path, value


def _parse_override(text: str) -> tuple[Path_, Any, str | None]:
    """`parse_override`, and the value's text where YAML read it as a boolean or a number."""
    if "=" not in text:
        raise ConfigError(
            [ConfigIssue(f"--set {text}", "", "an override is KEY=VALUE, e.g. --set training.lr=0.001")]
        )
    key, _, raw = text.partition("=")
    key = key.strip()
    if not key or any(not part for part in key.split(".")):
        raise ConfigError([ConfigIssue(f"--set {text}", key, "the key must be a dotted path like training.lr")])
    if raw.strip()[:1] not in ("'", '"', "{", "[") and _MORE_OVERRIDES.search(raw):
        each = " ".join(f"--set {part.strip()}" for part in re.split(r"[,;\s]+(?=" + _DOTTED_KEY + "=)", text))
        raise ConfigError([ConfigIssue(f"--set {text}", "", (
            f"holds more than one override: give each its own --set, as in {each} (a value with such text in it: "
            f"quote it, {key}='...')"))])
    try:
        value, _, written = _load(raw) if raw.strip() else (None, {}, {})
    except (_Problem, _Problems) as exc:
        issues = _issues(exc, lambda line: None)
        raise ConfigError([ConfigIssue(f"--set {text}", key, f"the value: {i.message}") for i in issues]) from None
    return tuple(key.split(".")), value, written.get(())


def override_text(key: str, value: Any) -> str:
    """`key=value` that `parse_override` reads back as exactly `value`: how a flag's value (`--name 2024`, a
    Slurm file's storage path) joins the `--set` overrides. The value is written as YAML, so a text that YAML
    would read as something else (`2024`, `yes`, `x: y`) is quoted."""
    text = yaml.safe_dump(value, default_flow_style=True, width=float("inf"))  # non-ASCII escaped: NEL is a line break to YAML
    if isinstance(value, str) and text[:1] not in ("'", '"') and _MORE_OVERRIDES.search(text):
        text = yaml.safe_dump(value, default_flow_style=True, width=float("inf"), default_style="'")  # not read as two
    return key + "=" + text.removesuffix("\n").removesuffix("\n...")


_MISSING = object()


def _key_length(node: dict[str, Any], rest: Path_, dotted: bool) -> int:
    """How many parts of `rest` make the next key under `node`: the longest run of them that, joined with `.`, is
    a key `node` has; else all of them where `node` is keyed by dotted paths (`dotted`), else one."""
    for n in range(len(rest), 0, -1):
        if ".".join(rest[:n]) in node:
            return n
    return len(rest) if dotted else 1


def apply_overrides(source: Source, overrides: list[str], dotted: Collection[Path_] = ()) -> list[str]:
    """Apply `--set` overrides in order; return one line per override describing what changed.

    `dotted` names the mappings whose keys are themselves dotted paths (a sweep's `space: {training.lr: ...}`):
    the rest of an override's path is one key there, or the longest key there that begins it
    (`space.training.lr.high`: `high` of `training.lr`). Elsewhere a dot separates keys, except where a mapping
    already has a key with a dot that the path names.
    """
    changes = []
    for text in overrides:
        parts, value, written = _parse_override(text)
        node, i = source.data, 0
        path: Path_ = ()
        while True:
            n = _key_length(node, parts[i:], path in dotted)
            key, i = ".".join(parts[i : i + n]), i + n
            path = (*path, key)
            if i == len(parts):
                break
            child = node.get(key)
            if child is None:
                child = node[key] = {}
                source.origins.setdefault(path, f"--set {text}")  # the override made this section
            elif not isinstance(child, dict):
                raise ConfigError([ConfigIssue(f"--set {text}", ".".join(path), "is not a section, cannot set a key inside it")])
            node = child
        old = node.get(key, _MISSING)
        node[key] = value
        for table in (source.origins, source.written):
            for p in [p for p in table if p[: len(path)] == path]:
                del table[p]
        source.origins[path] = f"--set {text}"
        if written is not None:
            source.written[path] = written
        # A key the file leaves out has the value of a default, or of a sweep's base config: not "unset"
        before = "not set in the file" if old is _MISSING else \
            "was " + yaml.safe_dump(old, default_flow_style=True).strip().removesuffix("\n...")
        after = yaml.safe_dump(value, default_flow_style=True).strip().removesuffix("\n...")
        changes.append(f"override: {'.'.join(path)} = {after} ({before})")
    return changes

"""Objects a config or a command names by import path (`"pkg.module:Name"`) or by module name.

The one place raytrain imports what a user names: an env class, a PBT explore function, the module
of a `raytrain run` pipeline, and its own callbacks and connectors by path. Callers turn the errors
into their own messages.

The current directory is importable, first, as in every worker of the Ray this process starts or joins:
Ray puts the driver's current directory first on each worker's `sys.path` (`ray._private.worker`, "Also add
the current directory"). So `env: myenvs:Walk` with `myenvs.py` beside you works in `raytrain train` as it
does in `python -m raytrain train`, and the env the checks import is the one the env runners will build.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType
from typing import Any


def import_module(name: str) -> ModuleType:
    """The module `name` (`"pkg.module"`), imported, the current directory first on the path.

    Raises:
        ModuleNotFoundError: no such module (its `name` says which one of the dotted parts is missing; when
            that is the first part, the message says where Python looked and what to do).
        ModuleFailedError: the user's module was found and failed as it ran (a syntax error, an exception).
        ImportError: the module, or one it imports, failed to import.
        ValueError: an empty name.
    """
    top = top_module(name)
    if top == "raytrain":  # raytrain's own: from where it is installed, and its errors as they are
        return importlib.import_module(name)
    cwd = _cwd_first()
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name != top or cwd is None:
            raise
        raise ModuleNotFoundError(
            f"{exc} (looked in the current directory {cwd} and on the path of {sys.executable}): run raytrain "
            f"from the folder that holds {top}.py or the package {top}/, or install it into that Python",
            name=exc.name,
        ) from None
    except ImportError:
        raise
    except Exception as exc:
        raise module_failed(exc, name) from exc


class ModuleFailedError(ImportError):
    """A module the user named was found, and failed as it ran: a syntax error, or an exception raised at its top
    level. An ImportError, so every caller that reports a module it cannot import reports this one (it went
    through them as a SyntaxError or a NameError: exit 1, `error: SyntaxError: ... (envs.py, line 3)`). Its
    message says where: `envs.py:3: SyntaxError: expected ':' (class Walk(gym.Env))`."""


def module_failed(exc: Exception, name: str) -> ModuleFailedError:
    """`exc`, raised as the user's module `name` ran (not an ImportError), as the error that says where."""
    if isinstance(exc, SyntaxError):
        text = f" ({exc.text.strip()})" if exc.text and exc.text.strip() else ""
        return ModuleFailedError(f"{_shown(exc.filename)}:{exc.lineno}: {type(exc).__name__}: {exc.msg}{text}",
                                 name=name)
    return ModuleFailedError(f"importing it raised {type(exc).__name__}: {exc}{raised_at(exc)}", name=name)


def _shown(filename: str | None) -> str:
    """A file of the user's as they would write it: relative to the current directory when under it."""
    if not filename:
        return "<unknown file>"
    try:
        return str(Path(filename).relative_to(Path.cwd()))
    except (ValueError, OSError):
        return filename


def raised_at(exc: BaseException) -> str:
    """` (file:line: source)` of where `exc` was raised: the innermost frame of the user's own code
    (`user_code_at`), else the innermost in any real file."""
    import traceback

    if own := user_code_at(exc):
        return own
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if not f.filename.startswith("<")]
    return _frame_text(frames[-1]) if frames else ""


def _frame_text(frame: Any) -> str:
    return f" ({_shown(frame.filename)}:{frame.lineno}{': ' + frame.line if frame.line else ''})"


def user_code_at(exc: BaseException) -> str:
    """` (file:line: source)` of the innermost frame of `exc`'s traceback in the user's own code: a file under the
    current directory that is neither raytrain's nor an installed package's. "" when none is."""
    import sysconfig
    import traceback

    paths = sysconfig.get_paths()
    not_users = [Path(__file__).resolve().parent, *(Path(paths[k]).resolve() for k in ("stdlib", "platstdlib",
                                                                                      "purelib", "platlib"))]
    for frame in reversed(traceback.extract_tb(exc.__traceback__)):
        shown = _shown(frame.filename)
        if frame.filename.startswith("<") or Path(shown).is_absolute() \
                or {"site-packages", "dist-packages"} & set(Path(shown).parts):
            continue
        if any(Path(frame.filename).resolve().is_relative_to(root) for root in not_users):
            continue
        return _frame_text(frame)
    return ""


def top_module(path: str) -> str:
    """The top-level module an import path or module name starts with: `pkg` of `"pkg.module:Class"`."""
    return path.partition(":")[0].partition(".")[0]


def gym_module_id(path: str) -> tuple[str, str] | None:
    """(module, id) of Gymnasium's own `"module:EnvId"` form, `"ale_py:ALE/Pong-v5"`: `gymnasium.make` imports
    the module, which registers the id, and makes the env (RLlib hands it such a string as it is). None for an
    import path of an object, `"pkg.module:Class"`, whose part after the colon is a dotted Python name."""
    module, colon, rest = path.partition(":")
    if not colon or not module or not rest or all(part.isidentifier() for part in rest.split(".")):
        return None
    return module, rest


def user_paths(*paths: str | None) -> list[str]:
    """The import paths (`"pkg.module:Name"`) among `paths`, which also hold Gymnasium ids and None."""
    return [p for p in paths if p and ":" in p]


def module_in(folder: Path, name: str) -> Path | None:
    """The top-level module `name` as Python finds it in `folder`: the package folder `name/`, or `name.py`."""
    if (folder / name / "__init__.py").is_file():
        return folder / name
    if (folder / f"{name}.py").is_file():
        return folder / f"{name}.py"
    return None


def _cwd_first() -> str | None:
    """Put the current directory first on `sys.path` unless it is there already; return it (None: it is gone)."""
    try:
        cwd = os.getcwd()
    except OSError:
        return None
    if cwd not in sys.path and "" not in sys.path:
        put_first_on_path(cwd)
    return cwd


def put_first_on_path(folder: str) -> None:
    """Put `folder` first on `sys.path`, warning (on stderr, once per folder) of each module in it named like one
    of Python's standard modules: from now on it is imported instead, here and in Ray's workers (a user's grp.py
    ran when Ray imported tarfile, which imports grp)."""
    sys.path.insert(0, folder)
    if folder in _warned:
        return
    _warned.add(folder)
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError:
        return
    for entry in entries:
        name = entry.name.removesuffix(".py")
        if name not in sys.stdlib_module_names or name in _NEVER_IMPORTED:
            continue
        if entry.name.endswith(".py") or os.path.isfile(os.path.join(entry.path, "__init__.py")):
            print(f"warning: {entry.path} has the name of Python's standard module {name}: raytrain imports your "
                  f"modules from {folder}, first on the path, as Ray's workers do, so an `import {name}` in Python, "
                  "Ray or a library would run this file instead: rename it", file=sys.stderr, flush=True)


_warned: set[str] = set()
_NEVER_IMPORTED = {"test", "this", "antigravity", "idlelib", "turtledemo", "__hello__", "__phello__"}
"""Standard modules no library imports (a user's test.py is common, and harmless)."""


def resolve_import(path: str) -> Any:
    """The object `"pkg.module:Name"` names; `Name` may be dotted (`"pkg.module:Outer.inner"`).

    Raises:
        ImportError: as `import_module`, for the part before the colon.
        AttributeError: the module has no such attribute (also when `:Name` is missing or empty).
        ValueError: an empty module name.
    """
    module_name, _, attr = path.partition(":")
    obj: Any = import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def working_directory_modules(import_paths: Iterable[str]) -> list[Path]:
    """The modules of the current directory that code named by `import_paths` needs, as files and package folders.

    What a driver that runs elsewhere, in a folder of its own (a sweep submitted as a Ray Job), must take
    along: each named module's top-level module when it lies in the current directory (`name.py`, or the
    package folder `name/` whole), and, read from their source, the other modules of that directory they
    import, and theirs. Never raytrain itself (a clone of it as the current directory): the job's Python
    has its own.
    """
    try:
        cwd = Path.cwd()
    except OSError:
        return []
    found: dict[str, Path] = {}
    todo = [top_module(path) for path in import_paths]
    while todo:
        name = todo.pop()
        if name in found or name == "raytrain" or (module := module_in(cwd, name)) is None:
            continue
        found[name] = module
        for source in sorted(module.rglob("*.py")) if module.is_dir() else [module]:
            todo.extend(_imported_names(source))
    return list(found.values())


def _imported_names(source: Path) -> set[str]:
    """The top-level module names a Python file imports absolutely (`import a.b`, `from a import b`)."""
    import ast

    try:
        tree = ast.parse(source.read_bytes(), str(source))
    except (OSError, SyntaxError, ValueError):
        return set()
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name.partition(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.partition(".")[0])
    return names

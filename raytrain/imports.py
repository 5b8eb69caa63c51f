"""Objects a config or a command names by import path (`"pkg.module:Name"`) or by module name.

The one place raytrain imports what a user names: an env class, a PBT explore function, the module
of a `raytrain run` pipeline, and its own callbacks and connectors by path. Callers turn the errors
into their own messages.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any


def import_module(name: str) -> ModuleType:
    """The module `name` (`"pkg.module"`), imported.

    Raises:
        ModuleNotFoundError: no such module (its `name` says which one of the dotted parts is missing).
        ImportError: the module, or one it imports, failed to import.
        ValueError: an empty name.
    """
    return importlib.import_module(name)


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

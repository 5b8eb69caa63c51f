"""Path checks shared by dry runs and real runs: one writability probe, one containment test."""

from __future__ import annotations

import os
import uuid
from pathlib import Path


def nearest_existing(path: str | os.PathLike[str]) -> Path:
    """The path itself if it exists, else its closest existing ancestor (absolute, not resolved)."""
    candidate = Path(os.path.abspath(os.path.expanduser(os.fspath(path))))
    while not candidate.exists() and candidate != candidate.parent:
        candidate = candidate.parent
    return candidate


def probe_writable(path: str | os.PathLike[str]) -> str | None:
    """Check that files can be created in `path` (a directory, existing or not) without leaving anything.

    For a directory that does not exist yet, the probe runs in its nearest existing ancestor, since that is
    where the first `mkdir` will write; the missing levels are not created. The probe creates and deletes a
    uniquely named file, so it answers what a real write would (``os.access`` says yes to root for
    ``/proc/x``, where every write then fails).

    Returns:
        None when writable, else a short human-readable reason ("not writable: /a/b is not a directory",
        "not writable: Permission denied").
    """
    target = Path(os.path.abspath(os.path.expanduser(os.fspath(path))))
    base = nearest_existing(target)
    if not base.is_dir():
        return f"not writable: {base} is not a directory"
    probe = base / f".raytrain-probe-{os.getpid()}-{uuid.uuid4().hex}"
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as exc:
        return f"not writable: cannot create a file in {base} ({exc.strerror or exc})"
    os.close(fd)
    try:
        os.unlink(probe)
    except OSError as exc:
        return f"not writable: cannot remove a file from {base} ({exc.strerror or exc})"
    return None


def inside(base: str | os.PathLike[str], path: str | os.PathLike[str]) -> bool:
    """Whether `path`, resolved (symlinks and ``..`` followed), is `base` or below it."""
    resolved_base = Path(os.path.expanduser(os.fspath(base))).resolve()
    resolved = Path(os.path.expanduser(os.fspath(path))).resolve()
    return resolved == resolved_base or resolved_base in resolved.parents


def same_path(a: object, b: object) -> bool:
    """Whether two path texts name the same place (`~` expanded, relative to the working directory, links
    resolved); False where either is not a text."""
    if not isinstance(a, str) or not isinstance(b, str):
        return False
    return Path(a).expanduser().resolve() == Path(b).expanduser().resolve()

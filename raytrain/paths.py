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


NAME_MAX = 255
"""The longest file name, in bytes, that Linux file systems take (ext4, xfs, btrfs, tmpfs, NFS)."""
PATH_MAX = 4096
"""The longest path, in bytes, that Linux takes in one call."""


def path_problem(path: str | os.PathLike[str]) -> str | None:
    """Why `path` (`~` expanded, made absolute) cannot become a folder to write in, found by looking at it: a name
    longer than file systems take, a path longer than Linux takes, a symbolic link to nothing on the way, or a loop
    of links. Else None (the rest is `probe_writable`'s).

    Each was passed by the checks and failed once Ray had started (a link to nothing: `mkdir` said `File exists`), or
    ended a dry run with Python's own error (`File name too long`, `Symlink loop`).
    """
    import errno

    target = Path(os.path.abspath(os.path.expanduser(os.fspath(path))))
    for part in target.parts:
        if (size := len(os.fsencode(part))) > NAME_MAX:
            return f"the name {part[:24]}... is {size} bytes, longer than the {NAME_MAX} a file system takes"
    if (size := len(os.fsencode(str(target)))) >= PATH_MAX:
        return f"the path is {size} bytes, longer than the {PATH_MAX - 1} Linux takes"
    prefix = Path(target.anchor)
    for part in target.parts[1:]:
        prefix = prefix / part
        try:
            os.stat(prefix)
        except FileNotFoundError:
            if os.path.islink(prefix):
                return f"{prefix} is a symbolic link to {os.readlink(prefix)}, which does not exist"
            return None  # made by the run
        except OSError as exc:
            return f"{prefix} is a loop of symbolic links" if exc.errno == errno.ELOOP else None
    return None


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
    problem = path_problem(path)
    if problem:
        return f"not writable: {problem}"
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


_HELD: dict[Path, int] = {}
"""The folders this process holds (`hold_folder`), with the descriptor that holds each."""


def hold_folder(path: Path) -> bool:
    """Hold the folder `path` for this process until it exits (an exclusive `flock` of the folder itself, which the
    kernel lets go of when the process ends, killed or not); False where another process holds it.

    A run's and a sweep's drivers record themselves in a file (run.json, driver.json) only some seconds after they
    start; two commands started within those seconds both went on in one folder. A file system that has no such
    lock for a folder (NFS) holds nothing here, and the file alone tells.
    """
    import errno
    import fcntl

    if path in _HELD:
        return True
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        return exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN)
    _HELD[path] = fd
    return True


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

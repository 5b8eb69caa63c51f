"""A command run in a mount namespace of its own, with a mount made there first: a full disk (a small tmpfs) or a
read-only folder (a read-only bind mount), seen by that command alone. Root writes anywhere else."""

import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest


def needs_unshare(namespace: str) -> pytest.MarkDecorator:
    """A test that runs a command in a namespace of its own (`namespace`, said in the skip reason): it needs root
    and `unshare`."""
    return pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("unshare"), reason=f"needs root and unshare ({namespace})")


needs_mount_namespace = needs_unshare("a mount namespace")


def tmpfs(folder: Path, size: str = "600k") -> list[list[str]]:
    """The mount that makes `folder` a small disk that fills."""
    return [["-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)]]


def read_only(folder: Path) -> list[list[str]]:
    """The mounts that make `folder` read-only: a bind mount onto itself, then made read-only (one `mount --bind -o
    ro` leaves it writable on older kernels)."""
    return [["--bind", str(folder), str(folder)], ["-o", "remount,bind,ro", str(folder)]]


def run_with_mounts(mounts: list[list[str]], argv: list[str], copy: tuple[Path, Path] | None = None, *,
                    timeout: float, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """`argv` in a mount namespace of its own (private propagation: nothing reaches the host's mounts) after each
    `mount` of `mounts`; then, with `copy=(mounted, to)`, a copy of what it left in a mount that ends with the
    namespace. Its exit status is the command's (or the first failing mount's)."""
    steps = [shlex.join(["mount", *mount]) for mount in mounts]
    command = shlex.join(argv)
    if copy is None:
        steps.append(f"exec {command}")
    else:
        steps.append(f"{{ {command}; rc=$?; cp -r {shlex.quote(str(copy[0]))} {shlex.quote(str(copy[1]))}; exit $rc; }}")
    return subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", " && ".join(steps)],
                          capture_output=True, text=True, timeout=timeout, env=env)

"""A benchmark's "this tree against another commit": the other commit checked out beside it as a `git worktree`."""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def short(rev: str) -> str:
    """The short hash of `rev` in this repository."""
    return subprocess.run(["git", "rev-parse", "--short", rev], cwd=ROOT, capture_output=True, text=True,
                          check=True).stdout.strip()


@contextmanager
def worktree(against: str, prefix: str) -> Iterator[tuple[str, str, Path, Path]]:
    """Print the command line and what is compared; yield (this tree's commit, REV's, REV's worktree, a scratch
    folder that holds it), and remove both however the benchmark ends."""
    rev, here = short(against), short("HEAD")
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, capture_output=True,
                           text=True, check=True).stdout.strip()
    print(f"# {' '.join(sys.argv)}")
    print(f"# this tree: {here}{' + uncommitted changes' if dirty else ''}; against: {rev}")
    scratch = Path(tempfile.mkdtemp(prefix=prefix))
    other = scratch / "against"
    subprocess.run(["git", "worktree", "add", "--detach", "-q", str(other), rev], cwd=ROOT, check=True)
    try:
        yield here, rev, other, scratch
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(other)], cwd=ROOT)
        shutil.rmtree(scratch, ignore_errors=True)


def alternating(repeats: int, other: Path) -> Iterator[tuple[int, str, Path]]:
    """(repeat, "this" or "against", the tree to run) for each run, the side that goes first alternating."""
    for repeat in range(repeats):
        order = [("this", ROOT), ("against", other)]
        if repeat % 2:
            order.reverse()
        for side, tree in order:
            yield repeat, side, tree


def print_medians(repeats: int, here: str, rev: str, rows: list[tuple[str, list[float], list[float]]],
                  value: str = ".1f", ratio: str = ".2f") -> None:
    """The benchmark's closing table: per figure (label, this tree's values, REV's), the medians and this / REV."""
    print()
    print(f"| figure (median of {repeats}) | this ({here}) | against ({rev}) | ratio |")
    print("|---|---|---|---|")
    for label, these, theirs in rows:
        a, b = statistics.median(these), statistics.median(theirs)
        print(f"| {label} | {a:{value}} | {b:{value}} | {a / b:{ratio}} |" if b else f"| {label} | {a:{value}} | {b:{value}} | - |")

"""Tests' own seconds, this tree against another commit: the suite's time measured side by side, never timed tests.

Each repeat runs the selected tests once with this tree's code and once with REV's (a `git worktree`, the side
that goes first alternating), one pytest process each (no xdist), and reads each test's seconds (setup, call and
teardown) from pytest's JUnit XML. Prints each test's median on both sides and the totals' ratio. A test that is
on one side only (merged, renamed, new) counts in its side's total.

Each side's code is its tree's: pytest runs in the tree with PYTHONPATH set to it, which the subprocesses the
tests start (raytrain commands, their Ray workers) inherit. Tests that reach SSH hosts with a clean environment (the
lab modules) would run this tree's code there on both sides: leave them out.

Usage:
    python scripts/bench_tests.py --against HEAD~1 [--repeats 1] tests/integration/test_tune.py::test_x ...
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from against import alternating, worktree  # noqa: E402  (scripts/against.py, beside this one)


def run_once(tree: Path, tests: list[str], xml: Path) -> dict[str, float]:
    """The selected tests with the code in `tree`: {test id: seconds}. Fails when a test does not pass."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly",
                           f"--junitxml={xml}", *tests], cwd=tree, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{tree}: pytest exit {done.returncode}\n{done.stdout[-3000:]}")
    seconds = {}
    for case in ET.parse(xml).getroot().iter("testcase"):
        seconds[f"{case.get('classname', '').rsplit('.', 1)[-1]}::{case.get('name')}"] = float(case.get("time", 0))
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--against", default="HEAD~1", help="the commit to compare with (default HEAD~1)")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("tests", nargs="+", help="pytest selections (paths, node ids), the same on both sides")
    args = parser.parse_args()

    runs: dict[str, list[dict[str, float]]] = {"this": [], "against": []}
    with worktree(args.against, "bench_tests_") as (here, rev, other, scratch):
        for repeat, side, tree in alternating(args.repeats, other):
            got = run_once(tree, args.tests, scratch / f"{side}_{repeat}.xml")
            runs[side].append(got)
            print(f"repeat {repeat} {side:8} {len(got)} tests {sum(got.values()):.1f} s", flush=True)

    names = sorted({name for side in runs.values() for got in side for name in got})
    medians = {side: {name: statistics.median([got[name] for got in found if name in got])
                      for name in names if any(name in got for got in found)} for side, found in runs.items()}
    print()
    print(f"| test (median of {args.repeats}, s) | this ({here}) | against ({rev}) |")
    print("|---|---|---|")
    for name in names:
        a, b = medians["this"].get(name), medians["against"].get(name)
        print(f"| {name} | {'-' if a is None else f'{a:.1f}'} | {'-' if b is None else f'{b:.1f}'} |")
    total_this, total_rev = sum(medians["this"].values()), sum(medians["against"].values())
    print(f"| **all** ({len(medians['this'])} / {len(medians['against'])} tests) | {total_this:.1f} | {total_rev:.1f} |")
    print(f"\nratio this / against: {total_this / total_rev:.2f}")


if __name__ == "__main__":
    main()

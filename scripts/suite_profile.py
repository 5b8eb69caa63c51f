"""Where the test suite's time goes: a JUnit XML of a `make test` first pass, summed by module and by test.

Prints the seconds per module (setup, call and teardown, as pytest's JUnit XML counts them), the lab modules
(`LAB_MODULES`, one worker runs them one after another) against the rest, the sum over the workers beside the wall
time (two workers are balanced when the sum is about twice the wall time), and the slowest tests.

Usage:
    python -m pytest -n 2 --dist loadscope -m "not alone" tests --junitxml=/tmp/suite.xml
    python scripts/suite_profile.py /tmp/suite.xml [--top 25]
"""

from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ET
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.conftest import LAB_MODULES  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("junit_xml", type=Path)
    parser.add_argument("--top", type=int, default=25, help="how many of the slowest tests to list")
    args = parser.parse_args()

    root = ET.parse(args.junit_xml).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    wall = sum(float(s.get("time", 0)) for s in suites)
    cases = [(c.get("classname", ""), c.get("name", ""), float(c.get("time", 0))) for c in root.iter("testcase")]
    seconds: defaultdict[str, float] = defaultdict(float)
    counts: Counter[str] = Counter()
    for module, _, took in cases:
        seconds[module] += took
        counts[module] += 1
    total = sum(seconds.values())
    labs = sum(took for module, took in seconds.items() if module.replace(".", "/") + ".py" in LAB_MODULES)

    print(f"{len(cases)} tests; wall {wall:.0f} s; the tests' own times add up to {total:.0f} s "
          f"({total / wall if wall else 0:.2f}x the wall time)")
    print(f"lab modules (one worker, one after another): {labs:.0f} s; the rest: {total - labs:.0f} s")
    print("\nseconds  tests  module")
    for module, took in sorted(seconds.items(), key=lambda item: -item[1]):
        print(f"{took:7.1f}  {counts[module]:5d}  {module}")
    print(f"\nthe {args.top} slowest tests (seconds)")
    for module, name, took in sorted(cases, key=lambda case: -case[2])[:args.top]:
        print(f"{took:7.1f}  {module.rsplit('.', 1)[-1]}::{name}")


if __name__ == "__main__":
    main()

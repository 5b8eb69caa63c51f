"""What `raytrain train` does after its last iteration: this tree against another commit, side by side.

A user waits for the command to return, not for the stop criterion: after it come the final checkpoint, the
Algorithm's stop and Ray's shutdown (issue 16's "work after the stop criterion"). Each repeat runs
`raytrain train configs/ppo_cartpole.yaml --set stop.training_iteration=N` once with this tree's code and once with
REV's (a `git worktree`), alternating which goes first, each its own process and local Ray, and prints per run the
seconds from the line that says the stop criterion was reached to the process's end, the command's wall time and
its env steps per second (iterations 2 to N, from the run folder's metrics.jsonl: `--iterations 20` makes it a
throughput comparison of the two trees); then the medians and their ratios (this / REV).

Usage: python scripts/bench_exit.py [--against REV] [--repeats 10] [--iterations 3]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

from against import alternating, print_medians, worktree  # noqa: E402  (scripts/against.py, beside this one)


def run_once(tree: Path, storage: Path, iterations: int) -> tuple[float, float, float]:
    """One `raytrain train` with the code in `tree`: (s from the stop line to the exit, the command's wall time,
    env steps per second after iteration 1)."""
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "PYTHONPATH")}
    command = [sys.executable, "-m", "raytrain", "train", str(ROOT / "configs" / "ppo_cartpole.yaml"),
               "--set", f"stop.training_iteration={iterations}", "--set", f"experiment.storage_path={storage}"]
    t0 = time.perf_counter()
    proc = subprocess.Popen(command, cwd=tree, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    stopped, lines = None, []
    for line in proc.stdout:
        lines.append(line)
        if line.startswith("stop criterion"):
            stopped = time.perf_counter()
    code = proc.wait()
    end = time.perf_counter()
    if code != 0 or stopped is None:
        sys.exit(f"{tree}: raytrain train failed ({code}) or never said its stop:\n{''.join(lines)[-3000:]}")
    rows = [json.loads(line) for line in next(storage.glob("*/*/metrics.jsonl")).read_text().splitlines()]
    first, last = rows[0], rows[-1]
    steps = last["num_env_steps_sampled_lifetime"] - first["num_env_steps_sampled_lifetime"]
    return end - stopped, end - t0, steps / (last["time_total_s"] - first["time_total_s"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--against", default="HEAD~1", help="the commit to compare with (default HEAD~1)")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--iterations", type=int, default=3, help="iterations a run (its stop criterion)")
    args = parser.parse_args()

    figures: dict[str, list[tuple[float, float, float]]] = {"this": [], "against": []}
    with worktree(args.against, "bench_exit_") as (here, rev, other, scratch):
        for repeat, side, tree in alternating(args.repeats, other):
            with tempfile.TemporaryDirectory(dir=scratch) as storage:
                after, wall, rate = run_once(tree, Path(storage), args.iterations)
            figures[side].append((after, wall, rate))
            print(f"repeat {repeat} {side:8} stop line to exit {after:5.2f} s; command {wall:5.2f} s; "
                  f"{rate:6,.0f} env steps/s", flush=True)

    labels = ("s from the stop line to the exit", f"s until the command exits ({args.iterations} iterations)",
              "env steps/s, iteration 1 excluded")
    print_medians(args.repeats, here, rev, [(label, [f[i] for f in figures["this"]], [f[i] for f in figures["against"]])
                                            for i, label in enumerate(labels)], value=",.2f", ratio=".3f")

if __name__ == "__main__":
    main()

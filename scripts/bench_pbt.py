#!/usr/bin/env python
"""Benchmark `raytrain tune configs/ppo_pbt.yaml` as a user runs it: this tree against another commit, side by side.

Each repeat runs the shipped PBT sweep once with this tree's code and once with REV's (a `git worktree` made
for the run and removed after), alternating which goes first, each as its own process with its own local Ray,
the same Python and packages, and its own empty storage folder. Per run it prints:

  - solve: wall seconds from the process start until the first result, of any trial, whose
    `raytrain/episode_return_mean_100` reaches 450 (read from each trial's result.json, whose `timestamp` is
    whole seconds: about 1 s of resolution on runs of one to two minutes);
  - end: wall seconds from the process start until the command exits (leaderboard and plots written);
  - best: the final leaderboard's top `metric_last` (leaderboard.json); the trials stop at their first
    iteration >= 450, so this is where that iteration landed; also how many trials reached 450, and the mean
    return of 20 greedy episodes (env seeds 0-19) of the best trial's checkpoint: the
    leaderboard must be no worse;
  - actors: the trial actor processes seen (distinct `pid` in the results) and the exploits (pbt_policy lines).

The ratios (this / REV) of the medians are the figures to compare: the machines are shared and noisy.

    python scripts/bench_pbt.py [--against REV] [--repeats 3] [--set KEY=VALUE ...] [--set-this KEY=VALUE ...]

`--set` goes to both sides; `--set-this` to this tree's runs alone: a variant of the shipped sweep (fewer trials at
once, say) measured against REV's sweep as shipped.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

from against import alternating, worktree  # noqa: E402  (scripts/against.py, beside this one)

SWEEP = "configs/ppo_pbt.yaml"
METRIC = ("raytrain", "episode_return_mean_100")
THRESHOLD = 450.0


# The greedy return of a Tune trial's checkpoint, without Ray: its RLModule and plain gymnasium episodes
# (`raytrain eval` reads raytrain train checkpoints only).
GREEDY = r"""
import sys, json, torch, gymnasium as gym
from pathlib import Path
from ray.rllib.core.rl_module.rl_module import RLModule
checkpoint, episodes = Path(sys.argv[1]), int(sys.argv[2])
module = RLModule.from_checkpoint(checkpoint / "learner_group" / "learner" / "rl_module" / "default_policy")
env = gym.make("CartPole-v1")
total = 0.0
for seed in range(episodes):
    obs, _ = env.reset(seed=seed)
    done = False
    while not done:
        with torch.no_grad():
            out = module.forward_inference({"obs": torch.as_tensor(obs, dtype=torch.float32)[None]})
        obs, reward, terminated, truncated, _ = env.step(int(out["action_dist_inputs"][0].argmax()))
        total += reward
        done = terminated or truncated
print(json.dumps(total / episodes))
"""


def run_once(tree: Path, storage: Path, extra: list[str]) -> dict[str, float | int | None]:
    """One sweep with the code in `tree`; its figures."""
    command = [sys.executable, "-m", "raytrain", "tune", SWEEP, "--set", f"checkpoint.storage_path={storage}"]
    for item in extra:
        command += ["--set", item]
    start = time.time()
    done = subprocess.run(command, cwd=tree, capture_output=True, text=True)
    end = time.time() - start
    if done.returncode != 0:
        raise SystemExit(f"{tree}: exit {done.returncode}\n{done.stderr[-3000:]}")
    (exp,) = [p for p in storage.iterdir() if p.is_dir()]
    solved, pids = None, set()
    for result_json in exp.glob("*/result.json"):
        for line in result_json.read_text().splitlines():
            if not line.strip():
                continue
            row = json.loads(line)
            pids.add(row.get("pid"))
            value = row.get(METRIC[0], {}).get(METRIC[1])
            if value is not None and value == value and value >= THRESHOLD:
                at = row["timestamp"] - start
                solved = at if solved is None else min(solved, at)
    # The leaderboard's rows, best first: each trial's last and best value of the sweep's metric.
    board = json.loads((exp / "leaderboard.json").read_text())
    best = board[0]["metric_last"] if board else None
    solved_trials = sum((row["metric_best"] or 0) >= THRESHOLD for row in board)
    # The stop criterion ends each trial at its first iteration >= 450, so `best` is where that iteration
    # landed; the policy's quality is what the best trial's checkpoint does in fresh greedy episodes.
    evaluated = None
    if board and board[0].get("checkpoint"):
        shown = subprocess.run([sys.executable, "-c", GREEDY, board[0]["checkpoint"], "20"], capture_output=True, text=True)
        if shown.returncode == 0:
            evaluated = json.loads(shown.stdout.strip().splitlines()[-1])
    exploits = sum(len(p.read_text().splitlines()) for p in exp.glob("pbt_policy_*.txt"))
    return {"solve": solved, "end": end, "best": best, "solved_trials": solved_trials, "eval": evaluated,
            "actors": len(pids), "exploits": exploits}


def _fmt(value: float | None) -> str:
    """A median as the table shows it: whole counts as integers, the rest to two decimals."""
    if value is None:
        return "-"
    return f"{value:g}" if float(value).is_integer() else f"{value:.2f}"


def median(values: list[float | int | None]) -> float | None:
    known = [float(v) for v in values if v is not None]
    return statistics.median(known) if known else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--against", default="HEAD~1", help="the commit to compare with (default HEAD~1)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--set", dest="extra", action="append", default=[], help="another --set for both sides")
    parser.add_argument("--set-this", dest="this", action="append", default=[],
                        help="another --set for this tree's runs alone (a variant of the sweep against REV's)")
    args = parser.parse_args()

    figures: dict[str, list[dict]] = {"this": [], "against": []}
    with worktree(args.against, "bench_pbt_") as (here, rev, other, scratch):
        for repeat, side, tree in alternating(args.repeats, other):
            storage = scratch / f"{side}_{repeat}"
            storage.mkdir()
            got = run_once(tree, storage, args.extra + (args.this if side == "this" else []))
            figures[side].append(got)
            print(f"repeat {repeat} {side:8} solve {got['solve'] if got['solve'] is None else round(got['solve'])} s"
                  f"  end {got['end']:.0f} s  best {got['best']}  trials >= 450: {got['solved_trials']}"
                  f"  eval {got['eval']}  actors {got['actors']}  exploits {got['exploits']}",
                  flush=True)
            shutil.rmtree(storage, ignore_errors=True)

    print()
    if args.this:
        print("this side with: " + " ".join(f"--set {item}" for item in args.this))
    print(f"| figure (median of {args.repeats}) | this ({here}) | against ({rev}) | ratio |")
    print("|---|---|---|---|")
    for key, label in (("solve", "s until a trial's 100-episode mean >= 450"), ("end", "s until the command exits"),
                       ("best", "final leaderboard best (metric_last at the trial's stop)"),
                       ("solved_trials", "trials that reached 450"),
                       ("eval", "best checkpoint, mean return of 20 greedy episodes (seeds 0-19)"),
                       ("actors", "trial actor processes"),
                       ("exploits", "PBT exploits")):
        a = median([f[key] for f in figures["this"]])
        b = median([f[key] for f in figures["against"]])
        ratio = f"{a / b:.2f}" if a is not None and b else "-"
        print(f"| {label} | {_fmt(a)} | {_fmt(b)} | {ratio} |")
    unsolved = {side: sum(f["solve"] is None for f in runs) for side, runs in figures.items()}
    if any(unsolved.values()):
        print(f"# runs that never reached {THRESHOLD:.0f}: {unsolved}")


if __name__ == "__main__":
    main()

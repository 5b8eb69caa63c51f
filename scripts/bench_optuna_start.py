"""An Optuna sweep with `search.max_concurrent_trials` unset: this tree against another commit, side by side.

Ray Tune lets a search algorithm other than its own random/grid generator keep one trial pending at a time, unless
a concurrency limit is set (`_get_max_pending_trials` in ray/tune/execution/tune_controller.py; the environment
variable `TUNE_MAX_PENDING_TRIALS_PG` overrides it): with the limit unset, an Optuna sweep's trials were made one
after another, each once the one before was running. raytrain now gives Tune the limit itself when the sweep
leaves it unset (as many trials as the cluster holds at once); compare with a commit from before that (fb70331).

Each repeat runs the same small sweep (CartPole, 4 trials of 0.5 CPU on a local Ray of all this machine's CPUs,
`stop` iterations) once with this tree's code and once with REV's (a `git worktree`), alternating which goes
first, and prints per run: the seconds from the first trial's first iteration to the last one's (from each trial's
first row in result.json: its timestamp, in whole seconds, less that iteration's time) and the command's wall
time; then the medians and their ratios (this / REV).

Usage: python scripts/bench_optuna_start.py [--against REV] [--repeats 3] [--trials 4] [--stop 20]
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


def sweep_files(folder: Path, trials: int, stop: int) -> Path:
    (folder / "base.yaml").write_text(
        "experiment: {name: bench, seed: 1}\nenvironment: {env: CartPole-v1}\n"
        "env_runners: {num_env_runners: 0, num_envs_per_env_runner: 2}\n"
        "training: {train_batch_size: 200, minibatch_size: 100, num_epochs: 1}\nmodel: {fcnet_hiddens: [16]}\n"
        "resources: {num_cpus_for_main_process: 0.5}\nlearners: {num_cpus_per_learner: 0.5}\n"
        f"stop: {{training_iteration: {stop}}}\n"
    )
    sweep = folder / "sweep.yaml"
    sweep.write_text(
        f"name: start\nbase: base.yaml\ncheckpoint: {{storage_path: {folder / 'results'}, frequency: 10}}\n"
        f"search: {{algorithm: optuna, num_samples: {trials}, seed: 0}}\n"
        "space: {training.lr: {distribution: loguniform, low: 0.0001, high: 0.001}}\n"
    )
    return sweep


def _first_iteration_start(result_json: Path) -> float:
    """When the trial's first iteration began: its first result's timestamp (whole seconds) less that iteration."""
    first = json.loads(result_json.read_text().splitlines()[0])
    return float(first["timestamp"] - first["time_this_iter_s"])


def run_once(tree: Path, trials: int, stop: int) -> tuple[float, float]:
    """One sweep with the code in `tree`: (the spread of the trials' first iterations, the command's wall time)."""
    with tempfile.TemporaryDirectory(prefix="bench_optuna_") as tmp:
        folder = Path(tmp)
        sweep = sweep_files(folder, trials, stop)
        env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "PYTHONPATH")}
        t0 = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "raytrain", "tune", str(sweep)], capture_output=True, text=True,
                              cwd=tree, env=env)
        wall = time.perf_counter() - t0
        if done.returncode != 0:
            sys.exit(f"{tree}: raytrain tune failed ({done.returncode}):\n{done.stderr[-3000:]}")
        started = sorted(_first_iteration_start(p) for p in (folder / "results" / "start").glob("*/result.json"))
        if len(started) != trials:
            sys.exit(f"{tree}: {len(started)} of {trials} trials reported")
        return started[-1] - started[0], wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--against", default="HEAD~1", help="the commit to compare with (default HEAD~1)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--trials", type=int, default=4)
    parser.add_argument("--stop", type=int, default=20, help="iterations a trial")
    args = parser.parse_args()

    figures: dict[str, list[tuple[float, float]]] = {"this": [], "against": []}
    with worktree(args.against, "bench_optuna_") as (here, rev, other, _):
        for repeat, side, tree in alternating(args.repeats, other):
            spread, wall = run_once(tree, args.trials, args.stop)
            figures[side].append((spread, wall))
            print(f"repeat {repeat} {side:8} last trial's first iteration {spread:4.0f} s after the first's; "
                  f"command {wall:5.1f} s", flush=True)

    labels = (f"s from the first trial's first iteration to the last's ({args.trials} trials)",
              "s until the command exits")
    print_medians(args.repeats, here, rev, [(label, [f[i] for f in figures["this"]], [f[i] for f in figures["against"]])
                                            for i, label in enumerate(labels)])

if __name__ == "__main__":
    main()

"""Benchmark of `raytrain tune` on the shipped PBT sweep (configs/ppo_pbt.yaml), all figures from one run.

Prints:
  1. env steps/s of all trials of the sweep together, against one `raytrain train` of the base config on the
     same CPUs, and their ratio (goal >= 0.85: Tune's overhead stays small);
  2. per-trial start-up time (trial start to first result, minus that first iteration) with and without
     `reuse_actors`;
  3. wall time from the start of the sweep until any trial's last-100-episode mean return reaches 450.

Usage: python scripts/bench_tune.py [--throughput-iterations 30] [--startup-trials 4] [--skip-solve]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SWEEP = ROOT / "configs" / "ppo_pbt.yaml"
THRESHOLD = 450.0


def make_probe():
    from ray.tune import Callback

    class Probe(Callback):
        """Driver-side clock: when each trial started, each result arrived, and the first solve."""

        def __init__(self, metric: str):
            self.metric = metric
            self.t0 = time.time()
            self.started: dict[str, float] = {}
            self.results: dict[str, list[tuple[float, dict]]] = {}
            self.solved_at: float | None = None

        def on_trial_start(self, iteration, trials, trial, **info):
            self.started.setdefault(trial.trial_id, time.time())

        def on_trial_result(self, iteration, trials, trial, result, **info):
            now = time.time()
            self.results.setdefault(trial.trial_id, []).append((now, result))
            value = result.get("raytrain", {}).get(self.metric.split("/", 1)[1])
            if self.solved_at is None and value is not None and value == value and value >= THRESHOLD:
                self.solved_at = now

    return Probe


def run_sweep(overrides: list[str], storage: Path):
    from raytrain.config.sweep_load import load_sweep
    from raytrain.tune.build import build, plan

    loaded = load_sweep(SWEEP, [f"checkpoint.storage_path={storage}", *overrides])
    probe = make_probe()(loaded.metric)
    build(plan(loaded), callbacks=[probe]).fit()
    return probe


def sweep_throughput(probe) -> tuple[float, int]:
    """Env steps/s of all trials together, each trial's first iteration excluded (its warm-up)."""
    steps, start, end = 0, None, None
    for rows in probe.results.values():
        if len(rows) < 2:
            continue
        first_t, _ = rows[0]
        last_t, _ = rows[-1]
        # Each iteration's own sample count: a PBT exploit moves the lifetime counter to the source
        # trial's value, so differences of the lifetime counter would count the copied trial's steps.
        steps += sum(row["env_runners"]["num_env_steps_sampled"] for _, row in rows[1:])
        start = first_t if start is None else min(start, first_t)
        end = last_t if end is None else max(end, last_t)
    return (steps / (end - start) if end and start and end > start else float("nan")), steps


def single_train_throughput(iterations: int, storage: Path) -> float:
    from raytrain.config.sweep_load import load_sweep

    base = load_sweep(SWEEP, [f"checkpoint.storage_path={storage}"]).base.config
    base_file = storage / "single.yaml"
    import yaml

    data = base.to_yaml_dict()
    data["resources"].pop("num_cpus_for_main_process", None)
    data["experiment"]["storage_path"] = str(storage / "single")
    data["stop"] = {"training_iteration": iterations}
    base_file.write_text(yaml.safe_dump(data))
    out = subprocess.run(
        [sys.executable, "-m", "raytrain", "train", str(base_file)], capture_output=True, text=True, check=True
    ).stdout.strip().splitlines()[-1]
    rows = [json.loads(line) for line in (Path(out) / "metrics.jsonl").read_text().splitlines()]
    steps = rows[-1]["num_env_steps_sampled_lifetime"] - rows[0]["num_env_steps_sampled_lifetime"]
    seconds = rows[-1]["time_total_s"] - rows[0]["time_total_s"]
    return steps / seconds


def startup_times(reuse: bool, trials: int, storage: Path) -> float:
    """Seconds per trial that are not training: (sweep wall time - training time) / trials.

    A sweep of `trials` one-iteration trials, one at a time; what is left after subtracting each
    trial's iteration is creating (or reusing) the actor, building the algorithm, and tearing it down.
    """
    t0 = time.perf_counter()
    probe = run_sweep(
        [
            f"name=bench_startup_{'reuse' if reuse else 'fresh'}",
            "search.algorithm=random",
            "pbt=null",
            f"search.num_samples={trials}",
            "search.max_concurrent_trials=1",
            f"reuse_actors={'true' if reuse else 'false'}",
            "stop={training_iteration: 1}",
        ],
        storage,
    )
    wall = time.perf_counter() - t0
    training = sum(rows[0][1]["time_this_iter_s"] for rows in probe.results.values())
    return (wall - training) / trials


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--throughput-iterations", type=int, default=30)
    parser.add_argument("--startup-trials", type=int, default=4)
    parser.add_argument("--skip-solve", action="store_true", help="skip the full sweep (time to 450)")
    parser.add_argument("--skip-throughput", action="store_true", help="skip the throughput comparison")
    args = parser.parse_args()

    import ray
    import torch

    print(f"# {' '.join(sys.argv)}")
    print(f"# ray {ray.__version__}, torch {torch.__version__}, sweep {SWEEP.relative_to(ROOT)}")
    storage = Path(tempfile.mkdtemp(prefix="bench_tune_"))
    try:
        t_ray = time.perf_counter()
        ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
        print(f"# ray.init: {time.perf_counter() - t_ray:.1f} s")

        if not args.skip_throughput:
            single = single_train_throughput(args.throughput_iterations, storage)
            probe = run_sweep(
                ["name=bench_throughput", f"stop={{training_iteration: {args.throughput_iterations}}}"], storage
            )
            together, steps = sweep_throughput(probe)

        fresh = startup_times(False, args.startup_trials, storage)
        reused = startup_times(True, args.startup_trials, storage)

        solve = None
        if not args.skip_solve:
            t0 = time.time()
            probe = run_sweep(["name=bench_solve"], storage)
            solve = (probe.solved_at - t0) if probe.solved_at else None

        print()
        print("| figure | value |")
        print("|---|---|")
        if not args.skip_throughput:
            print(f"| single `raytrain train`, env steps/s ({args.throughput_iterations} iterations, first excluded) | {single:,.0f} |")
            print(f"| PBT sweep, 4 trials together, env steps/s ({int(steps):,} steps) | {together:,.0f} |")
            print(f"| ratio sweep / single (goal >= 0.85) | {together / single:.2f} |")
        print(f"| per-trial start-up and teardown, fresh actors ({args.startup_trials} one-iteration trials in a row) | {fresh:.2f} s |")
        print(f"| per-trial start-up and teardown, reuse_actors ({args.startup_trials} one-iteration trials in a row) | {reused:.2f} s |")
        if not args.skip_solve:
            print(f"| wall time from sweep start until a trial's 100-episode mean >= 450 | {'not reached' if solve is None else f'{solve:.0f} s'} |")
    finally:
        ray.shutdown()
        shutil.rmtree(storage, ignore_errors=True)


if __name__ == "__main__":
    main()

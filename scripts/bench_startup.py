"""What running RLlib's config checks beside the local Ray's start would buy `raytrain train` (issue 16, goal 1).

`raytrain train` checks the config with RLlib (importing RLlib and torch, building the config, making the env to
check its network) before it starts a local Ray, so that every config error exits 2 with nothing started. The
two could overlap: Ray's start in the main thread, RLlib's checks in a thread beside it (a config error would
then stop a Ray that had started). Each repeat runs, alternating which goes first, each in a fresh process:

  - in order: `train_run.prepare` (raytrain's and RLlib's checks), then `connect_for_build` (the local Ray,
    with the build's imports in a thread beside it), as `raytrain train` does;
  - beside: the same checks and imports in a thread while the main thread starts the same local Ray
    (`connect_ray`).

and prints the seconds from the process's launch until both are done (the build can begin), and the two parts,
then the medians and the ratio (beside / in order).

Usage: python scripts/bench_startup.py [--repeats 5] [--config configs/ppo_cartpole.yaml]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def one(mode: str, config: Path, began: float) -> dict[str, float]:
    """In this fresh process: the checks and Ray's start, `mode` "order" or "beside"; seconds since `began` (the
    `time.time()` of the parent just before it started this process)."""
    from concurrent.futures import ThreadPoolExecutor

    from raytrain import train_run
    from raytrain.ray_session import connect_ray
    from raytrain.training import connect_for_build, preload_for_build

    imported = time.time()
    if mode == "order":
        train_run.prepare(config, [])
        checked = time.time()
        connect_for_build(None)
        ray_up = done = time.time()
    else:
        def checks() -> float:
            train_run.prepare(config, [])
            preload_for_build()
            return time.time()

        with ThreadPoolExecutor(max_workers=1) as pool:
            pending = pool.submit(checks)
            connect_ray(None)
            ray_up = time.time()
            checked = pending.result()
        done = time.time()
    return {"raytrain imported": imported - began, "checks done": checked - began, "Ray up": ray_up - began,
            "ready to build": done - began}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--config", type=Path, default=ROOT / "configs" / "ppo_cartpole.yaml")
    parser.add_argument("--one", choices=("order", "beside"), help=argparse.SUPPRESS)
    parser.add_argument("--began", type=float, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(args.one, args.config.resolve(), args.began)))
        return

    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS",)}
    figures: dict[str, list[dict[str, float]]] = {"order": [], "beside": []}
    for repeat in range(1, args.repeats + 1):
        for mode in (("order", "beside") if repeat % 2 else ("beside", "order")):
            began = time.time()
            done = subprocess.run([sys.executable, __file__, "--one", mode, "--config", str(args.config),
                                   "--began", repr(began)], cwd=ROOT,
                                  env=env, capture_output=True, text=True, timeout=300)
            if done.returncode != 0:
                sys.exit(f"{mode} failed ({done.returncode}):\n{done.stderr[-3000:]}")
            figure = json.loads(done.stdout.splitlines()[-1])
            figures[mode].append(figure)
            print(f"repeat {repeat} {mode:6} " + "; ".join(f"{k} {v:5.2f} s" for k, v in figure.items()), flush=True)
    print(f"\nmedians of {args.repeats} runs each (s since the process was launched)")
    for key in figures["order"][0]:
        order = statistics.median(f[key] for f in figures["order"])
        beside = statistics.median(f[key] for f in figures["beside"])
        print(f"  {key:18} in order {order:6.2f}   beside {beside:6.2f}   beside / in order {beside / order:.3f}")


if __name__ == "__main__":
    main()

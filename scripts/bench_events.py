"""Benchmark of raytrain.framework's events between nodes, on a local 2-CPU Ray; all figures from one run.

Prints one table:
  1. event latency node to node (emit to handler, one way, same machine clock), p50 and p99, beside a bare
     Ray actor method round trip measured in the same run (goal: p50 within 2x the actor round trip);
  2. sustained events/s between two nodes with small payloads, and how many of a burst of 100,000 arrived
     (goal: >= 20,000/s, none lost);
  3. a 10 MB state_dict broadcast to 4 nodes against the floor: one `ray.put` plus 4 `ray.get` in 4 actors
     (goal: within 1.5x the floor);
  4. how long `task.stop()` takes to wake a `wait_for` blocked in another thread (in process, no Ray),
     p50 and max over --wake-samples stops (goal: max under 1 s; a unit test checks only that it wakes);
  5. with --example: the distributed PPO example (examples/cartpole_ppo.py), wall time to evaluation
     return 475 with 2 collectors vs 1 (alternating, --example-seeds seeds each).

Usage: python scripts/bench_events.py [--latency-samples 2000] [--burst 100000] [--repeats 5] [--wake-samples 200]
                                      [--example [--example-seeds 3]]
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


# -- mains run by the nodes (this file travels to them by value) -------------------------------------
def latency_main(samples: int) -> list[float] | None:
    """Node 0 emits `samples` timestamped events one at a time; node 1's handler records the delay."""
    import threading

    from raytrain.framework import task

    with task.start():
        if task.router.node_id == 1:
            delays: list[float] = []
            done = threading.Event()

            def on_ping(sent: float, last: bool = False) -> None:
                delays.append(time.perf_counter() - sent)  # CLOCK_MONOTONIC: shared by processes of one machine
                if last:
                    done.set()

            task.on("ping", on_ping)
            task.emit("ready", only_remote=True)
            done.wait(300)
            return delays
        task.wait_for("ready", timeout=120)
        for i in range(samples):
            task.emit("ping", time.perf_counter(), last=i == samples - 1, only_remote=True)
            time.sleep(0.002)  # one at a time: latency, not throughput
        task.router.flush()
        return None


def burst_main(n: int) -> dict[str, Any]:
    """Node 0 emits n small events as fast as it can; node 1 counts them and notes the last arrival."""
    import threading

    from raytrain.framework import task

    with task.start():
        if task.router.node_id == 1:
            got: list[int] = []
            done = threading.Event()

            def on_tick(i: int, payload: str = "") -> None:
                got.append(i)
                if len(got) == n:
                    done.set()

            task.on("tick", on_tick)
            task.emit("ready", only_remote=True)
            done.wait(600)
            return {"received": len(got), "in_order": got == list(range(n)), "last": time.perf_counter()}
        task.wait_for("ready", timeout=120)
        first = time.perf_counter()
        for i in range(n):
            task.emit("tick", i, payload="x" * 16, only_remote=True)
        emitted = time.perf_counter()
        task.router.flush(600)
        return {"first": first, "emitted": emitted}


def broadcast_main(repeats: int, mbytes: int) -> list[float]:
    """Node 0 emits a state_dict of `mbytes` MB `repeats` times; every receiver notes when its handler ran."""
    import threading

    import torch

    from raytrain.framework import task

    with task.start():
        me = task.router.node_id
        receivers = len(task.router.node_ids) - 1
        if me != 0:
            arrived: list[float] = []
            done = threading.Event()

            def on_model(state_dict: dict[str, Any], version: int = 0) -> None:
                assert state_dict["w"].numel() * 4 == mbytes * 2**20
                arrived.append(time.perf_counter())
                task.emit("ack", me, version, only_remote=True)
                if len(arrived) == repeats:
                    done.set()

            task.on("model", on_model)
            task.emit("ready", me, only_remote=True)
            done.wait(300)
            return arrived
        ready: set[int] = set()
        task.on("ready", lambda n: ready.add(n))
        acks: list[int] = []
        task.on("ack", lambda n, v: acks.append(v))
        while len(ready) < receivers:
            time.sleep(0.01)
        state_dict = {"w": torch.randn(mbytes * 2**20 // 4)}
        starts = []
        for version in range(repeats):
            starts.append(time.perf_counter())
            task.emit("model", state_dict, version=version, only_remote=True)
            while acks.count(version) < receivers:
                time.sleep(0.0005)
        return starts


def stop_wake_delays(samples: int) -> list[float]:
    """Seconds from `task.stop()` to a `wait_for` blocked in another thread raising, once per sample."""
    import math
    import threading

    from raytrain.framework import Task

    delays = []
    for _ in range(samples):
        task = Task().start()
        woken: list[float] = []

        def waiter(task: Task = task, woken: list[float] = woken) -> None:
            try:
                task.wait_for("never", timeout=math.inf)
            except Exception:  # noqa: BLE001 - the stop is what ends it
                woken.append(time.perf_counter())

        thread = threading.Thread(target=waiter, daemon=True)
        thread.start()
        deadline = time.monotonic() + 10
        while not task._bus.has_handlers("never") and time.monotonic() < deadline:  # wait_for is waiting
            time.sleep(0.0005)
        stopped = time.perf_counter()
        task.stop()
        thread.join(10)
        if not woken:
            raise SystemExit("task.stop() did not wake a blocked wait_for within 10 s")
        delays.append(woken[0] - stopped)
    return delays


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--latency-samples", type=int, default=2000)
    parser.add_argument("--burst", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--wake-samples", type=int, default=200)
    parser.add_argument("--example", action="store_true", help="also time examples/cartpole_ppo.py (minutes)")
    parser.add_argument("--example-seeds", type=int, default=3)
    args = parser.parse_args()

    import ray
    import torch

    from raytrain.framework import Parallel

    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=True)
    rows: list[tuple[str, str, str]] = []

    # 1. latency, beside a bare actor round trip
    @ray.remote(num_cpus=0)
    class Echo:
        def ping(self, x: Any = None) -> Any:
            return x

    echo = Echo.remote()
    ray.get(echo.ping.remote())
    rtt = []
    for _ in range(args.latency_samples):
        t = time.perf_counter()
        ray.get(echo.ping.remote())
        rtt.append(time.perf_counter() - t)
        time.sleep(0.002)
    ray.kill(echo)
    delays = Parallel.runner(2)(latency_main, args.latency_samples)[1][100:]  # the first 100 warm up
    p50, p99, rtt50 = pct(delays, 0.5) * 1e3, pct(delays, 0.99) * 1e3, pct(rtt, 0.5) * 1e3
    rows.append(("actor method round trip (bare Ray)", f"p50 {rtt50:.3f} ms, p99 {pct(rtt, 0.99) * 1e3:.3f} ms", "anchor"))
    rows.append(("event latency node to node (emit to handler)", f"p50 {p50:.3f} ms, p99 {p99:.3f} ms",
                 f"p50 = {p50 / rtt50:.2f}x round trip (goal <= 2)"))

    # 2. sustained rate and loss in a burst
    sender, receiver = Parallel.runner(2)(burst_main, args.burst)
    rate = args.burst / (receiver["last"] - sender["first"])
    emit_rate = args.burst / (sender["emitted"] - sender["first"])
    rows.append((f"burst of {args.burst:,} small events, 2 nodes", f"{rate:,.0f} events/s delivered ({emit_rate:,.0f}/s emitted)",
                 f"goal >= 20,000/s: {'yes' if rate >= 20_000 else 'NO'}"))
    rows.append(("  of which arrived", f"{receiver['received']:,} of {args.burst:,}, in order: {receiver['in_order']}",
                 "goal: none lost"))

    # 3. a 10 MB state_dict to 4 nodes, against ray.put + 4 ray.get
    @ray.remote(num_cpus=0)
    class Getter:
        def get(self, refs: list[Any]) -> float:
            value = ray.get(refs[0])
            assert value["w"].numel() > 0
            return time.perf_counter()

    getters = [Getter.remote() for _ in range(4)]
    ray.get([g.get.remote([ray.put({"w": torch.zeros(1)})]) for g in getters])
    state_dict = {"w": torch.randn(10 * 2**20 // 4)}
    floor = []
    for _ in range(args.repeats):
        t = time.perf_counter()
        ref = ray.put(state_dict)
        floor.append(max(ray.get([g.get.remote([ref]) for g in getters])) - t)
        del ref
    for g in getters:
        ray.kill(g)
    results = Parallel.runner(5)(broadcast_main, args.repeats, 10)
    starts = results[0]
    ours = [max(r[i] for r in results[1:]) - starts[i] for i in range(args.repeats)]
    f50, o50 = statistics.median(floor) * 1e3, statistics.median(ours) * 1e3
    rows.append(("10 MB state_dict: ray.put + 4 ray.get (floor)", f"median {f50:.1f} ms ({', '.join(f'{x * 1e3:.0f}' for x in floor)})", "anchor"))
    rows.append(("10 MB state_dict: task.emit to 4 nodes", f"median {o50:.1f} ms ({', '.join(f'{x * 1e3:.0f}' for x in ours)})",
                 f"{o50 / f50:.2f}x floor (goal <= 1.5)"))
    ray.shutdown()

    # 4. stop() waking a blocked wait_for (in process)
    wakes = stop_wake_delays(args.wake_samples)
    w50, wmax = pct(wakes, 0.5) * 1e3, max(wakes) * 1e3
    rows.append((f"task.stop() wakes a blocked wait_for ({args.wake_samples} stops)", f"p50 {w50:.3f} ms, max {wmax:.3f} ms",
                 f"goal: max < 1000 ms: {'yes' if wmax < 1000 else 'NO'}"))

    # 5. the distributed example, 2 collectors vs 1, alternating, a few seeds
    if args.example:
        times: dict[int, list[tuple[float, float]]] = {2: [], 1: []}
        for seed in range(args.example_seeds):
            for collectors in (2, 1):
                proc = subprocess.run(
                    [sys.executable, str(ROOT / "examples" / "cartpole_ppo.py"), str(2 + collectors), "--seed", str(seed)],
                    capture_output=True, text=True, timeout=1800,
                )
                found = re.search(r"([\d.]+) s wall time since the evaluator started, ([\d.]+) s since launch", proc.stdout + proc.stderr)
                if found:
                    times[collectors].append((float(found.group(1)), float(found.group(2))))
                else:
                    print(f"seed {seed}, {collectors} collector(s): not solved (rc {proc.returncode})", file=sys.stderr)
        for collectors in (2, 1):
            ts = times[collectors]
            if ts:
                rows.append((
                    f"examples/cartpole_ppo.py to eval return 475, {collectors} collector{'s' if collectors > 1 else ''}",
                    f"median {statistics.median(t for t, _ in ts):.1f} s from evaluator start "
                    f"({', '.join(f'{t:.1f}' for t, _ in ts)}); {statistics.median(x for _, x in ts):.1f} s from launch",
                    f"{len(ts)} of {args.example_seeds} seeds solved",
                ))

    width = max(len(r[0]) for r in rows)
    print(f"\nraytrain.framework events on a local Ray (num_cpus=2), {time.strftime('%Y-%m-%d %H:%M')}")
    for name, value, note in rows:
        print(f"  {name:<{width}}  {value:<48}  {note}")


if __name__ == "__main__":
    main()

"""Latency and bandwidth between the head and each node, measured by moving objects through Ray itself.

A lab's notes measure this with iperf; what matters to training is what Ray achieves: an actor call's round
trip (what every event, result and control message costs) and how fast an object in one node's store
reaches another (what checkpoints, model weights and sample batches cost).

Runs as a driver on a node of the cluster: `python -m raytrain.cluster.netcheck [--size-mb N] [--pings N]`
prints JSON rows (`raytrain cluster netcheck` runs it on the head over SSH when this machine is not a node).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any


def measure(size_mb: float = 64.0, pings: int = 50) -> list[dict[str, Any]]:
    """One row per alive node: round trip to the head's probe, and object transfer speed both ways."""
    import numpy as np
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    @ray.remote(num_cpus=0)
    class Probe:
        def ping(self) -> None:
            return None

        def make(self, nbytes: int) -> list[Any]:
            # The object lives in this node's store; only its reference leaves (inside a list).
            return [ray.put(np.ones(nbytes, dtype=np.uint8))]

        def fetch(self, refs: list[Any]) -> float:
            started = time.perf_counter()
            data = ray.get(refs[0])
            spent = time.perf_counter() - started
            assert data.nbytes > 0
            return spent

        def round_trips(self, peer: Any, n: int) -> list[float]:
            ray.get(peer.ping.remote())
            times = []
            for _ in range(n):
                started = time.perf_counter()
                ray.get(peer.ping.remote())
                times.append(time.perf_counter() - started)
            return times

    nodes = [n for n in ray.nodes() if n.get("Alive")]
    head = next((n for n in nodes if "node:__internal_head__" in n.get("Resources", {})), nodes[0])

    actor_class: Any = Probe  # what ray.remote made of it (mypy still sees the plain class)

    def probe_on(node: dict[str, Any]) -> ray.actor.ActorHandle:
        return actor_class.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node["NodeID"], soft=False)).remote()

    head_probe = probe_on(head)
    nbytes = int(size_mb * 2**20)
    rows = []
    for node in sorted(nodes, key=lambda n: (n is not head, n["NodeManagerAddress"])):
        probe = probe_on(node)  # on the head too: an actor must not wait on a call to itself
        rtt = ray.get(probe.round_trips.remote(head_probe, pings))
        to_node = ray.get(probe.fetch.remote(ray.get(head_probe.make.remote(nbytes))))
        to_head = ray.get(head_probe.fetch.remote(ray.get(probe.make.remote(nbytes))))
        rows.append({
            "node": node["NodeManagerAddress"],
            "node_id": node["NodeID"],
            "head": node is head,
            "rtt_p50_ms": statistics.median(rtt) * 1e3,
            "rtt_max_ms": max(rtt) * 1e3,
            "head_to_node_mb_s": size_mb / to_node if to_node > 0 else float("inf"),
            "node_to_head_mb_s": size_mb / to_head if to_head > 0 else float("inf"),
            "size_mb": size_mb,
        })
        ray.kill(probe)
    ray.kill(head_probe)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=float, default=64.0)
    parser.add_argument("--pings", type=int, default=50)
    args = parser.parse_args()
    import ray

    from raytrain.ray_session import init_ray

    init_ray(logging_level="ERROR", log_to_driver=False)
    try:
        print(json.dumps(measure(args.size_mb, args.pings)))
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()

"""Benchmark: `raytrain cluster up` of a head and two workers against the same `ray start` commands by hand.

Both run on the namespaced hosts of tests/integration/hostlab.py (each host its own network, PID and mount
namespace and sshd). The floor: the head's `ray start --head`, then the workers' `ray start --address` over
SSH in parallel, then `ray status` on the head until it lists three active nodes, exactly what a person
would type (raytrain's own wait is not used for the floor). Alternates
the two, --repeats times each, and prints medians and the ratio (goal <= 1.3), plus `down`, plus how long
`cluster check` and `cluster up` take to fail on a worker address nobody answers (ssh ConnectTimeout 3 s; the
integration test checks that they fail by that timeout, this times it: goal < 15 s on 2 busy CPUs).

Usage (root, Linux): python scripts/bench_cluster.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.integration.hostlab import HostLab, can_create_namespaces  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    why = can_create_namespaces()
    if why:
        sys.exit(f"cannot run: {why}")

    from raytrain.cluster import lifecycle, plan
    from raytrain.cluster.runner import SSHRunner
    from raytrain.config.cluster import load_cluster

    print(f"# {' '.join(sys.argv)}")
    root = Path(tempfile.mkdtemp(prefix="bench_cluster_"))
    with HostLab(root) as lab:
        ip = lab.ip
        path = root / "cluster.yaml"
        path.write_text(
            "name: benchlab\n"
            f"head: {{host: {ip['head']}, name: head, port: 6333, num_cpus: 1, object_store_memory: 134217728, dashboard: {{enabled: false}}}}\n"
            "workers:\n"
            f"  - {{host: {ip['w1']}, name: w1, num_cpus: 1, object_store_memory: 134217728}}\n"
            f"  - {{host: {ip['w2']}, name: w2, num_cpus: 1, object_store_memory: 134217728}}\n"
            f"ssh: {{config_file: {lab.ssh_config}}}\npython: {sys.executable}\n"
        )
        cfg = load_cluster(path)
        runner = SSHRunner(cfg.ssh)
        lifecycle.ensure_token(cfg)
        lifecycle._install_token(cfg, runner, cfg.nodes)

        status = f"{plan.env_prefix(cfg)} {plan.ray_bin(cfg)} status --address={cfg.address}"

        def active_nodes() -> int:
            out = runner.run(cfg.head, status, timeout=60).stdout
            active = out.split("Active:", 1)[1].split("Pending:", 1)[0] if "Active:" in out else ""
            return sum(1 for line in active.splitlines() if "node_" in line)

        def by_hand() -> float:
            t0 = time.perf_counter()
            head = runner.run(cfg.head, plan.start_head(cfg))
            assert head.ok, head.describe()
            results = lifecycle.parallel(lambda n: runner.run(n, plan.start_worker(cfg, n)), cfg.workers)
            assert all(r.ok for r in results)
            while active_nodes() < 3:
                time.sleep(0.5)
            return time.perf_counter() - t0

        def with_raytrain() -> float:
            t0 = time.perf_counter()
            p = subprocess.run([sys.executable, "-m", "raytrain", "cluster", "up", str(path)], capture_output=True, text=True)
            assert p.returncode == 0, p.stderr[-2000:]
            return time.perf_counter() - t0

        def down_raytrain() -> float:
            t0 = time.perf_counter()
            p = subprocess.run([sys.executable, "-m", "raytrain", "cluster", "down", str(path), "-y"], capture_output=True, text=True)
            assert p.returncode == 0, p.stderr[-2000:]
            return time.perf_counter() - t0

        def down_by_hand() -> float:
            t0 = time.perf_counter()
            lifecycle.parallel(lambda n: runner.run(n, plan.stop(cfg)), cfg.workers)
            runner.run(cfg.head, plan.stop(cfg))
            return time.perf_counter() - t0

        ghost = root / "ghost.yaml"
        ghost.write_text(
            "name: benchghost\n"
            f"head: {{host: {ip['head']}, name: head, port: 6333, num_cpus: 1, object_store_memory: 134217728, dashboard: {{enabled: false}}}}\n"
            f"workers:\n  - {{host: {lab.net}.99, name: ghost, num_cpus: 1}}\n"
            f"ssh: {{config_file: {lab.ssh_config}, connect_timeout: 3}}\npython: {sys.executable}\n"
        )

        def fails_on_ghost(command: str) -> float:
            t0 = time.perf_counter()
            p = subprocess.run([sys.executable, "-m", "raytrain", "cluster", command, str(ghost)], capture_output=True, text=True)
            assert p.returncode == 1 and "exited 255" in p.stderr, p.stderr[-2000:]
            return time.perf_counter() - t0

        floor, ours, downs, downs_hand, ghost_check, ghost_up = [], [], [], [], [], []
        for _ in range(args.repeats):
            floor.append(by_hand())
            downs_hand.append(down_by_hand())
            ours.append(with_raytrain())
            downs.append(down_raytrain())
            ghost_check.append(fails_on_ghost("check"))
            ghost_up.append(fails_on_ghost("up"))
        m = statistics.median
        print()
        print(f"| figure (median of {args.repeats}) | seconds |")
        print("|---|---|")
        print(f"| `ray start` head, then 2 workers in parallel over ssh, until 3 nodes alive (floor) | {m(floor):.1f} |")
        print(f"| `raytrain cluster up` (preflight, token, head, workers, wait) | {m(ours):.1f} |")
        print(f"| ratio up / floor (goal <= 1.3) | {m(ours) / m(floor):.2f} |")
        print(f"| `ray stop` by hand (workers in parallel, then head) | {m(downs_hand):.1f} |")
        print(f"| `raytrain cluster down -y` | {m(downs):.1f} |")
        print(f"| `raytrain cluster check`, a worker that never answers, fails after (ssh timeout 3 s; goal < 15) | {m(ghost_check):.1f} |")
        print(f"| `raytrain cluster up`, the same worker, fails after (goal < 15) | {m(ghost_up):.1f} |")
        print(f"# runs: floor {[round(x, 1) for x in floor]}, up {[round(x, 1) for x in ours]}")


if __name__ == "__main__":
    main()

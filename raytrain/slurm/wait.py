"""Run inside a batch job: wait until a Ray node is alive on every node of the allocation, or fail naming the
missing ones. `python -m raytrain.slurm.wait --address HEAD:PORT --timeout S -- NODE...`

`--this-ip [--ray-temp-dir]`, on the head node before Ray starts: the address for Ray there, once Ray's temp
folder there is found usable (`ray_temp_dir_problem`).

`--shared MARKER TOKEN`, on each other node before Ray starts: whether the job's folder there is the one the
batch shell wrote MARKER in (holding TOKEN), i.e. on a file system every node shares."""

from __future__ import annotations

import argparse
import sys
import time


def alive_hostnames(address: str) -> set[str]:
    """Hostnames (short form) of the Ray nodes the GCS at `address` reports alive."""
    # Both exist at run time, out of mypy's sight: Ray's _raylet.pyi leaves out GcsClient, and the generated
    # gcs_pb2 defines its messages when imported (protobuf's builder fills globals()).
    from ray._raylet import GcsClient  # type: ignore[attr-defined]
    from ray.core.generated.gcs_pb2 import GcsNodeInfo  # type: ignore[attr-defined]

    info = GcsClient(address=address).get_all_node_info(timeout=10)
    return {n.node_manager_hostname.split(".")[0] for n in info.values() if n.state == GcsNodeInfo.ALIVE}


def missing_nodes(wanted: list[str], alive: set[str]) -> list[str]:
    """The Slurm nodes with no alive Ray node, compared by short hostname."""
    return [n for n in wanted if n.split(".")[0] not in alive]


def shared_problem(marker: str, token: str) -> str | None:
    """None when `marker` holds `token` here; else what this node sees instead."""
    try:
        with open(marker) as f:
            seen = f.read()
    except FileNotFoundError:
        return "is not there"
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    return None if seen == token else "holds another job's token"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m raytrain.slurm.wait")
    parser.add_argument("--this-ip", action="store_true", help="Print this node's address for Ray and exit.")
    parser.add_argument("--ray-temp-dir", action="store_true",
                        help="With --this-ip: exit 1 instead, saying why, when `ray start --head` here could not "
                             "keep its session under this node's temp folder (RAY_TMPDIR, else TMPDIR, else /tmp).")
    parser.add_argument("--shared", nargs=2, metavar=("MARKER", "TOKEN"),
                        help="Exit 1, saying so, unless MARKER holds TOKEN on this node.")
    parser.add_argument("--address")
    parser.add_argument("--timeout", type=float)
    parser.add_argument("nodes", nargs="*")
    args = parser.parse_args(argv)
    if args.this_ip:
        from raytrain.config.cluster import this_machine_ip

        if args.ray_temp_dir:
            import socket

            from raytrain.ray_session import largest_pid, ray_temp_dir_problem

            problem = ray_temp_dir_problem(largest_pid(), set_where=" in the Slurm file's `env:`")
            if problem is not None:
                print(f"raytrain: {socket.gethostname()}: {problem}", file=sys.stderr, flush=True)
                return 1

        print(this_machine_ip())
        return 0
    if args.shared:
        import os
        import socket

        marker, token = args.shared
        problem = shared_problem(marker, token)
        if problem is None:
            return 0
        folder = os.path.dirname(marker)
        print(f"raytrain: {socket.gethostname()}: the job's folder {folder} is not the one the batch script runs in "
              f"(a marker it wrote there {problem}): storage_path must be on a file system every node mounts at the "
              "same path (NFS, Lustre, ...), or each node keeps its own checkpoints, which the others and a resumed "
              "job cannot read", file=sys.stderr, flush=True)
        return 1
    if not (args.address and args.timeout and args.nodes):
        parser.error("give --address, --timeout and the node names")
    started = time.monotonic()
    missing, alive, problem = list(args.nodes), set(), ""
    while time.monotonic() - started < args.timeout:
        try:
            alive = alive_hostnames(args.address)
            problem = ""
        except Exception as exc:  # the GCS not answering yet: keep waiting, say why at the end
            problem = f" (last error: {exc})"
        missing = missing_nodes(args.nodes, alive)
        if not missing:
            print(f"raytrain: Ray is alive on all {len(args.nodes)} nodes after {time.monotonic() - started:.1f} s "
                  f"[t={time.time():.3f}]",
                  file=sys.stderr, flush=True)
            return 0
        time.sleep(0.3)
    print(f"raytrain: no Ray node alive on {', '.join(missing)} after {args.timeout:g} s (alive: "
          f"{', '.join(sorted(alive)) or 'none'}){problem}; see that node's lines above, or raise start_timeout_s",
          file=sys.stderr, flush=True)
    return 1


if __name__ == "__main__":
    sys.exit(main())

"""Checks that the experiment's storage path is one shared directory on every node."""

from __future__ import annotations

from pathlib import Path

from raytrain.cluster.plan import Marker
from raytrain.errors import SweepError


def check_shared_storage(path: str, timeout_s: float = 60.0) -> list[str]:
    """Write a marker from the driver and read it from a task pinned to each alive node.

    Returns the node addresses checked. Raises SweepError naming the nodes that do not see the marker
    (Tune would otherwise fail mid-run, when a trial on such a node syncs its first checkpoint).
    """
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    nodes = [n for n in ray.nodes() if n.get("Alive")]
    marker = Marker(path)
    written = Path(marker.path)
    written.parent.mkdir(parents=True, exist_ok=True)
    written.write_text(marker.token)

    @ray.remote(num_cpus=0)
    def read_marker(p: str) -> str:
        try:
            with open(p) as fh:
                return fh.read()
        except OSError as exc:
            return f"error: {exc.strerror}"

    try:
        refs = {
            n["NodeManagerAddress"]: read_marker.options(
                scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)
            ).remote(marker.path)
            for n in nodes
        }
        bad = []
        for address, ref in refs.items():
            try:
                seen = ray.get(ref, timeout=timeout_s)
            except Exception as exc:  # a node that cannot run the check counts as not seeing it
                seen = f"error: {type(exc).__name__}"
            if not marker.seen_in(seen):
                bad.append(f"{address} ({seen if seen.startswith('error') else 'sees a different directory'})")
    finally:
        written.unlink(missing_ok=True)
    if bad:
        raise SweepError(
            f"checkpoint.storage_path {path} is not the same shared directory on every node; these nodes do "
            f"not see a marker written on the driver: {', '.join(bad)}. Mount the shared (NFS) directory at "
            "the same path on every node."
        )
    return list(refs)


def check_storage_on_cluster(path: str) -> None:
    """check_shared_storage when Ray has more than one alive node (one node trivially shares its disk)."""
    import ray

    if len([n for n in ray.nodes() if n.get("Alive")]) > 1:
        check_shared_storage(path)

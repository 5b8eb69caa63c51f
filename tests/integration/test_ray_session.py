"""The local Ray a raytrain process starts is stopped whole when the process exits."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

STARTS_AND_EXITS = """
import json, ray
from raytrain.ray_session import init_ray
init_ray(None, num_cpus=1, include_dashboard=False, logging_level="ERROR")
node = ray._private.worker._global_node
print(json.dumps({kind: [info.process.pid for info in infos] for kind, infos in node.all_processes.items()}))
"""


def _alive(pid: int) -> bool:
    """Running, not a zombie left for init to reap (/proc/PID/stat's state field)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def test_exit_stops_every_process_of_the_local_ray_the_monitor_first():
    """The autoscaler monitor is killed ahead of Ray's shutdown (which would wait a second for it): nothing of
    the local Ray outlives the process, the monitor included."""
    done = subprocess.run([sys.executable, "-c", STARTS_AND_EXITS], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    pids = json.loads(done.stdout.strip().splitlines()[-1])
    assert pids.get("monitor") and pids.get("raylet") and pids.get("gcs_server"), pids
    left = {kind: [p for p in found if _alive(p)] for kind, found in pids.items()}
    for found in left.values():
        for pid in found:  # don't leave them to the next test
            os.kill(pid, signal.SIGKILL)
    assert not any(left.values()), f"still running after the process exited: {left}"


STARTS_AND_SAYS = """
import json, ray
from raytrain.ray_session import connect_ray
said = connect_ray(None, num_cpus=1)
print(json.dumps({"said": said, "gcs": ray.get_runtime_context().gcs_address}))
"""


def test_no_address_starts_a_local_ray_beside_the_cluster_a_ray_start_recorded(ray_session):
    """`ray start` records its cluster in /tmp/ray/ray_current_cluster, and `ray.init()` with no address joins that
    one: `train` on a machine with a cluster up failed (`_system_config must not be provided`, exit 1). Here the
    record names the test's own Ray."""
    import ray
    from ray._private.utils import get_ray_address_file

    record = Path(get_ray_address_file(None))
    before = record.read_text() if record.is_file() else None
    ours = ray.get_runtime_context().gcs_address
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_text(ours)
    try:
        env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
        done = subprocess.run([sys.executable, "-c", STARTS_AND_SAYS], capture_output=True, text=True, timeout=120,
                              env=env)
    finally:
        if before is None:
            record.unlink(missing_ok=True)
        else:
            record.write_text(before)
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["said"] == "local Ray", got
    assert got["gcs"] != ours, got

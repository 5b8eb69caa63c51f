"""A Ray joined with --address whose CPUs cannot place what the config asks for: exit 2 at the field, with
nothing built or written. A local Ray's CPUs are known before it starts and are checked then (tests/unit); a
joined cluster's are known only once joined.

Mode: the commands run as subprocesses that join the session's Ray (token auth, as `ray.init()` started it) by
its GCS address, as a user's `--address HOST:PORT` does.
"""

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import tiny_base

pytestmark = pytest.mark.integration


def _raytrain(*args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    # Without the checks, Tune would wait forever for a trial that cannot be placed, and Ray would retry an
    # address where nothing answers for minutes: the timeout ends the test.
    return subprocess.run([sys.executable, "-m", "raytrain", *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "RAY_ADDRESS": ""})


def _listing(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def test_train_on_a_joined_cluster_too_small_for_its_env_runners_exits_2(ray_session, tmp_path):
    address = ray_session.get_runtime_context().gcs_address
    path = tmp_path / "big.yaml"
    base = tiny_base(2, 1).replace("experiment: {", f"experiment: {{storage_path: {tmp_path / 'runs'}, ")
    path.write_text(base.replace("num_env_runners: 0", "num_env_runners: 3"))
    before = _listing(tmp_path)
    result = _raytrain("train", str(path), "--address", address)
    assert result.returncode == 2, result.stderr[-3000:]
    assert (f"{path}:3: env_runners.num_env_runners: the config's actors (env runners, learners, evaluation "
            f"runners) reserve 3 CPUs, but the Ray cluster at {address} (1 node, 2 CPUs) has 2: lower "
            "env_runners.num_env_runners (or the CPUs per actor), or add nodes with CPUs to it") in " ".join(result.stderr.split())
    assert "Traceback" not in result.stderr
    assert _listing(tmp_path) == before


def test_tune_on_a_joined_cluster_too_small_for_one_trial_exits_2(ray_session, tmp_path):
    address = ray_session.get_runtime_context().gcs_address
    (tmp_path / "base.yaml").write_text(tiny_base(2, 1))
    path = tmp_path / "sweep.yaml"
    path.write_text(f"base: base.yaml\ncheckpoint: {{storage_path: {tmp_path / 'results'}}}\n"
                    "name: big\nsearch: {algorithm: random, num_samples: 2, seed: 0}\n"
                    "set: {env_runners.num_env_runners: 2}\n")
    before = _listing(tmp_path)
    result = _raytrain("tune", str(path), "--address", address)
    assert result.returncode == 2, result.stderr[-3000:]
    assert (f"{path}:5: env_runners.num_env_runners: each trial's actors (main process and learner, env runners) "
            f"reserve 3 CPUs, but the Ray cluster at {address} (1 node, 2 CPUs) has 2: lower "
            "env_runners.num_env_runners (or the CPUs per actor), or add nodes with CPUs to it") in " ".join(result.stderr.split())
    assert "Traceback" not in result.stderr
    assert _listing(tmp_path) == before


@pytest.mark.parametrize("command", ["train", "tune"])
def test_an_address_where_nothing_answers_fails_in_seconds(tmp_path, command):
    """Ray retries such an address for minutes, printing its own warnings; raytrain names it and exits 1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # free once closed: nobody listens there
    (tmp_path / "base.yaml").write_text(tiny_base(2, 1).replace("experiment: {", f"experiment: {{storage_path: {tmp_path / 'runs'}, "))
    (tmp_path / "sweep.yaml").write_text(f"base: base.yaml\ncheckpoint: {{storage_path: {tmp_path / 'results'}}}\nname: far\n")
    before = _listing(tmp_path)
    result = _raytrain(command, str(tmp_path / ("base.yaml" if command == "train" else "sweep.yaml")),
                       "--address", f"127.0.0.1:{port}", timeout=60)
    assert result.returncode == 1, result.stderr[-3000:]
    said = " ".join(result.stderr.split())
    assert f"cannot connect to the Ray cluster at 127.0.0.1:{port}: nothing answers at " in said, said[-3000:]
    assert "Connection refused" in said and f"ray status --address 127.0.0.1:{port}" in said
    assert "Traceback" not in said
    assert _listing(tmp_path) == before

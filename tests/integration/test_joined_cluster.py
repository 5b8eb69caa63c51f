"""`--address`: a Ray joined whose CPUs cannot place what the config asks for is exit 2 at the field, with
nothing built or written (a local Ray's CPUs are known before it starts and are checked then, tests/unit; a
joined cluster's are known only once joined); an address where nothing answers is exit 1 within seconds, and
one that is not HOST:PORT of a host and a port (a typo, a hostile value) exit 2 before anything connects.

Mode: the commands run as subprocesses that join the session's Ray (token auth, as `ray.init()` started it) by
its GCS address, as a user's `--address HOST:PORT` does.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ..ports import refused_port
from .conftest import tiny_base

pytestmark = pytest.mark.integration


def _raytrain(*args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    # Without the checks, Tune would wait forever for a trial that cannot be placed, and Ray would retry an
    # address where nothing answers for minutes: the timeout ends the test.
    return subprocess.run([sys.executable, "-m", "raytrain", *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "RAY_ADDRESS": ""})


def _listing(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def _write_configs(tmp_path: Path, runners: int) -> None:
    """base.yaml (a train config with `runners` env runners) and sweep.yaml (a sweep of it, with `runners` in
    its `set:` on line 5), both writing under tmp_path."""
    base = tiny_base(2, 1).replace("experiment: {", f"experiment: {{storage_path: {tmp_path / 'runs'}, ")
    (tmp_path / "base.yaml").write_text(base.replace("num_env_runners: 0", f"num_env_runners: {runners}"))
    (tmp_path / "sweep.yaml").write_text(f"base: base.yaml\ncheckpoint: {{storage_path: {tmp_path / 'results'}}}\n"
                                         "name: far\nsearch: {algorithm: random, num_samples: 2, seed: 0}\n"
                                         f"set: {{env_runners.num_env_runners: {runners}}}\n")


# train: 3 env runners of 1 CPU (its main process reserves nothing); tune: the trial's main process and learner
# (1 CPU) and 2 env runners. Either is 3 CPUs, in a Ray of 2.
@pytest.mark.parametrize(("command", "runners", "at", "what"), [
    ("train", 3, "base.yaml:3", "the config's actors (env runners, learners, evaluation runners)"),
    ("tune", 2, "sweep.yaml:5", "each trial's actors (main process and learner, env runners)"),
])
def test_a_joined_cluster_too_small_for_the_config_exits_2(ray_session, tmp_path, command, runners, at, what):
    address = ray_session.get_runtime_context().gcs_address
    _write_configs(tmp_path, runners)
    before = _listing(tmp_path)
    result = _raytrain(command, str(tmp_path / at.split(":")[0]), "--address", address)
    assert result.returncode == 2, result.stderr[-3000:]
    assert (f"{tmp_path / at}: env_runners.num_env_runners: {what} reserve 3 CPUs, but the Ray cluster at "
            f"{address} (1 node, 2 CPUs) has 2: lower env_runners.num_env_runners (or the CPUs per actor), or add "
            "nodes with CPUs to it") in " ".join(result.stderr.split())
    assert "Traceback" not in result.stderr
    assert _listing(tmp_path) == before


@pytest.mark.parametrize("command", ["train", "tune"])
def test_a_joined_cluster_without_the_gpus_the_config_asks_for_exits_2(ray_session, tmp_path, command):
    """Env runners asking for more GPUs than the joined Ray has: Ray waited forever ("No available node types
    can fulfill resource request {'GPU': ...}"). 64 GPUs per env runner: more than the session's machine has."""
    address = ray_session.get_runtime_context().gcs_address
    gpus = ray_session.cluster_resources().get("GPU", 0.0)
    _write_configs(tmp_path, 1)
    base = tmp_path / "base.yaml"
    base.write_text(base.read_text().replace("num_env_runners: 1", "num_env_runners: 1, num_gpus_per_env_runner: 64"))
    before = _listing(tmp_path)
    result = _raytrain(command, str(tmp_path / f"{'base' if command == 'train' else 'sweep'}.yaml"), "--address", address)
    assert result.returncode == 2, result.stderr[-3000:]
    assert f"{base}:3: env_runners.num_gpus_per_env_runner: " in result.stderr
    assert (f"reserve 64 GPUs, but the Ray cluster at {address} (1 node, 2 CPUs) has {gpus:g}: lower "
            "env_runners.num_gpus_per_env_runner (0 trains on CPUs), or add nodes with GPUs to it") in " ".join(result.stderr.split())
    assert _listing(tmp_path) == before


@pytest.mark.parametrize("command", ["train", "tune"])
def test_a_joined_cluster_without_a_custom_resource_the_config_asks_for_exits_2(ray_session, tmp_path, command):
    """Env runners asking for a custom resource no node of the joined Ray has: Ray waited forever ("No available
    node types can fulfill resource request {'CPU': 1.0, 'lab_sensor': 1.0}"). The joined Ray's own resources
    count: its node's `node:<ip>` is found, and asking for more of it than the node has is refused."""
    address = ray_session.get_runtime_context().gcs_address
    _write_configs(tmp_path, 1)
    base = tmp_path / "base.yaml"
    target = str(tmp_path / f"{'base' if command == 'train' else 'sweep'}.yaml")
    text = base.read_text()
    base.write_text(text.replace("num_env_runners: 1", "num_env_runners: 1, custom_resources_per_env_runner: {lab_sensor: 1}"))
    before = _listing(tmp_path)
    result = _raytrain(command, target, "--address", address)
    assert result.returncode == 2, result.stderr[-3000:]
    assert f"{base}:3: env_runners.custom_resources_per_env_runner.lab_sensor: " in result.stderr
    assert (f"reserve 1 of the resource 'lab_sensor', but the Ray cluster at {address} (1 node, 2 CPUs) has 0: remove "
            "or lower it, or give it to a node (`resources:` of the node in the cluster file, or `ray start "
            "--resources`)") in " ".join(result.stderr.split())
    assert _listing(tmp_path) == before
    node = next(name for name in ray_session.cluster_resources() if name.startswith("node:") and name != "node:__internal_head__")
    base.write_text(text.replace("num_env_runners: 1", f"num_env_runners: 1, custom_resources_per_env_runner: {{'{node}': 2}}"))
    result = _raytrain(command, target, "--address", address)
    assert result.returncode == 2 and f"reserve 2 of the resource '{node}', but the Ray cluster" in result.stderr, \
        result.stderr[-3000:]


def test_a_strict_spread_over_more_bundles_than_the_joined_cluster_has_nodes_exits_2(ray_session, tmp_path):
    """A trial of 2 bundles (main process, 1 env runner) spread one per node over a one-node Ray: Tune waited forever."""
    address = ray_session.get_runtime_context().gcs_address
    _write_configs(tmp_path, 1)
    base = tmp_path / "base.yaml"
    base.write_text(base.read_text().replace("resources: {", "resources: {placement_strategy: STRICT_SPREAD, "))
    before = _listing(tmp_path)
    result = _raytrain("tune", str(tmp_path / "sweep.yaml"), "--address", address)
    assert result.returncode == 2, result.stderr[-3000:]
    assert (f"resources.placement_strategy: STRICT_SPREAD puts each of the 2 bundles of each trial's actors (main "
            f"process and learner, env runners) on a node of its own, but the Ray cluster at {address} (1 node, 2 CPUs) "
            "has 1 node: use SPREAD") in " ".join(result.stderr.split())
    assert _listing(tmp_path) == before


@pytest.mark.parametrize(("command", "mode"), [("train", None), ("tune", None), ("run", None), ("train", "token")])
def test_a_cluster_that_wants_a_token_this_driver_lacks_is_exit_2_saying_how_to_give_it(ray_session, tmp_path, command,
                                                                                        mode):
    """A token-auth cluster joined without its token (`--address` to a `raytrain cluster up` cluster instead of
    `--cluster`): Ray printed `InvalidAuthToken` warnings for 20 s, then raytrain said "cannot connect ... check
    that this machine runs the same Ray and Python versions". The driver here has another HOME, so no
    ~/.ray/auth_token: the session's Ray (token auth, started by `ray.init()`) refuses it. A user's shell has no
    RAY_AUTH_MODE (None); with RAY_AUTH_MODE=token and no token, Ray's native client would abort the process."""
    address = ray_session.get_runtime_context().gcs_address
    _write_configs(tmp_path, 0)
    (tmp_path / "pipeline.py").write_text("def main():\n    pass\n")
    (tmp_path / "home").mkdir()
    target = {"train": ["base.yaml"], "tune": ["sweep.yaml"], "run": ["pipeline.py", "--main", "main", "--workers", "2"]}
    before = _listing(tmp_path)
    result = subprocess.run([sys.executable, "-m", "raytrain", command, str(tmp_path / target[command][0]),
                             *target[command][1:], "--address", address], capture_output=True, text=True, timeout=120,
                            env={**{k: v for k, v in os.environ.items() if k != "RAY_AUTH_MODE"}, "RAY_ADDRESS": "",
                                 "HOME": str(tmp_path / "home"), **({"RAY_AUTH_MODE": mode} if mode else {})})
    assert result.returncode == 2, result.stderr[-3000:]
    said = " ".join(result.stderr.split())
    assert (f"the Ray cluster at {address} requires an auth token that this driver does not have: give --cluster "
            "FILE (the cluster file `raytrain cluster up` started it from)") in said, said[-3000:]
    assert "RAY_AUTH_TOKEN_PATH" in said and "Traceback" not in said and "gcs_client.cc" not in said
    assert _listing(tmp_path) == before


@pytest.mark.parametrize("command", ["train", "tune", "run"])
def test_an_address_where_nothing_answers_fails_in_seconds(tmp_path, command):
    """Ray retries such an address for minutes, printing its own warnings; raytrain names it and exits 1.
    `raytrain run` (the framework, 2 nodes: Ray actors) joins through the same door."""
    _write_configs(tmp_path, 0)
    (tmp_path / "pipeline.py").write_text("def main():\n    pass\n")
    target = {"train": ["base.yaml"], "tune": ["sweep.yaml"], "run": ["pipeline.py", "--main", "main", "--workers", "2"]}
    before = _listing(tmp_path)
    with refused_port() as port:  # nobody listens there
        result = _raytrain(command, str(tmp_path / target[command][0]), *target[command][1:],
                           "--address", f"127.0.0.1:{port}", timeout=60)
    assert result.returncode == 1, result.stderr[-3000:]
    said = " ".join(result.stderr.split())
    assert f"cannot connect to the Ray cluster at 127.0.0.1:{port}: nothing answers at " in said, said[-3000:]
    assert "Connection refused" in said and f"ray status --address 127.0.0.1:{port}" in said
    assert "Traceback" not in said
    assert _listing(tmp_path) == before


@pytest.mark.parametrize(("command", "address", "said"), [
    ("train", "10.0.0.5:70000", "the port '70000' is not a number from 1 to 65535"),
    ("tune", "$(reboot):6379", "the host '$(reboot)' is not an IP address or a hostname"),
    ("run", "a b:6379", "the host 'a b' is not an IP address or a hostname"),
    ("train", "10.0.0.5", "not HOST:PORT"),
    ("train --dry-run", "10.0.0.5:0", "the port '0' is not a number from 1 to 65535"),
])
def test_an_address_that_is_not_one_is_exit_2_as_typed_with_nothing_written(tmp_path, command, address, said):
    """A typo in the address is a bad input (exit 2), told apart from a cluster that is down (exit 1); a dry run
    says so too, as the real run would."""
    _write_configs(tmp_path, 0)
    (tmp_path / "pipeline.py").write_text("def main():\n    pass\n")
    target = {"train": ["base.yaml"], "tune": ["sweep.yaml"], "run": ["pipeline.py", "--main", "main", "--workers", "2"],
              "train --dry-run": ["base.yaml"]}
    before = _listing(tmp_path)
    result = _raytrain(*command.split(), str(tmp_path / target[command][0]), *target[command][1:], "--address", address,
                       timeout=60)
    said_all = " ".join(result.stderr.split())
    assert result.returncode == 2, said_all[-3000:]
    assert f"Ray address {address!r}: {said}. Give the head's HOST:PORT, e.g. 10.0.0.5:6379" in said_all, said_all[-3000:]
    assert "Traceback" not in said_all
    assert _listing(tmp_path) == before


def test_a_malformed_ray_address_in_the_environment_is_named_as_coming_from_there(tmp_path):
    _write_configs(tmp_path, 0)
    before = _listing(tmp_path)
    result = subprocess.run([sys.executable, "-m", "raytrain", "train", str(tmp_path / "base.yaml")],
                            capture_output=True, text=True, timeout=60, env={**os.environ, "RAY_ADDRESS": "head;6379"})
    said = " ".join(result.stderr.split())
    assert result.returncode == 2, said[-3000:]
    assert "Ray address 'head;6379' (from RAY_ADDRESS): not HOST:PORT." in said
    assert _listing(tmp_path) == before

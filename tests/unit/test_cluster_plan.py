"""Cluster files and the exact commands each node gets (golden), without touching any host."""

import pytest
from typer.testing import CliRunner

from raytrain.cli import app
from raytrain.cluster import plan
from raytrain.cluster.lifecycle import up
from raytrain.cluster.runner import DryRunner, SSHRunner
from raytrain.config.cluster import load_cluster
from raytrain.errors import ConfigError

LAB = """
name: lab
head: {host: m10, address: 10.0.0.10, port: 6333, num_cpus: 4, num_gpus: 0}
workers:
  - {host: m8, address: 10.0.0.8, num_cpus: 16, resources: {m8: 1}, labels: {rack: a}}
ssh: {user: lab, identity_file: /home/lab/.ssh/id_ed25519, connect_timeout: 7, host_key_checking: accept-new}
venv: /opt/raytrain
env: {OMP_NUM_THREADS: "1"}
ports: {node_manager_port: 6380, min_worker_port: 10002, max_worker_port: 10100}
storage: {path: /nfsroot/raytrain}
"""

ENV = 'env RAY_AUTH_MODE=token RAY_USAGE_STATS_ENABLED=0 OMP_NUM_THREADS=1 RAY_AUTH_TOKEN_PATH="$HOME/.raytrain/clusters/lab/auth_token"'


@pytest.fixture
def lab(write_yaml):
    return load_cluster(write_yaml(LAB, "cluster.yaml"))


def test_golden_start_commands(lab):
    assert plan.start_head(lab) == (
        f"{ENV} /opt/raytrain/bin/ray start --head --port=6333 --node-ip-address=10.0.0.10 --num-cpus=4 --num-gpus=0 "
        "--node-manager-port=6380 --min-worker-port=10002 --max-worker-port=10100 --disable-usage-stats "
        "--include-dashboard=true --dashboard-host=127.0.0.1 --dashboard-port=8265"
    )
    assert plan.start_worker(lab, lab.workers[0]) == (
        f"{ENV} /opt/raytrain/bin/ray start --address=10.0.0.10:6333 --node-ip-address=10.0.0.8 --num-cpus=16 "
        "--resources='{\"m8\":1.0}' --labels=rack=a --node-manager-port=6380 --min-worker-port=10002 "
        "--max-worker-port=10100 --disable-usage-stats"
    )
    assert plan.stop(lab) == f"{ENV} /opt/raytrain/bin/ray stop"


def test_ssh_keeps_host_key_checking_on(lab):
    shown = SSHRunner(lab.ssh).display(lab.workers[0], "hostname")
    assert shown == (
        "ssh -o BatchMode=yes -o ConnectTimeout=7 -o StrictHostKeyChecking=accept-new "
        "-i /home/lab/.ssh/id_ed25519 -o IdentitiesOnly=yes lab@m8 -- hostname"
    )
    assert "StrictHostKeyChecking=no" not in shown


def test_dry_run_prints_every_command_and_never_the_token(lab):
    runner = DryRunner(lab.ssh)
    report = up(lab, runner)
    text = "\n".join(c for _, c in report.commands)
    assert "ray start --head" in text and "ray start --address=10.0.0.10:6333" in text
    assert "(stdin: secret, not shown)" in text
    nodes = [n for n, _ in report.commands]
    assert set(nodes) == {"m10", "m8"}


def test_up_dry_run_cli(write_yaml, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    result = CliRunner().invoke(app, ["cluster", "up", str(write_yaml(LAB, "c.yaml")), "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "[m8] ssh" in result.output and "ray start --address=10.0.0.10:6333" in result.output
    assert not (tmp_path / ".raytrain").exists()  # no token created by a dry run


def test_open_dashboard_without_auth_is_refused(write_yaml):
    text = "name: x\nhead: {host: localhost, dashboard: {host: 0.0.0.0}}\nauth: {mode: disabled}\n"
    path = write_yaml(text, "open.yaml")
    with pytest.raises(ConfigError) as info:
        load_cluster(path)
    assert "CVE-2023-48022" in str(info.value) and f"{path}:2: head.dashboard.host" in str(info.value)
    assert load_cluster(path, insecure=True).auth.mode == "disabled"


@pytest.mark.parametrize(
    "text,expected",
    [
        ("name: x\nhead: {host: a}\nworkers: [{host: b, num_cpu: 2}]\n", "workers.0.num_cpu: unknown key; did you mean 'num_cpus'?"),
        ("name: x\nhead: {host: a}\nvenv: relative/venv\n", "venv must be an absolute path"),
        ("name: x\nhead: {host: a}\nworkers: [{host: a}]\n", "node names must be unique"),
        ("name: x\nhead: {host: a}\nssh: {host_key_checking: 'no'}\n", "ssh.host_key_checking"),
        ("name: 'bad name'\nhead: {host: a}\n", "name:"),
        ("name: x\nhead: {host: a}\nstorage: {path: nfs}\n", "must be an absolute path"),
    ],
)
def test_cluster_file_errors(write_yaml, text, expected):
    with pytest.raises(ConfigError) as info:
        load_cluster(write_yaml(text, "bad.yaml"))
    assert expected in str(info.value)


def test_firewall_ports_listed(lab):
    ports = dict((what, p) for p, what in plan.firewall_ports(lab))
    assert ports["GCS (head)"] == "6333" and ports["raylet"] == "6380"
    assert ports["worker processes"] == "10002-10100"

"""Cluster files and the exact commands each node gets (golden), without touching any host."""

import json
import re
import shlex
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from raytrain.cli import app
from raytrain.cluster import plan
from raytrain.cluster.lifecycle import up
from raytrain.cluster.runner import DryRunner, Runner, SSHRunner
from raytrain.config.cluster import load_cluster
from raytrain.errors import ConfigError

from ..mounts import needs_unshare

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

ENV = 'env RAY_AUTH_MODE=token RAY_USAGE_STATS_ENABLED=0 OMP_NUM_THREADS=1 RAY_AUTH_TOKEN_PATH="$HOME"/.raytrain/clusters/lab/auth_token'


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
        "'--resources={\"m8\":1.0}' --labels=rack=a --node-manager-port=6380 --min-worker-port=10002 "
        "--max-worker-port=10100 --disable-usage-stats"
    )
    assert plan.stop(lab) == f"/opt/raytrain/bin/python -c {shlex.quote(plan.STOP)} 10.0.0.10:6333 {ENV} /opt/raytrain/bin/ray stop"


def test_ssh_keeps_host_key_checking_on(lab):
    shown = SSHRunner(lab.ssh).display(lab.workers[0], "hostname")
    assert shown == (
        "ssh -o BatchMode=yes -o ConnectTimeout=7 -o StrictHostKeyChecking=accept-new "
        "-i /home/lab/.ssh/id_ed25519 -o IdentitiesOnly=yes -- lab@m8 hostname"
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
    # The preflight's own commands too: ports (the head's, and the pinned raylet port on each node),
    # the storage marker written on the head and read on the worker, and the wait for the nodes.
    by_node = {n: [c for m, c in report.commands if m == n] for n in ("m10", "m8")}
    assert any(c.endswith(" 6333 8265 6380'") for c in by_node["m10"]) and any(c.endswith(" 6380'") for c in by_node["m8"])
    assert any("cat /nfsroot/raytrain/.raytrain_shared_check_" in c for c in by_node["m8"])
    assert "ray.nodes()" in by_node["m10"][-1]


def test_up_dry_run_cli(write_yaml, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    result = CliRunner().invoke(app, ["cluster", "up", str(write_yaml(LAB, "c.yaml")), "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "[m8] ssh" in result.output and "ray start --address=10.0.0.10:6333" in result.output
    assert not (tmp_path / ".raytrain").exists()  # no token created by a dry run
    assert "ports to open between the nodes: 6333 (GCS (head))" in result.output


def test_open_dashboard_without_auth_is_refused(write_yaml):
    text = "name: x\nhead: {host: localhost, dashboard: {host: 0.0.0.0}}\nauth: {mode: disabled}\n"
    path = write_yaml(text, "open.yaml")
    with pytest.raises(ConfigError) as info:
        load_cluster(path, starting=True)
    assert "CVE-2023-48022" in str(info.value) and f"{path}:2: head.dashboard.host" in str(info.value)
    assert load_cluster(path, starting=True, insecure=True).auth.mode == "disabled"
    # Refused when starting it; a cluster started with --insecure can still be inspected and stopped.
    assert load_cluster(path).auth.mode == "disabled"
    refused = CliRunner().invoke(app, ["cluster", "up", str(path), "--dry-run"])
    assert refused.exit_code == 2 and "--insecure" in refused.output
    assert CliRunner().invoke(app, ["cluster", "up", str(path), "--dry-run", "--insecure"]).exit_code == 0
    assert CliRunner().invoke(app, ["cluster", "check", str(path)]).exit_code == 2
    ran = CliRunner().invoke(app, ["cluster", "exec", str(path), "--", "true"])
    assert ran.exit_code == 0, ran.output


@pytest.mark.parametrize(
    "text,expected",
    [
        ("name: x\nhead: {host: a}\nworkers: [{host: b, num_cpu: 2}]\n", "workers.0.num_cpu: unknown key; did you mean 'num_cpus'?"),
        ("name: x\nhead: {host: a}\nvenv: relative/venv\n", "bad.yaml:3: venv: must be an absolute path"),
        ("name: x\nhead: {host: a}\nworkers: [{host: a}]\n", "bad.yaml:3: workers.0.host: a is also the name of the head: "
         "every node needs a name of its own (set `name:` on each)"),
        # At the repeat's own line and key; it was `bad.yaml: node names must be unique; repeated: w1`.
        ("name: x\nhead: {host: a}\nworkers:\n  - {host: b, name: w1}\n  - {host: c, name: w2}\n  - {host: d, name: w1}\n",
         "bad.yaml:6: workers.2.name: w1 is also the name of workers.0: every node needs a name of its own"),
        ("name: x\nhead: {host: a}\nssh: {host_key_checking: 'no'}\n", "ssh.host_key_checking"),
        ("name: 'bad name'\nhead: {host: a}\n", "name:"),
        ("name: x\nhead: {host: a}\nstorage: {path: nfs}\n", "must be an absolute path"),
        # `ray start` refuses an object store under its minimum: found at `cluster up`, after other nodes started.
        ("name: x\nhead: {host: a, object_store_memory: 1000000}\n", "bad.yaml:2: head.object_store_memory: must be "
         "at least 78643200 bytes (75 MiB), Ray's minimum (got 1000000)"),
        ("name: x\nhead: {host: a}\nworkers: [{host: b, object_store_memory: 78643199}]\n",
         "workers.0.object_store_memory: must be at least 78643200 bytes"),
        # `ray start` takes whole CPUs and GPUs (1.5 became --num-cpus=1) and refuses a fractional resource midway.
        ("name: x\nhead: {host: a, num_cpus: 1.5}\n", "bad.yaml:2: head.num_cpus: must be a whole number: a node "
         "offers Ray whole units (got 1.5)"),
        ("name: x\nhead: {host: a}\nworkers: [{host: b, num_gpus: 0.5}]\n", "workers.0.num_gpus: must be a whole number"),
        ("name: x\nhead: {host: a, resources: {big_mem: 1.5}}\n", "head.resources: must be whole numbers: a node "
         "offers Ray whole units (got {'big_mem': 1.5})"),
    ],
)
def test_cluster_file_errors(write_yaml, text, expected):
    with pytest.raises(ConfigError) as info:
        load_cluster(write_yaml(text, "bad.yaml"))
    assert expected in str(info.value)


def test_the_object_store_minimum_is_rays():
    from ray._private import ray_constants

    from raytrain.config.cluster import OBJECT_STORE_MINIMUM

    assert ray_constants.OBJECT_STORE_MINIMUM_MEMORY_BYTES == OBJECT_STORE_MINIMUM


def test_firewall_ports_listed(lab):
    ports = dict((what, p) for p, what in plan.firewall_ports(lab))
    assert ports["GCS (head)"] == "6333" and ports["raylet"] == "6380"
    assert ports["worker processes"] == "10002-10100"
    # Unpinned: random, except Ray's two fixed defaults.
    assert ports["object manager"] == "random"
    assert ports["dashboard agent HTTP"] == "52365 (Ray's default)" and ports["Ray Client (head)"] == "10001 (Ray's default)"


def test_ports_checked_before_start(lab):
    assert plan.ports_to_check(lab, lab.head) == [6333, 8265, 6380]
    assert plan.ports_to_check(lab, lab.workers[0]) == [6380]


class CannedRunner(Runner):
    """Answers the preflight like real nodes would; m8's pinned raylet port is taken."""

    def __init__(self, ssh):
        self.m8_python: str | None = None

    def run(self, node, command, *, stdin=None, timeout=None):
        import json
        import platform

        import ray

        from raytrain.cluster.runner import CommandResult

        if "hostname" in command and "version" in command:
            python = (node.host == "m8" and self.m8_python) or platform.python_version()
            out = json.dumps({"python": python, "ray": ray.__version__, "hostname": node.host})
        elif command.split()[-1].isdigit():  # the ports check: prints the busy ones
            out = json.dumps([6380] if node.host == "m8" else [])
        else:
            out = ""
        return CommandResult(node.node_name, command, 0, out, "")


def test_check_names_a_busy_pinned_port_on_a_worker(lab):
    from raytrain.cluster.lifecycle import check

    report = check(lab.model_copy(update={"storage": lab.storage.model_copy(update={"path": None})}), CannedRunner(lab.ssh))
    assert report.problems == [
        "m8: port(s) 6380 already in use there (another Ray? `raytrain cluster status`; or pin other ports under `ports:`)"
    ]


def test_check_compares_the_whole_python_version_as_ray_does(lab):
    """Ray refuses 3.11.7 against 3.11.9 unless RAY_DEFAULT_PYTHON_VERSION_MATCH_LEVEL=minor."""
    import platform

    from raytrain.cluster.lifecycle import check

    major, minor, patch = platform.python_version().split(".")[:3]
    other = f"{major}.{minor}.{int(patch) + 1}"
    no_storage = {"storage": lab.storage.model_copy(update={"path": None}), "ports": lab.ports.model_copy(update={"node_manager_port": None})}
    runner = CannedRunner(lab.ssh)
    runner.m8_python = other
    problems = check(lab.model_copy(update=no_storage), runner).problems
    assert len(problems) == 1 and "versions differ between nodes (m8)" in problems[0]
    assert f"m8: Python {other}" in problems[0] and f"with Python {platform.python_version()} on m8" in problems[0]
    lenient = lab.model_copy(update={**no_storage, "env": {"RAY_DEFAULT_PYTHON_VERSION_MATCH_LEVEL": "minor"}})
    runner = CannedRunner(lab.ssh)
    runner.m8_python = other
    assert check(lenient, runner).problems == []


def test_down_asks_and_without_anyone_to_answer_needs_yes(write_yaml, monkeypatch):
    """`cluster down` from a script or CI (stdin not a terminal) said `error: Abort: `; a "no" said the same."""
    from raytrain.cli import cluster_cmd
    from raytrain.cluster import lifecycle

    def stop_nothing(*args, **kwargs):
        raise AssertionError("nothing may be stopped")

    monkeypatch.setattr(lifecycle, "down", stop_nothing)
    path = str(write_yaml(LAB, "c.yaml"))
    piped = CliRunner().invoke(app, ["cluster", "down", path], input="y\n")
    assert piped.exit_code == 2, piped.output
    assert ("error: cluster down asks before it stops every Ray process of cluster lab on 2 node(s), and no one can "
            "answer (stdin is not a terminal): pass --yes") in " ".join(piped.output.split())
    monkeypatch.setattr(cluster_cmd, "_interactive", lambda: True)
    declined = CliRunner().invoke(app, ["cluster", "down", path], input="n\n")
    assert declined.exit_code == 1, declined.output
    assert declined.output.endswith("nothing stopped\n") and "Abort" not in declined.output


def test_down_and_exec_dry_run_print_the_commands(write_yaml):
    path = str(write_yaml(LAB, "c.yaml"))
    down = CliRunner().invoke(app, ["cluster", "down", path, "--dry-run"])
    assert down.exit_code == 0, down.output
    commands = re.split(r"\n(?=\[m\d+\] )", down.stdout.strip())  # the stop's script spans lines
    assert [c.split()[0] for c in commands] == ["[m8]", "[m10]"]  # workers first, then the head
    assert all(c.split()[1] == "ssh" and c.endswith(" 10.0.0.10:6333 " + ENV.replace("'", "'\"'\"'") + " /opt/raytrain/bin/ray stop'")
               for c in commands), commands[0][-400:]
    ex = CliRunner().invoke(app, ["cluster", "exec", path, "--node", "m8", "--dry-run", "--", "df", "-h", "/nfsroot"])
    assert ex.exit_code == 0, ex.output
    assert ex.stdout.strip().splitlines() == [f"[m8] {SSHRunner(load_cluster(path).ssh).display(load_cluster(path).workers[0], 'df -h /nfsroot')}"]


def test_default_python_is_raytrains_own_on_a_local_only_cluster(write_yaml):
    """With no `python:`/`venv:`, a cluster of only this machine runs the Python that runs raytrain (a venv's
    Python when raytrain runs from one); any remote node makes it `python3` on each node's PATH."""
    import sys

    from raytrain.config.cluster import load_cluster

    local = load_cluster(write_yaml("name: one\nhead: {host: localhost}\n", "one.yaml"))
    assert local.python_path == sys.executable
    assert plan.probe(local).startswith(shlex.quote(sys.executable) + " -c ")
    mixed = load_cluster(write_yaml("name: two\nhead: {host: localhost}\nworkers: [{host: 10.0.0.8}]\n", "two.yaml"))
    assert mixed.python_path == "python3"
    pinned = load_cluster(write_yaml("name: three\nhead: {host: localhost}\npython: /opt/py/bin/python3\n", "three.yaml"))
    assert pinned.python_path == "/opt/py/bin/python3"


class StartRunner(Runner):
    """Answers `ray start`, the GCS probe, `ray stop` and the node list as scripted, and logs each command's
    start and end by node, so a test sees what overlapped (real threads: `up` runs nodes in parallel)."""

    def __init__(self, cfg, *, gcs_answers: bool = True, head_fails: bool = False):
        import threading

        self.cfg, self.gcs_answers, self.head_fails = cfg, gcs_answers, head_fails
        self.log: list[tuple[str, str, str]] = []
        self.lock = threading.Lock()
        self.worker_started = threading.Event()

    def note(self, *entry: str) -> None:
        with self.lock:
            self.log.append(entry)

    def run(self, node, command, *, stdin=None, timeout=None):
        import json
        import time

        from raytrain.cluster.runner import CommandResult

        kind = ("head" if "--head" in command else "worker" if "start --address" in command else
                "stop" if command.endswith("ray stop") else "nodes" if "RAY_ADDRESS=" in command else
                "gcs?" if "create_connection" in command else "other")
        self.note(node.node_name, kind, "begin")
        rc, out = 0, ""
        if kind == "head":
            # The head's `ray start` ends only after a worker's has begun (or 10 s): the overlap under test.
            self.worker_started.wait(timeout=10 if self.gcs_answers else 0.5)
            rc = 1 if self.head_fails else 0
        elif kind == "worker":
            self.worker_started.set()
        elif kind == "gcs?":
            rc = 0 if self.gcs_answers else 1
            time.sleep(0 if self.gcs_answers else 0.2)
        elif kind == "nodes":
            out = json.dumps([{"ip": n.ip, "alive": True, "resources": {}, "hostname": n.host} for n in self.cfg.nodes])
        self.note(node.node_name, kind, "end")
        return CommandResult(node.node_name, command, rc, out, "")


def test_up_starts_the_workers_once_the_heads_gcs_answers_before_its_ray_start_ends(lab):
    from raytrain.cluster.lifecycle import _start

    runner = StartRunner(lab)
    nodes = _start(lab, runner, list(lab.nodes), lambda _: None)
    assert {n["ip"] for n in nodes} == {"10.0.0.10", "10.0.0.8"}
    log = runner.log
    assert log.index(("m10", "gcs?", "end")) < log.index(("m8", "worker", "begin")) < log.index(("m10", "head", "end"))
    assert not [e for e in log if e[1] == "stop"]


def test_a_head_that_fails_before_its_gcs_answers_starts_no_worker(lab):
    from raytrain.cluster.lifecycle import _start
    from raytrain.errors import ClusterError

    runner = StartRunner(lab, gcs_answers=False, head_fails=True)
    with pytest.raises(ClusterError, match="the head failed to start"):
        _start(lab, runner, list(lab.nodes), lambda _: None)
    assert [e for e in runner.log if e[1] in ("worker", "stop")] == [("m10", "stop", "begin"), ("m10", "stop", "end")]


def test_a_head_that_fails_after_the_workers_began_is_stopped_with_them_once_its_start_ended(lab):
    from raytrain.cluster.lifecycle import _start
    from raytrain.errors import ClusterError

    runner = StartRunner(lab, head_fails=True)
    with pytest.raises(ClusterError, match="the head failed to start"):
        _start(lab, runner, list(lab.nodes), lambda _: None)
    log = runner.log
    stops = [e[0] for e in log if e[1] == "stop" and e[2] == "begin"]
    assert sorted(stops) == ["m10", "m8"]
    first_stop = min(i for i, e in enumerate(log) if e[1] == "stop")
    assert first_stop > log.index(("m10", "head", "end")) and first_stop > log.index(("m8", "worker", "end"))


def test_the_stop_after_a_failed_start_holds_none_of_the_words_ray_stop_looks_for(lab):
    """`ray stop` stops every process whose command line holds one of these words: the clean-up script (and the
    shell that runs it) would be stopped by its own `ray stop` before it could stop what that missed."""
    from ray.autoscaler._private.constants import RAY_PROCESSES

    command = plan.stop(lab)
    assert command.endswith("/opt/raytrain/bin/ray stop")
    in_command_lines = [word for word, by_name in RAY_PROCESSES if not by_name]  # the rest: by process name
    assert "monitor.py" in in_command_lines
    assert [word for word in in_command_lines if word in command] == []
    assert "ray::" not in command  # by process name on Linux, by command line on macOS
    compile(plan.STOP, "stop", "exec")


@pytest.mark.parametrize(("host", "listed"), [("127.0.0.1", False), ("::1", False),
                                              ("0.0.0.0", True), ("192.168.1.10", True)])
def test_a_dashboard_on_loopback_is_no_port_to_open(write_yaml, host, listed):
    """No other machine reaches it there (`raytrain cluster dashboard` forwards it over SSH): it was listed as a
    port to open between the nodes."""
    cfg = load_cluster(write_yaml(f"name: x\nhead: {{host: m10, address: 192.168.1.10, dashboard: {{host: '{host}'}}}}\n"
                                  "auth: {mode: token}\n", "c.yaml"))
    assert any(what.startswith("dashboard (head") for _, what in plan.firewall_ports(cfg)) is listed


# Run as PID 1 of a private PID namespace: stand-ins for the Ray processes of this cluster and of another Ray (their
# command lines as `ray start` writes them), a process of neither, then the stop, with `touch MARKER` for `ray stop`.
STOP_SCENE = r'''
import ctypes, json, os, subprocess, sys, time
script, marker, beside = sys.argv[1], sys.argv[2], sys.argv[3] == "beside"
SLEEP = "import time; time.sleep(120)"
PARENT = "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)']); time.sleep(120)"
NAMED = "import ctypes, time; ctypes.CDLL(None).prctl(15, b'gcs_server'); time.sleep(120)"
ours, theirs = "session_2026-12-01_10-00-00_000001_11", "session_2026-12-01_11-00-00_000002_22"
procs = {
    "our raylet": [PARENT, "--gcs-address=10.9.9.9:6379", f"--session-name={ours}"],
    "our log monitor": [SLEEP, f"--logs-dir=/tmp/ray/{ours}/logs"],
    "our gcs": [NAMED, "--gcs_server_port=6379", "--node-ip-address=10.9.9.9"],
    "nobody's": [SLEEP],
}
if beside:
    procs |= {"their raylet": [PARENT, "--gcs-address=10.9.9.8:6379", f"--session-name={theirs}"],
              "their dashboard": [SLEEP, f"--session-dir=/tmp/ray/{theirs}"]}
started = {name: subprocess.Popen([sys.executable, "-c", *argv]) for name, argv in procs.items()}
time.sleep(1.5)  # the children of PARENT have started
kids = {}
for pid in filter(str.isdigit, os.listdir("/proc")):
    with open(f"/proc/{pid}/stat") as f:
        ppid = int(f.read().rsplit(")", 1)[1].split()[1])
    for name, p in started.items():
        if ppid == p.pid:
            kids[name + "'s child"] = int(pid)
done = subprocess.run([sys.executable, "-c", script, "10.9.9.9:6379", "touch", marker], capture_output=True, text=True)
def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
pids = {name: p.pid for name, p in started.items()} | kids
print(json.dumps({"rc": done.returncode, "stderr": done.stderr, "ray_stop_ran": os.path.exists(marker),
                  "alive": sorted(name for name, pid in pids.items() if alive(pid))}))
'''


@needs_unshare("a PID namespace")
@pytest.mark.parametrize("beside", ["alone", "beside"])
def test_the_stop_of_a_node_leaves_another_ray_there_running(tmp_path, beside):
    """`ray stop` stops every Ray of the machine: a local `ray.init()` beside a head on `localhost`, or another
    cluster's node. Alone, the cluster's Ray is stopped with `ray stop` (and what that misses); beside another Ray,
    only the processes that name this cluster's GCS address or its sessions, and their children."""
    marker = tmp_path / "ray_stop_ran"
    done = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c", STOP_SCENE, plan.STOP,
                           str(marker), beside], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert got["rc"] == 0, got
    assert got["ray_stop_ran"] is (beside == "alone")
    theirs = ["their dashboard", "their raylet", "their raylet's child"] if beside == "beside" else []
    assert got["alive"] == ["nobody's", *theirs]
    if beside == "beside":
        assert "note: another Ray runs here too (session_2026-12-01_11-00-00_000002_22), which `ray stop` would stop " \
               "as well: stopped only this cluster's processes" in got["stderr"]

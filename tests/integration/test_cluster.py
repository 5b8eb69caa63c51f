"""`raytrain cluster` on real hosts: a head and two workers as namespaced hosts with their own sshd.

Every Ray process here is started by `ray start` (token auth set explicitly on every node and driver).
"""

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .conftest import NO_HOSTS, lab_fixture
from .hostlab import (
    CLEAN_ENV,
    QUICK_DEATH_ENV,
    HostLab,
    can_create_namespaces,
    plain_venv,
    raytrain,
    status_once_dead,
    venv_with_ray,
)

pytestmark = [pytest.mark.integration, pytest.mark.multihost]

WHY_NOT = can_create_namespaces()


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    yield from lab_fixture(WHY_NOT, NO_HOSTS, lambda: HostLab(tmp_path_factory.mktemp("hostlab")))


def cluster_file(lab: HostLab, tmp_path: Path, name: str, **extra) -> Path:
    ip = lab.ip
    shared = lab.root / "shared"
    shared.mkdir(exist_ok=True)
    workers = extra.pop("workers", None) or (
        f"  - {{host: {ip['w1']}, name: w1, num_cpus: 1, object_store_memory: 134217728, resources: {{w1: 1, worker: 1}}}}\n"
        f"  - {{host: {ip['w2']}, name: w2, num_cpus: 2, object_store_memory: 134217728, resources: {{w2: 1, worker: 1}}}}\n"
    )
    text = (
        f"name: {name}\n"
        f"head: {{host: {ip['head']}, name: head, port: 6333, num_cpus: 1, object_store_memory: 134217728, dashboard: {{enabled: false}}}}\n"
        f"workers:\n{workers}"
        f"ssh: {{config_file: {lab.ssh_config}, connect_timeout: {extra.pop('connect_timeout', 5)}}}\n"
        f"{extra.pop('python_line', f'python: {sys.executable}')}\n"
        f"storage: {{path: {extra.pop('storage', shared)}}}\n"
        f"start_timeout_s: 60\n"
    )
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    return path




# Every kind of process `ray start` leaves running (each host is its own PID namespace).
RAY_PROCESSES = "raylet|gcs_server|ray/dashboard/|log_monitor|autoscaler/_private/monitor|runtime_env/agent|default_worker|ray::"


def ray_processes(lab: HostLab) -> dict[str, list[str]]:
    return {h: lab.processes(h, RAY_PROCESSES) for h in lab.names}


def check_and_up_refuse(lab: HostLab, path: Path, *reasons: str) -> None:
    """`cluster check` exits 1 naming every one of `reasons`; `cluster up` exits 1 having started nothing, on
    any host."""
    check = raytrain("cluster", "check", str(path))
    assert check.returncode == 1
    for reason in reasons:
        assert reason in check.stderr, check.stderr[-2000:]
    up = raytrain("cluster", "up", str(path))
    assert up.returncode == 1 and "nothing was started" in up.stderr
    assert ray_processes(lab) == {h: [] for h in lab.names}


def test_up_status_train_down(lab, tmp_path):
    path = cluster_file(lab, tmp_path, "lab3")
    path.write_text(path.read_text() + QUICK_DEATH_ENV)  # w1 loses power below
    try:
        up = raytrain("cluster", "up", str(path))
        assert up.returncode == 0, up.stderr[-3000:]
        first = raytrain("cluster", "status", str(path), "--json")
        assert first.returncode == 0, first.stderr[-3000:]
        st = json.loads(first.stdout)
        assert [(n["name"], n["state"], n["resources"].get("CPU")) for n in st["nodes"]] == [
            ("head", "alive", 1.0), ("w1", "alive", 1.0), ("w2", "alive", 2.0)
        ]
        assert {(n["python"], n["ray"]) for n in st["nodes"]} == {(sys.version.split()[0], __import__("ray").__version__)}
        token = Path(os.path.expanduser("~/.raytrain/clusters/lab3/auth_token"))
        assert token.stat().st_mode & 0o777 == 0o600
        assert token.read_text().strip() not in up.stdout + up.stderr  # never in output
        before = {h: lab.processes(h, "raylet|gcs_server") for h in lab.names}
        again = raytrain("cluster", "up", str(path))
        assert again.returncode == 0 and "already up; nothing changed" in again.stderr
        assert {h: lab.processes(h, "raylet|gcs_server") for h in lab.names} == before  # the same processes

        # A PPO driver on this machine joins with --cluster; its env runners land on the workers.
        train_cfg = tmp_path / "ppo.yaml"
        train_cfg.write_text(
            f"experiment: {{name: lab, storage_path: {lab.root / 'shared' / 'runs'}, checkpoint_frequency: 0, checkpoint_at_end: false}}\n"
            "environment: {env: CartPole-v1}\n"
            "env_runners: {num_env_runners: 2, custom_resources_per_env_runner: {worker: 1}}\n"
            "training: {train_batch_size: 200, minibatch_size: 100, num_epochs: 1}\n"
            "resources: {num_cpus_for_main_process: 0}\n"
            "stop: {training_iteration: 1}\n"
        )
        # Not a node of the cluster: a clear error, not Ray's crash on a missing raylet socket.
        here = raytrain("train", str(train_cfg), "--cluster", str(path))
        assert here.returncode == 1 and "not a node of cluster lab3" in here.stderr
        train = lab.on("head", f"{CLEAN_ENV} {sys.executable} -m raytrain train {train_cfg} --cluster {path}", timeout=300)
        assert train.returncode == 0, train.stderr[-4000:]
        run = Path(train.stdout.strip().splitlines()[-1])
        row = json.loads((run / "metrics.jsonl").read_text().splitlines()[0])
        assert row["fault_tolerance/num_healthy_workers"] == 2
        assert row["node_ip"] == lab.ip["head"]  # the driver and its learner ran on the head
        assert row["env_runners/num_env_steps_sampled"] >= 200
        # Each env runner needs the `worker` resource, one unit on each worker: one ran on w1, one on w2.
        # The GCS's actor table still lists the finished actors with their addresses (the state API would
        # need the dashboard, which these clusters do not start).
        from raytrain.cluster import plan
        from raytrain.config.cluster import load_cluster

        cfg = load_cluster(path)
        where = (
            "import json, ray\nfrom ray._private.state import actors\nray.init(logging_level='ERROR')\n"
            "print(json.dumps(sorted(a['Address']['IPAddress'] for a in actors().values() if 'EnvRunner' in a['ActorClassName'])))"
        )
        placed = lab.on("head", f"{plan.env_prefix(cfg)} RAY_ADDRESS={cfg.address} {sys.executable} -c {shlex.quote(where)}")
        assert placed.returncode == 0, placed.stderr[-2000:]
        assert json.loads(placed.stdout.strip().splitlines()[-1]) == sorted([lab.ip["w1"], lab.ip["w2"]])

        ex = raytrain("cluster", "exec", str(path), "--node", "w1", "--", "hostname")
        assert ex.returncode == 0 and "[w1] w1" in ex.stdout and "[head]" not in ex.stdout
        assert "exit codes: w1=0" in ex.stderr
        failing = raytrain("cluster", "exec", str(path), "--", "sh", "-c", "hostname; test $(hostname) != w2")
        assert failing.returncode == 1 and "exit codes: head=0, w1=0, w2=1" in failing.stderr

        # A worker host loses power: status shows it dead; `up` again brings it back.
        lab.host_down("w1")
        st = status_once_dead(path, 1, poll_s=2)
        assert st["nodes"][1]["state"] == "dead"
        partly = raytrain("cluster", "status", str(path))
        assert partly.returncode == 1 and "2 of its 3 nodes alive (w1 dead)" in " ".join(partly.stderr.split())
        lab.host_up("w1")
        back = raytrain("cluster", "up", str(path))
        assert back.returncode == 0, back.stderr[-3000:]
        st = json.loads(raytrain("cluster", "status", str(path), "--json").stdout)
        assert [n["state"] for n in st["nodes"]] == ["alive", "alive", "alive"]
    finally:
        down = raytrain("cluster", "down", str(path), "-y")
    assert down.returncode == 0, down.stderr[-3000:]
    assert ray_processes(lab) == {h: [] for h in lab.names}
    gone = raytrain("cluster", "status", str(path))
    assert gone.returncode == 1 and "its head" in gone.stderr and "does not answer" in gone.stderr, gone.stderr


def test_storage_not_shared_fails_check_naming_the_node(lab, tmp_path):
    missing = lab.root / "no_such_dir"
    check = raytrain("cluster", "check", str(cluster_file(lab, tmp_path, "labmissing", storage=missing)))
    assert check.returncode == 1
    assert f"storage.path {missing} does not exist on the head (head)" in check.stderr
    assert not missing.exists()
    shared = lab.root / "shared"
    private = lab.root / "private_w2"
    private.mkdir(exist_ok=True)
    assert lab.on("w2", f"mount --bind {private} {shared}").returncode == 0
    try:
        check_and_up_refuse(lab, cluster_file(lab, tmp_path, "labnfs"), "is not the same shared directory on w2")
    finally:
        lab.on("w2", f"umount {shared}")


def test_unreachable_host_fails_on_the_ssh_connect_timeout(lab, tmp_path):
    workers = f"  - {{host: {lab.net}.99, name: ghost, num_cpus: 1}}\n"
    path = cluster_file(lab, tmp_path, "labghost", workers=workers, connect_timeout=3)
    for command in ("check", "up"):
        result = raytrain("cluster", command, str(path))
        # SSH gave up after its 3 s ConnectTimeout (exit 255), not raytrain's own longer timeout (124).
        # How long that takes is a figure of scripts/bench_cluster.py.
        assert result.returncode == 1
        assert "ghost" in result.stderr and "ssh" in result.stderr and "exited 255" in result.stderr
    assert "nothing was started" in result.stderr
    assert ray_processes(lab) == {h: [] for h in lab.names}


def test_failed_worker_start_leaves_nothing_running(lab, tmp_path):
    """w2's `ray start` fails at once: the head and w1 start, w2 fails, everything is stopped.

    (It asked for an object store below Ray's minimum; the cluster file's check now refuses that before anything
    starts, so w2's `ray` is a stand-in that refuses `start` as Ray refuses a spec, bind-mounted on w2 only.)
    """
    ray = Path(sys.executable).parent / "ray"
    refusing = tmp_path / "ray_start_refused"
    refusing.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = start ]; then echo "ValueError: simulated refusal of the node spec" >&2; exit 1; fi\n'
        f"exec {sys.executable} -c 'import sys; from ray.scripts.scripts import main; sys.argv[0] = \"ray\"; main()' \"$@\"\n"
    )
    refusing.chmod(0o755)
    workers = (
        f"  - {{host: {lab.ip['w1']}, name: w1, num_cpus: 1, object_store_memory: 134217728}}\n"
        f"  - {{host: {lab.ip['w2']}, name: w2, num_cpus: 1}}\n"
    )
    path = cluster_file(lab, tmp_path, "labfail", workers=workers)
    assert lab.on("w2", f"mount --bind {refusing} {ray}").returncode == 0
    try:
        up = raytrain("cluster", "up", str(path))
        assert up.returncode == 1
        assert "w2:" in up.stderr and "ray start --address" in up.stderr and "exited" in up.stderr
        assert ray_processes(lab) == {h: [] for h in lab.names}
    finally:
        lab.on("w2", f"umount {ray}")


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_up_stopped_midway_by_ctrl_c_or_sigterm_leaves_nothing_running(lab, tmp_path, signum):
    """Stopped once the head is up and the workers start: what `up` started is stopped again on every host."""
    path = cluster_file(lab, tmp_path, "labstopped")
    assert ray_processes(lab) == {h: [] for h in lab.names}, "Ray processes left from before this test"
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    # SIGINT as a terminal's Ctrl-C gives it; a background job of a non-interactive shell starts with it ignored.
    proc = subprocess.Popen([sys.executable, "-m", "raytrain", "cluster", "up", str(path)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    said = []
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            said.append(line)
            if "worker(s) in parallel" in line:
                break
        assert any("worker(s) in parallel" in line for line in said), "".join(said)
        time.sleep(1.0)  # into the workers' `ray start` (about 5 s here), past the line that announces them
        proc.send_signal(signum)
        rest, _ = proc.communicate(timeout=120)[::-1]
        said.append(rest)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        # A raylet's agents check every few seconds that it still lives, and end themselves when it has gone: one
        # that its raylet started just as `ray stop` came outlives the stop by those seconds.
        deadline = time.monotonic() + 20
        while (stray := ray_processes(lab)) != {h: [] for h in lab.names} and time.monotonic() < deadline:
            time.sleep(0.5)
        where = {h: lab.on(h, "ps -eo pid,ppid,stat,lstart,args | cut -c1-160").stdout for h in lab.names if stray[h]}
        if stray != {h: [] for h in lab.names}:
            for h in lab.names:
                lab.on(h, f"{Path(sys.executable).parent / 'ray'} stop --force")
    text = "".join(said)
    assert proc.returncode == 130, text[-3000:]
    assert "stopping Ray on head, w1, w2" in text, text[-3000:]
    assert stray == {h: [] for h in lab.names}, f"{stray}\n{text[-3000:]}\n{where}"


def test_a_ray_start_that_fails_after_starting_processes_is_stopped_too(lab, tmp_path):
    """w2's `ray start` starts its raylet and then exits 3: up fails naming w2 and stops Ray on w2 as well."""
    ray = Path(sys.executable).parent / "ray"
    wrapper = tmp_path / "ray_start_then_fail"
    wrapper.write_text(
        "#!/bin/sh\n"
        f"{sys.executable} -c 'import sys; from ray.scripts.scripts import main; sys.argv[0] = \"ray\"; main()' \"$@\"\n"
        'if [ "$1" = start ]; then echo "simulated failure after starting" >&2; exit 3; fi\n'
    )
    wrapper.chmod(0o755)
    assert lab.on("w2", f"mount --bind {wrapper} {ray}").returncode == 0
    try:
        path = cluster_file(lab, tmp_path, "labhalf")
        up = raytrain("cluster", "up", str(path))
        assert up.returncode == 1, up.stderr[-2000:]
        assert "w2:" in up.stderr and "exited 3" in up.stderr and "simulated failure after starting" in up.stderr
        assert ray_processes(lab) == {h: [] for h in lab.names}
    finally:
        if lab.processes("w2", RAY_PROCESSES):  # only where up left some: `ray stop` imports Ray, seconds
            lab.on("w2", f"{ray} stop --force")
        lab.on("w2", f"umount {ray}")


def test_worker_with_another_ray_fails_check_and_up_naming_it(lab, tmp_path):
    """w2's venv path holds another Ray 2.x release (bind-mounted on w2 only): check and up name w2."""
    other = venv_with_ray("2.59.0")
    venv = plain_venv(lab.root / "venv")
    assert lab.on("w2", f"mount --bind {other} {venv}").returncode == 0
    try:
        check_and_up_refuse(
            lab, cluster_file(lab, tmp_path, "labver", python_line=f"venv: {venv}"),
            "versions differ between nodes (w2)", "w2: Python", "Ray 2.59.0", "install ray==2.60",
        )
    finally:
        lab.on("w2", f"umount {venv}")


def test_default_local_cluster_file_on_a_fresh_host(lab, tmp_path):
    """configs/cluster.yaml (a head on localhost, no SSH) works as shipped, run on one lab host's console."""
    config = Path(__file__).resolve().parents[2] / "configs" / "cluster.yaml"
    py = f"{CLEAN_ENV} {sys.executable} -m raytrain"
    try:
        up = lab.on("w1", f"{py} cluster up {config}", timeout=180)
        assert up.returncode == 0, up.stderr[-3000:]
        assert "dashboard: http://127.0.0.1:8265" in up.stdout
        st = json.loads(lab.on("w1", f"{py} cluster status {config} --json").stdout)
        assert st["nodes"][0]["state"] == "alive"
        assert st["nodes"][0]["ip"] == lab.ip["w1"]
        # The dashboard listens on 127.0.0.1 only.
        probe = "import urllib.request as u, sys; print(u.urlopen(sys.argv[1], timeout=10).status)"
        assert lab.on("w1", f"{sys.executable} -c '{probe}' http://127.0.0.1:8265/").stdout.strip() == "200"
        assert lab.on("w1", f"{sys.executable} -c '{probe}' http://{lab.ip['w1']}:8265/").returncode != 0
    finally:
        down = lab.on("w1", f"{py} cluster down {config} -y", timeout=120)
    assert down.returncode == 0, down.stderr[-2000:]
    assert lab.processes("w1", "raylet|gcs_server") == []


def test_down_of_a_local_head_leaves_another_ray_there_running(lab, tmp_path):
    """`ray stop` stops every Ray of the machine. A head on `localhost` (configs/cluster.yaml) beside another Ray, a
    local `ray.init()` or another cluster: `cluster down` stops the cluster's processes and leaves the other Ray."""
    config = Path(__file__).resolve().parents[2] / "configs" / "cluster.yaml"
    py = f"{CLEAN_ENV} {sys.executable} -m raytrain"
    ray = str(Path(sys.executable).with_name("ray"))
    other = (f"{CLEAN_ENV} RAY_AUTH_MODE=disabled RAY_USAGE_STATS_ENABLED=0 {ray} start --head --port=6390 --ray-client-server-port=10011 "
             "--dashboard-agent-listen-port=52399 --min-worker-port=20000 --max-worker-port=20100 "
             "--include-dashboard=false --num-cpus=1")
    downed = False
    try:
        started = lab.on("w1", other, timeout=120)
        assert started.returncode == 0, started.stderr[-3000:]
        theirs = lab.processes("w1", "gcs_server --.*--gcs_server_port=6390") + lab.processes("w1", "raylet/raylet --.*:6390")
        assert len(theirs) == 2, theirs  # its GCS and its raylet
        up = lab.on("w1", f"{py} cluster up {config}", timeout=180)
        assert up.returncode == 0, up.stderr[-3000:]
        down = lab.on("w1", f"{py} cluster down {config} -y", timeout=120)
        assert down.returncode == 0, down.stderr[-2000:]
        downed = True
        assert "note: another Ray runs here too (session_" in down.stderr, down.stderr
        assert lab.processes("w1", "gcs_server_port=6379") + lab.processes("w1", "gcs-address=.*:6379") == []
        assert lab.processes("w1", "gcs_server --.*--gcs_server_port=6390") + lab.processes("w1", "raylet/raylet --.*:6390") == theirs
        alive = lab.on("w1", f"{CLEAN_ENV} RAY_AUTH_MODE=disabled {sys.executable} -c 'import ray; ray.init(address=\"{lab.ip['w1']}:6390\"); "
                             "print(ray.cluster_resources()[\"CPU\"])'", timeout=120)
        assert alive.stdout.strip().splitlines()[-1:] == ["1.0"], alive.stderr[-2000:]
    finally:
        if not downed:
            lab.on("w1", f"{py} cluster down {config} -y", timeout=120)
        lab.on("w1", f"{CLEAN_ENV} {ray} stop", timeout=120)
    assert lab.processes("w1", "raylet|gcs_server") == []


def _as_if_killed_while_running(exp: Path) -> None:
    """Make Tune's state of the finished sweep in `exp` what a driver killed during its trials leaves: each
    trial RUNNING (as test_tune's kill -9 finds it), so that `tune resume` has them to continue."""
    for state_file in exp.glob("experiment_state-*.json*"):
        data = json.loads(state_file.read_text())
        trials = []
        for trial, runtime in data["trial_data"]:
            fields = json.loads(trial)
            fields["status"] = "RUNNING"
            trials.append([json.dumps(fields), runtime])
        data["trial_data"] = trials
        state_file.write_text(json.dumps(data))


def test_tune_refuses_storage_that_a_node_does_not_share(lab, tmp_path):
    """`raytrain tune --cluster` and `tune resume` check the checkpoint path on every alive node before starting."""
    path = cluster_file(lab, tmp_path, "labtune")
    shared = lab.root / "shared"
    private = lab.root / "private_w1"
    private.mkdir(exist_ok=True)
    (tmp_path / "base.yaml").write_text(
        # One trial of one iteration with no env runner actor: the sweep only has to leave a state to resume.
        "environment: {env: CartPole-v1}\nenv_runners: {num_env_runners: 0}\n"
        "training: {train_batch_size: 200, minibatch_size: 100, num_epochs: 1}\nstop: {training_iteration: 1}\n"
    )
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(f"name: shared_check\nbase: base.yaml\ncheckpoint: {{storage_path: {shared / 'sweeps'}}}\n")
    first = shared / "sweeps" / "shared_ok"
    try:
        up = raytrain("cluster", "up", str(path))
        assert up.returncode == 0, up.stderr[-3000:]
        ok = lab.on("head", f"{CLEAN_ENV} {sys.executable} -m raytrain tune {sweep} --name shared_ok --cluster {path}", timeout=300)
        assert ok.returncode == 0, ok.stdout[-2000:] + ok.stderr[-2000:]
        _as_if_killed_while_running(first)  # a finished sweep has nothing to resume, and resume checks nothing
        assert lab.on("w1", f"mount --bind {private} {shared}").returncode == 0
        resume = lab.on("head", f"{CLEAN_ENV} {sys.executable} -m raytrain tune resume {first} --cluster {path}", timeout=300)
        assert resume.returncode == 1, resume.stdout[-2000:] + resume.stderr[-2000:]
        assert "is not the same shared directory on every node" in resume.stderr
        assert lab.ip["w1"] in resume.stderr and lab.ip["w2"] not in resume.stderr.split("do not see")[1]
        tune = lab.on("head", f"{CLEAN_ENV} {sys.executable} -m raytrain tune {sweep} --cluster {path}", timeout=300)
        assert tune.returncode == 1, tune.stdout[-2000:] + tune.stderr[-2000:]
        assert "is not the same shared directory on every node" in tune.stderr
        assert lab.ip["w1"] in tune.stderr and lab.ip["w2"] not in tune.stderr.split("do not see")[1]
        assert not (shared / "sweeps" / "shared_check").exists() or not any((shared / "sweeps" / "shared_check").glob("experiment_state*"))
    finally:
        lab.on("w1", f"umount {shared}")
        raytrain("cluster", "down", str(path), "-y")


def test_restart_and_dashboard_tunnel(lab, tmp_path):
    """`up --restart` restarts a running cluster; `cluster dashboard` tunnels to a head-local dashboard."""
    path = cluster_file(lab, tmp_path, "labdash")
    path.write_text(path.read_text().replace("dashboard: {enabled: false}", "dashboard: {host: 127.0.0.1, port: 8265}"))
    tunnel = None
    try:
        up = raytrain("cluster", "up", str(path))
        assert up.returncode == 0, up.stderr[-3000:]
        again = raytrain("cluster", "up", str(path), "--restart")
        assert again.returncode == 0, again.stderr[-3000:]
        assert "--restart: stopping the running cluster first" in again.stderr
        st = json.loads(raytrain("cluster", "status", str(path), "--json").stdout)
        assert [n["state"] for n in st["nodes"]] == ["alive", "alive", "alive"]
        env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
        tunnel = subprocess.Popen(
            [sys.executable, "-m", "raytrain", "cluster", "dashboard", str(path), "--port", "18265"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        )
        import urllib.request

        deadline, status = time.time() + 30, None
        while time.time() < deadline and status is None:
            try:
                status = urllib.request.urlopen("http://127.0.0.1:18265/", timeout=5).status
            except OSError:
                time.sleep(0.5)
        assert status == 200
        # The tunnel `tune --submit/status/logs` open themselves: ssh -N -L ... -- HEAD.
        from raytrain.config.cluster import load_cluster
        from raytrain.tune.jobs import dashboard_url

        with dashboard_url(load_cluster(path)) as url:
            assert url.startswith("http://127.0.0.1:") and url != "http://127.0.0.1:18265"
            assert urllib.request.urlopen(url, timeout=10).status == 200
    finally:
        if tunnel is not None:
            tunnel.terminate()
            tunnel.wait(timeout=10)
        raytrain("cluster", "down", str(path), "-y")
    assert ray_processes(lab) == {h: [] for h in lab.names}


def test_hostile_values_arrive_literally_or_are_refused_over_ssh(lab, tmp_path):
    """Issue 11 on real hosts: shell syntax in an env value and in the storage path reaches every node's Ray
    literally; a hostile `host`, `address` or `ssh.user` is refused with exit 2; no canary appears on any host
    (the hosts share this machine's file system outside /tmp/ray and /run)."""
    canary = tmp_path / "canary"
    value = f"$(touch {canary}) `touch {canary}`; touch {canary} ' \" | touch {canary}"
    shared = lab.root / f"shared $(touch {canary})"
    shared.mkdir(parents=True, exist_ok=True)
    path = cluster_file(lab, tmp_path, "labhostile")
    text = path.read_text().replace(f"storage: {{path: {lab.root / 'shared'}}}", f"storage: {{path: {json.dumps(str(shared))}}}")
    path.write_text(text + f"env: {{NOTE: {json.dumps(value)}}}\n")
    try:
        up = raytrain("cluster", "up", str(path))
        assert up.returncode == 0, up.stderr[-3000:]
        assert not canary.exists()
        for h in lab.names:
            raylets = [line.split()[0] for line in lab.processes(h, "raylet") if "/raylet" in line.split()[1]]
            assert raylets, f"no raylet on {h}"
            environ = lab.on(h, f"cat /proc/{raylets[0]}/environ").stdout.split("\0")
            assert f"NOTE={value}" in environ, h
        st = raytrain("cluster", "status", str(path), "--json")
        assert st.returncode == 0 and [n["state"] for n in json.loads(st.stdout)["nodes"]] == ["alive"] * 3
    finally:
        down = raytrain("cluster", "down", str(path), "-y")
    assert down.returncode == 0, down.stderr[-3000:]
    assert not canary.exists()
    assert ray_processes(lab) == {h: [] for h in lab.names}

    w1 = lab.ip["w1"]
    hostile = {
        "workers.0.host": (f"{{host: {w1}, name: w1", f"{{host: '-oProxyCommand=touch {canary}', name: w1"),
        "workers.0.address": (f"{{host: {w1}, name: w1", f"{{host: {w1}, address: '{w1}; touch {canary}', name: w1"),
    }
    for field, (old, new) in hostile.items():
        bad = tmp_path / "bad.yaml"
        bad.write_text(path.read_text().replace(old, new))
        for command in (["cluster", "check"], ["cluster", "exec", "--", "true"]):
            result = raytrain(command[0], command[1], str(bad), *command[2:])
            assert result.returncode == 2 and f"{bad}:4: {field}: must be" in result.stderr, result.stderr[-2000:]
    bad.write_text(path.read_text().replace("ssh: {", f"ssh: {{user: '-oProxyCommand=touch {canary}', "))
    result = raytrain("cluster", "exec", str(bad), "--", "true")
    assert result.returncode == 2 and "ssh.user: must be a user name" in result.stderr
    assert not canary.exists()

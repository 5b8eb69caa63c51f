"""The lab end to end on three namespaced hosts: sweeps across the cluster with checkpoints on a real NFS share
(mounted by `raytrain cluster up`), a worker host powered off mid-sweep, a sweep submitted as a Ray Job,
followed and stopped, and netcheck.

Mode: `raytrain cluster up` with token auth (the default); drivers run on the head's console (a Ray driver
must run on a node), the "laptop" (this machine) submits jobs and reads status over SSH. This machine does
not mount the share: it reads results from the NFS server's export directory, so every file checked went
through NFS.
"""

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .conftest import NO_HOSTS, lab_fixture, rows, tiny_base
from .hostlab import CLEAN_ENV, QUICK_DEATH_ENV, HostLab, can_create_namespaces, raytrain, status_once_dead
from .nfslab import NFSLab, cannot_serve_nfs

pytestmark = [pytest.mark.integration, pytest.mark.multihost]

WHY_NOT = can_create_namespaces() or cannot_serve_nfs()







@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    yield from lab_fixture(WHY_NOT, NO_HOSTS, lambda: HostLab(tmp_path_factory.mktemp("lablab")))


@pytest.fixture(scope="module")
def nfs(lab):
    with NFSLab(lab) as share:
        yield share


def on_hosts(lab: HostLab) -> Path:
    """storage.path as the hosts see it: inside the NFS mount that `cluster up` makes."""
    return lab.root / "nfsroot" / "raytrain"


def on_server(nfs: NFSLab) -> Path:
    """The same folder on the NFS server's export directory."""
    return nfs.export_dir / "raytrain"


@pytest.fixture(scope="module")
def cluster(lab, nfs, tmp_path_factory):
    """A cluster of one CPU per host (so three trials run one per host), dashboard on the head's loopback,
    storage on the NFS share."""
    folder = tmp_path_factory.mktemp("labcluster")
    ip = lab.ip
    path = folder / "lab.yaml"
    path.write_text(
        "name: lab6\n"
        f"head: {{host: {ip['head']}, name: head, port: 6333, num_cpus: 1, object_store_memory: 134217728, dashboard: {{host: 127.0.0.1, port: 8265}}}}\n"
        "workers:\n"
        f"  - {{host: {ip['w1']}, name: w1, num_cpus: 1, object_store_memory: 134217728}}\n"
        f"  - {{host: {ip['w2']}, name: w2, num_cpus: 1, object_store_memory: 134217728}}\n"
        f"ssh: {{config_file: {lab.ssh_config}, connect_timeout: 5}}\n"
        f"python: {sys.executable}\n"
        f"storage: {{path: {on_hosts(lab)}, nfs: {{server: {nfs.ip}, export: /nfsroot, mount_point: {on_hosts(lab).parent}}}}}\n"
        f"{QUICK_DEATH_ENV}"
        "start_timeout_s: 60\n"
    )
    up = raytrain("cluster", "up", str(path))
    assert up.returncode == 0, up.stderr[-3000:]
    assert all(f"  {h}: mounted {nfs.share}" in up.stderr for h in lab.names), up.stderr[-3000:]
    try:
        yield path
    finally:
        down = raytrain("cluster", "down", str(path), "-y")
        assert down.returncode == 0, down.stderr[-3000:]
        assert {h: lab.processes(h, "raylet|gcs_server") for h in lab.names} == {h: [] for h in lab.names}


def sweep_file(folder: Path, lab: HostLab, text: str, stop: int, keep: int | None = 3, batch: int = 200) -> Path:
    """A sweep of tiny trials with a checkpoint per iteration on the share (`keep`: num_to_keep, None: all;
    `batch`: the train batch, which sets how long an iteration takes)."""
    (folder / "base.yaml").write_text(tiny_base(stop, 1, batch))
    path = folder / "sweep.yaml"
    num_to_keep = "" if keep is None else f", num_to_keep: {keep}"
    path.write_text(f"base: base.yaml\ncheckpoint: {{storage_path: {on_hosts(lab) / 'sweeps'}, frequency: 1{num_to_keep}}}\n" + text)
    return path


def on_head(lab: HostLab, command: str, **popen) -> subprocess.Popen:
    """Start a command on the head's console (its namespaces) in the background."""
    return subprocess.Popen(
        ["nsenter", "-t", str(lab._pid1("head")), "-n", "-p", "-m", "-u", "--", "bash", "-c", command],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen,
    )


def test_pbt_sweep_runs_on_every_host_and_exploits_across_hosts(lab, nfs, cluster, tmp_path):
    sweep = sweep_file(tmp_path, lab, (
        # Ranked on the learner's lr, so the weaker trials are known (1e-5, 2e-5 and the mutations stay below
        # 0.01). Ranked on the return, the trial that reports second at each perturbation point can be the better
        # one every time, and then no exploit happens (as CI once saw in test_tune's PBT test).
        "name: pbt_lab\nsearch: {algorithm: pbt, seed: 0,"
        " metric: learners/default_policy/default_optimizer_learning_rate, mode: max}\n"
        "space: {training.lr: {distribution: grid, values: [0.00001, 0.00002, 0.01]}}\n"
        "pbt:\n  perturbation_interval: 2\n  quantile_fraction: 0.34\n  resample_probability: 1.0\n"
        "  hyperparam_mutations: {training.lr: {distribution: choice, values: [0.0003, 0.0005]}}\n"
        # PBT reuses actors by default, and Tune gives a pending trial the first actor that frees up, even
        # while that trial's own actor is starting on another host. These trials last seconds, less than an
        # actor's start on another host, so one host could run them all; fresh actors show the placement.
        "reuse_actors: false\n"
        # Every checkpoint is kept: an exploited trial's fresh actor takes seconds to start on another host,
        # while the donor writes a checkpoint every fraction of a second, so with num_to_keep 3 the donor's
        # checkpoint could be pruned before the restore (Tune then fails the trial: "does not exist on storage").
    # The exploited trial's fresh actor goes where a CPU is free. While the other two trials run, that is
    # only its own host; once one has ended, its host is free too, and CI once saw the restore placed on the
    # source's own host (written and read on the head). A restore takes 7-10 s here (a new actor builds the
    # algorithm), so trials last about 25 s (40 iterations of 600 steps): the first exploit, at the weakest
    # trial's second to tenth iteration, is placed while every trial still runs. Traced in 4 runs: 4 or 5
    # exploits each, all across hosts, the first placed 16-20 s before any trial ended (with 12 iterations of
    # 200 steps: one exploit, placed about when the source ended).
    ), stop=40, keep=None, batch=600)
    tune = lab.on("head", f"{CLEAN_ENV} {sys.executable} -m raytrain tune {sweep} --cluster {cluster}", timeout=600)
    assert tune.returncode == 0, tune.stdout[-3000:] + tune.stderr[-3000:]
    exp = on_server(nfs) / "sweeps" / "pbt_lab"
    trials = {p.name: rows(p) for p in exp.iterdir() if p.is_dir() and p.name.startswith("pbt_lab_")}
    assert len(trials) == 3 and all(r and r[-1]["training_iteration"] == 40 for r in trials.values())
    # One CPU per host and one per trial: the three trials ran on the three hosts.
    assert {r[0]["node_ip"] for r in trials.values()} == set(lab.ip.values())
    # A PBT exploit restores a checkpoint another host wrote (each host runs one trial at a time).
    exploits = [json.loads(line) for line in (exp / "pbt_global.txt").read_text().splitlines()] if (exp / "pbt_global.txt").exists() else []
    assert exploits, "no PBT exploit happened"

    def overrides(config):  # the sampled keys (with a seed per trial) tell trials apart
        return config["raytrain"]["overrides"]

    # Each exploit ([target tag, source tag, target iteration, source iteration, source config, new config])
    # continued the target trial (found by the seed in its tag) with the new config, from the source's
    # checkpoint: the first exploit brings the source's seed into the target.
    def seed(tag):
        return int(re.search(r"experiment_seed=(\d+)", tag).group(1))

    def trial_of(tag):  # the trial's folder name, by the seed it started with
        return next(name for name, r in trials.items() if overrides(r[0]["config"])["experiment.seed"] == seed(tag))

    for i, (target_tag, source_tag, _, _, _, new_config) in enumerate(exploits):
        target = trial_of(target_tag)
        assert any(row["iterations_since_restore"] == 1 and overrides(row["config"]) == overrides(new_config)
                   for row in trials[target]), f"{target} did not continue with the exploited config {overrides(new_config)}"
        if i == 0:
            assert overrides(new_config)["experiment.seed"] == seed(source_tag) != seed(target_tag)
    # Each trial keeps its host (the three fit at once, so PBT pauses none of them to share), and an exploit
    # restores the source's checkpoint from the share: written on the source's host, read on the target's.
    moved = []
    for target_tag, source_tag, _, source_iteration, _, new_config in exploits:
        written = [row["node_ip"] for row in trials[trial_of(source_tag)] if row["training_iteration"] == source_iteration]
        read = [row["node_ip"] for row in trials[trial_of(target_tag)] if row["iterations_since_restore"] == 1
                and overrides(row["config"]) == overrides(new_config)]
        moved.append((written[-1], read[0]))
    assert any(w != h for w, h in moved), moved
    # Checkpoints are on the NFS server, whichever host wrote them.
    assert len(list(exp.glob("pbt_lab_*/checkpoint_*"))) >= 6


def test_a_worker_host_powered_off_mid_sweep(lab, nfs, cluster, tmp_path):
    """w2 loses power while trials run: its trial resumes elsewhere from its last checkpoint, the sweep
    finishes every trial; status shows w2 dead; `up` brings it back and new trials use it."""
    sweep = sweep_file(tmp_path, lab, (
        "name: loss\nsearch: {algorithm: random, num_samples: 3, seed: 0}\n"
        "space: {training.lr: {distribution: loguniform, low: 0.0001, high: 0.001}}\n"
        "failure: {max_failures: 3}\n"
        # w2 goes down once its trial is past iteration 3: 12 leaves it 8 more (about 1 s each here). The lost
        # trial resumes once another one ends and frees a CPU: the sweep lasts about twice `stop` iterations.
    ), stop=12)
    exp = on_server(nfs) / "sweeps" / "loss"
    driver = on_head(lab, f"{CLEAN_ENV} {sys.executable} -m raytrain tune {sweep} --cluster {cluster}")
    try:
        deadline = time.time() + 240
        on_w2 = None
        while time.time() < deadline and on_w2 is None:
            for trial in exp.glob("loss_*"):
                r = rows(trial, live=True)
                if r and r[-1]["node_ip"] == lab.ip["w2"] and r[-1]["training_iteration"] >= 3:
                    on_w2 = trial
            time.sleep(0.5)
        assert on_w2 is not None, "no trial ran on w2"
        lab.host_down("w2")
        st = status_once_dead(cluster, 2, poll_s=1)
        assert [n["state"] for n in st["nodes"]] == ["alive", "alive", "dead"]
        out, errs = driver.communicate(timeout=600)
        assert driver.returncode == 0, out[-3000:] + errs[-3000:]
    finally:
        if driver.poll() is None:
            driver.kill()
        if lab._unshare_pid("w2") is None:
            lab.host_up("w2")
            nfs.install_client("w2")  # a fresh host: `mount -t nfs` works again for `up` to mount the share
    trials = {p.name: rows(p) for p in exp.glob("loss_*") if p.is_dir()}
    assert len(trials) == 3 and all(r[-1]["training_iteration"] == 12 for r in trials.values())
    moved = trials[on_w2.name]
    iterations = [r["training_iteration"] for r in moved]
    assert iterations.count(1) == 1, f"{on_w2.name} restarted from zero: {iterations}"
    resumed = [r for r in moved if r["iterations_since_restore"] == 1 and r["training_iteration"] > 1]
    assert resumed and resumed[0]["node_ip"] != lab.ip["w2"], "the trial did not continue on another host"

    back = raytrain("cluster", "up", str(cluster))
    assert back.returncode == 0, back.stderr[-3000:]
    st = json.loads(raytrain("cluster", "status", str(cluster), "--json").stdout)
    assert [n["state"] for n in st["nodes"]] == ["alive", "alive", "alive"]
    assert f"  w2: mounted {nfs.share}" in back.stderr, back.stderr[-3000:]
    again = sweep_file(tmp_path, lab, "name: after\nsearch: {algorithm: random, num_samples: 3, seed: 1}\n"
                       "space: {training.lr: {distribution: loguniform, low: 0.0001, high: 0.001}}\n", stop=2)  # where they start
    tune = lab.on("head", f"{CLEAN_ENV} {sys.executable} -m raytrain tune {again} --cluster {cluster}", timeout=600)
    assert tune.returncode == 0, tune.stdout[-3000:] + tune.stderr[-3000:]
    used = {rows(p)[0]["node_ip"] for p in (on_server(nfs) / "sweeps" / "after").glob("after_*") if p.is_dir()}
    assert lab.ip["w2"] in used


LAB_ENV = """
from gymnasium.envs.classic_control import CartPoleEnv

from lab_helpers import POLE


class LabCartPole(CartPoleEnv):
    def __init__(self, config=None):
        super().__init__()
        self.length = POLE
"""


def test_a_submitted_sweep_is_followed_and_stopped(lab, nfs, cluster, tmp_path):
    """From this machine (not a node): submit as a Ray Job, see it by name, follow its logs, stop it.

    Its env is the user's own, in the folder the sweep is submitted from (the module and a helper it
    imports), which is on no host: the job takes them along, for its driver and its trials."""
    sweep = sweep_file(tmp_path, lab, (
        "name: submitted\nsearch: {algorithm: random, num_samples: 2, seed: 0}\n"
        "space: {training.lr: {distribution: loguniform, low: 0.0001, high: 0.001}}\n"
    ), stop=2000)
    (tmp_path / "lab_env.py").write_text(LAB_ENV)
    (tmp_path / "lab_helpers.py").write_text("POLE = 0.5\n")
    base = tmp_path / "base.yaml"
    base.write_text(base.read_text().replace("env: CartPole-v1", "env: 'lab_env:LabCartPole'"))
    submit = raytrain("tune", str(sweep), "--cluster", str(cluster), "--submit", cwd=tmp_path)
    assert submit.returncode == 0, submit.stderr[-3000:]
    job_id = submit.stdout.strip().splitlines()[-1]
    assert job_id.startswith("raytrain-tune-submitted-")
    assert f"raytrain tune logs {job_id}" in submit.stderr
    assert "Uploading package" not in submit.stderr  # Ray's job client's INFO line stays off the terminal
    exp = on_server(nfs) / "sweeps" / "submitted"
    deadline = time.time() + 240
    while time.time() < deadline and len([p for p in exp.glob("submitted_*") if rows(p, live=True)]) < 2:
        time.sleep(1)
    assert len([p for p in exp.glob("submitted_*") if rows(p, live=True)]) == 2, raytrain("tune", "logs", job_id, "--cluster", str(cluster), "--no-follow").stdout[-3000:]
    assert f"took along from {tmp_path}: lab_env.py, lab_helpers.py" in submit.stderr

    status = json.loads(raytrain("tune", "status", job_id, "--cluster", str(cluster), "--json").stdout)
    assert status["status"] == "RUNNING" and status["metadata"]["raytrain_sweep"] == "submitted"
    listed = json.loads(raytrain("tune", "status", "--cluster", str(cluster), "--json").stdout)
    assert job_id in [j["job_id"] for j in listed]
    logs = raytrain("tune", "logs", job_id, "--cluster", str(cluster), "--no-follow")
    assert logs.returncode == 0 and "sweep submitted: random, 2 trials" in logs.stdout
    # Trial actors are told apart by name on the dashboard's Actors page (the state API behind it).
    actors = lab.on("head", f"{CLEAN_ENV} RAY_ADDRESS={lab.ip['head']}:6333 RAY_AUTH_MODE=token "
                    f"RAY_AUTH_TOKEN_PATH=$HOME/.raytrain/clusters/lab6/auth_token {sys.executable} -c "
                    "'from ray.util.state import list_actors; print(sorted(str(a.repr_name) for a in list_actors(detail=True, "
                    "filters=[(\"class_name\", \"=\", \"RaytrainPPO\"), (\"state\", \"=\", \"ALIVE\")])))'")
    names = actors.stdout.strip()
    assert "RaytrainPPO(submitted_" in names and names.count("RaytrainPPO(submitted_") == 2, actors.stderr[-2000:]

    stop = raytrain("tune", "stop", job_id, "--cluster", str(cluster))
    assert stop.returncode == 0, stop.stderr[-3000:]
    assert f"job {job_id}: STOPPED" in stop.stderr
    assert f"raytrain tune resume {on_hosts(lab) / 'sweeps' / 'submitted'}" in stop.stderr
    assert json.loads(raytrain("tune", "status", job_id, "--cluster", str(cluster), "--json").stdout)["status"] == "STOPPED"
    followed = raytrain("tune", "logs", job_id, "--cluster", str(cluster), timeout=120)  # follows until the end
    assert followed.returncode == 0 and "sweep submitted: random, 2 trials" in followed.stdout
    assert f"job {job_id}: STOPPED" in followed.stderr
    assert list(exp.glob("experiment_state*.json")), "the stopped sweep left no state to resume from"
    # The driver and its trials are gone from the cluster.
    deadline = time.time() + 60
    while time.time() < deadline and any(lab.processes(h, "RaytrainPPO") for h in lab.names):
        time.sleep(1)
    assert not any(lab.processes(h, "RaytrainPPO") for h in lab.names)


def test_netcheck_measures_every_node_through_ray(lab, cluster):
    result = raytrain("cluster", "netcheck", str(cluster), "--size-mb", "8", "--pings", "10", "--json")
    assert result.returncode == 0, result.stderr[-3000:]
    rows_ = json.loads(result.stdout)
    assert [r["node"] for r in rows_] == [lab.ip["head"], *sorted([lab.ip["w1"], lab.ip["w2"]])]
    assert rows_[0]["head"] and not rows_[1]["head"]
    assert all(r["rtt_p50_ms"] > 0 and r["head_to_node_mb_s"] > 0 and r["node_to_head_mb_s"] > 0 for r in rows_)
    table = raytrain("cluster", "netcheck", str(cluster), "--size-mb", "8", "--pings", "10")
    assert "head -> node" in table.stdout and "w2" in table.stdout


def test_raytrain_run_spreads_framework_nodes_over_the_hosts(lab, cluster):
    """`raytrain run --cluster` on the head: the agent/observer example's three nodes land one on each host."""

    example = Path(__file__).resolve().parents[2] / "examples" / "agent_observer.py"
    run = lab.on("head", f"{CLEAN_ENV} {sys.executable} -m raytrain run {example} --main main --workers 3 --cluster {cluster}",
                 timeout=600)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-4000:]
    assert "done: 10 rounds" in out
    # Ray prefixes the lines of nodes on other machines with their address.
    elsewhere = set(re.findall(r"\(node\.\d+ pid=\d+, ip=([\d.]+)\)", out)) - {lab.ip["head"]}
    assert elsewhere == {lab.ip["w1"], lab.ip["w2"]}, out[-3000:]
    assert re.search(r"\(node\.0 pid=\d+\)", out), "node 0 should run on the head, beside the driver"

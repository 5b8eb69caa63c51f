"""`raytrain tune --slurm` on a real Slurm (slurmctld + three slurmds in namespaces): real sbatch, srun, scancel."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest

from .conftest import lab_fixture, rows, tiny_base
from .slurmlab import SlurmLab, cannot_run

pytestmark = [pytest.mark.integration, pytest.mark.multihost]

VENV = Path(os.environ.get("VIRTUAL_ENV") or Path(__file__).resolve().parents[2] / ".venv")


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    yield from lab_fixture(cannot_run(), "no Slurm lab", lambda: SlurmLab(tmp_path_factory.mktemp("slurmlab")))


@pytest.fixture
def sweep(tmp_path):
    """A sweep file, a Slurm file and the storage folder under tmp_path (every node sees the same root FS)."""

    def write(sweep_body: str, stop: int, **slurm) -> tuple[Path, Path, Path]:
        storage = tmp_path / "shared"
        (tmp_path / "base.yaml").write_text(tiny_base(stop, 1).replace("experiment: {", f"experiment: {{storage_path: {storage / 'runs'}, "))
        path = tmp_path / "sweep.yaml"
        path.write_text(f"base: base.yaml\ncheckpoint: {{frequency: 1}}\n{sweep_body}")
        settings = {"nodes": 3, "cpus_per_node": 1, "venv": str(VENV), "storage_path": str(storage / "results"),
                    "start_timeout_s": 120, "env": {"OMP_NUM_THREADS": "1"}, **slurm}
        slurm_file = tmp_path / "slurm.yaml"
        slurm_file.write_text(json.dumps(settings))
        return path, slurm_file, storage / "results"

    return write




def submit(lab: SlurmLab, sweep: Path, slurm: Path, cwd: Path | None = None) -> tuple[str, str]:
    res = lab.raytrain("tune", str(sweep), "--slurm", str(slurm), cwd=cwd)
    assert res.returncode == 0, res.stderr[-3000:]
    job_id = res.stdout.strip().splitlines()[-1]
    assert re.fullmatch(r"\d+", job_id), res.stdout
    return job_id, res.stderr


def job_state(lab: SlurmLab, job_id: str) -> dict:
    res = lab.raytrain("slurm", "status", job_id, "--json", timeout=60)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


ACTIVE = ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "REQUEUED")


def wait_done(lab: SlurmLab, job_id: str, limit_s: float = 900) -> dict:
    """Until the job leaves the queue (a deadline against a hang, not a timing assertion): `raytrain slurm status`
    says so. Slurm's own scontrol is asked between (a fraction of a second each, where raytrain's CLI takes about
    one), and raytrain once scontrol no longer lists the job as active."""
    deadline = time.time() + limit_s
    info = {"state": "not asked"}
    while time.time() < deadline:
        shown = lab.slurm("scontrol", "show", "job", "-o", job_id)
        state = re.search(r"\bJobState=(\S+)", shown.stdout)
        if state is None or state.group(1) not in ACTIVE:
            info = job_state(lab, job_id)
            if info["state"] not in ACTIVE:
                return info
        time.sleep(0.3)
    pytest.fail(f"job {job_id} still {info['state']} after {limit_s} s:\n{log_of(lab, job_id)[-4000:]}")


def log_of(lab: SlurmLab, job_id: str) -> str:
    res = lab.raytrain("slurm", "logs", job_id, "--no-follow", timeout=60)
    return res.stdout + res.stderr


def no_ray_left(lab: SlurmLab) -> None:
    for n in lab.names:
        # Zombies are dead already: the node's PID 1 is slurmd, which reaps only its own children.
        left = [p for p in lab.processes(n, "raylet|gcs_server|ray start|raytrain.slurm.driver") if "<defunct>" not in p]
        assert not left, f"Ray still running on {n}: {left}"


def test_pbt_sweep_runs_on_all_three_nodes(lab, sweep, tmp_path):
    """Its env is the user's own, `pole_env.py` in the folder the sweep is submitted from, which the Slurm
    file names as the job's workdir: the driver and the trials on every node import it from there."""
    path, slurm, results = sweep(
        "name: pbt\nsearch: {algorithm: pbt, num_samples: 3, seed: 0}\n"
        "space: {training.lr: {distribution: choice, values: [0.0001, 0.001, 0.01]}}\n"
        "pbt:\n  perturbation_interval: 2\n  quantile_fraction: 0.34\n"
        "  hyperparam_mutations: {training.lr: {distribution: choice, values: [0.0002, 0.0005]}}\n"
        # Trials of seconds, shorter than an actor's start on another node: with PBT's default reuse_actors
        # Tune would run them all in the first actor that frees up (see test_lab); fresh actors show placement.
        "reuse_actors: false\n",
        stop=4,
        workdir=str(tmp_path),
    )
    (tmp_path / "pole_env.py").write_text("from gymnasium.envs.classic_control import CartPoleEnv as Pole\n")
    base = tmp_path / "base.yaml"
    base.write_text(base.read_text().replace("env: CartPole-v1", "env: 'pole_env:Pole'"))
    job_id, said = submit(lab, path, slurm, cwd=tmp_path)
    exp = results / "pbt"
    assert f"raytrain slurm logs {job_id}" in said and f"raytrain slurm status {job_id}" in said
    script = exp / "slurm_job.sh"
    assert script.is_file() and "#SBATCH --nodes=3" in script.read_text()
    info = wait_done(lab, job_id)
    log = log_of(lab, job_id)
    assert info["state"] == "COMPLETED" and info["exit_code"] == "0:0", log[-4000:]
    assert "Ray is alive on all 3 nodes" in log
    assert info["output"] == str(exp / f"slurm-{job_id}.out")
    # Every trial finished, with checkpoints on the shared storage, on the three nodes between them.
    trials = [p for p in exp.iterdir() if p.is_dir() and (p / "result.json").exists()]
    assert len(trials) == 3
    assert all(rows(t)[-1]["training_iteration"] == 4 for t in trials)
    assert all(list(t.glob("checkpoint_*")) for t in trials)
    hosts = {r["hostname"] for t in trials for r in rows(t)}
    assert hosts == {"n1", "n2", "n3"}, hosts
    ips = {r["node_ip"] for t in trials for r in rows(t)}
    assert ips == set(lab.ip.values())
    assert (exp / "best.yaml").is_file() and (exp / "leaderboard.csv").is_file()
    # The job's token is gone with the job; Ray is stopped on every node.
    assert not (exp / ".ray_auth_token").exists()
    no_ray_left(lab)
    # status in words, and logs of a finished job.
    words = lab.raytrain("slurm", "status", job_id)
    assert words.returncode == 0 and "COMPLETED" in words.stdout and "n[1-3]" in words.stdout, words.stdout


def test_cancel_mid_sweep_then_the_same_command_resumes(lab, sweep):
    STOP = 40  # iterations: long enough that the cancel lands mid-sweep (with 12 it was sometimes done before it)
    path, slurm, results = sweep(
        "name: cut\nsearch: {algorithm: random, num_samples: 2, seed: 0}\n"
        "space: {training.lr: {distribution: loguniform, low: 0.0001, high: 0.001}}\n",
        stop=STOP, nodes=2,
    )
    job_id, _ = submit(lab, path, slurm)
    exp = results / "cut"
    deadline = time.time() + 600
    polls = 0
    while time.time() < deadline:
        if len(list(exp.glob("*/checkpoint_000002"))) == 2:
            break
        polls += 1
        if polls % 10 == 1:  # every 2 s: raytrain's CLI takes about one
            info = job_state(lab, job_id)
            assert info["state"] in ("PENDING", "RUNNING"), log_of(lab, job_id)[-4000:]
        time.sleep(0.2)
    else:
        pytest.fail(f"no checkpoints in time:\n{log_of(lab, job_id)[-4000:]}")
    cancelled = lab.raytrain("slurm", "cancel", job_id)
    assert cancelled.returncode == 0 and "the driver is saving" in cancelled.stderr, cancelled.stderr
    info = wait_done(lab, job_id)
    assert info["state"] == "CANCELLED", info
    log = log_of(lab, job_id)
    # Only the batch shell was signalled: the driver saved while Ray still ran, and ended before Ray was stopped.
    said = [line for line in log.splitlines() if line.startswith("raytrain")]
    steps = ["cancel requested", "saving Tune's state", "driver exited with 143", "stopping Ray on every node",
             f"cancelling job {job_id}"]
    at = [next((i for i, line in enumerate(said) if step in line), -1) for step in steps]
    assert -1 not in at and at == sorted(at), "\n".join(said)
    assert "Experiment has been interrupted, but the most recent state was saved" in log, log[-3000:]
    assert not (exp / ".ray_auth_token").exists()
    no_ray_left(lab)
    before = {t.name: [r["training_iteration"] for r in rows(t)] for t in exp.iterdir() if t.is_dir() and rows(t)}
    assert before and any(its[-1] < STOP for its in before.values()), before

    again, said = submit(lab, path, slurm)
    assert "resumes" in said, said
    info = wait_done(lab, again)
    log = log_of(lab, again)
    assert info["state"] == "COMPLETED", log[-4000:]
    assert "tuner.pkl exists: resuming" in log
    assert not list(results.glob("cut_*")), "the same command must not start a second sweep"
    for t in (p for p in exp.iterdir() if p.is_dir() and rows(p)):
        trial_rows = rows(t)
        iterations = [r["training_iteration"] for r in trial_rows]
        assert iterations[-1] == STOP
        assert iterations.count(1) <= 1, f"{t.name} restarted from zero: {iterations}"
        if before[t.name][-1] < STOP:
            resumed = [r for r in trial_rows if r["iterations_since_restore"] == 1 and r["training_iteration"] > 1]
            assert resumed, f"{t.name} did not continue from a checkpoint: before {before[t.name]}, after {iterations}"
    assert (exp / "slurm_jobs.txt").read_text().split()[::3] == [job_id, again]
    no_ray_left(lab)


def test_cancel_of_a_pending_job_is_a_plain_scancel(lab, sweep):
    path, slurm, results = sweep("name: later\n", stop=1, extra_sbatch=["--begin=now+1hour"])
    job_id, _ = submit(lab, path, slurm)
    assert job_state(lab, job_id)["state"] == "PENDING"
    cancelled = lab.raytrain("slurm", "cancel", job_id)
    assert cancelled.returncode == 0 and "cancelled (scancel)" in cancelled.stderr, cancelled.stderr
    assert wait_done(lab, job_id)["state"] == "CANCELLED"
    again = lab.raytrain("slurm", "cancel", job_id)
    assert again.returncode == 2 and "is CANCELLED: not queued or running, nothing to cancel" in again.stderr, again.stderr


def test_bad_slurm_file_exits_2_and_submits_nothing(lab, sweep, tmp_path):
    path, slurm, results = sweep("name: bad\n", stop=1)
    before = lab.slurm("squeue", "-h", "-o", "%i").stdout.split()
    bad = tmp_path / "bad_slurm.yaml"
    bad.write_text(f"nodes: 2\nvenv: {VENV}\nextra_sbatch:\n  - \"--comment=x\\n#SBATCH --uid=0\"\n")
    res = lab.raytrain("tune", str(path), "--slurm", str(bad))
    assert res.returncode == 2, res.stderr
    assert f"{bad}:3" in res.stderr and "extra_sbatch" in res.stderr and "one line" in res.stderr
    assert lab.slurm("squeue", "-h", "-o", "%i").stdout.split() == before
    assert not results.exists()


def test_a_job_folder_that_not_every_node_shares_ends_the_job_before_ray_starts(lab, sweep, tmp_path):
    """storage_path on a disk of each node's own (here: n2 and n3 see an empty folder of their own there) would
    leave each node its checkpoints, which the driver, PBT and a resumed job cannot read. The job says which
    nodes, and ends before any Ray starts."""
    path, slurm, results = sweep("name: unshared\nsearch: {algorithm: random, num_samples: 1, seed: 0}\n", stop=1)
    shared = results.parent
    shared.mkdir(parents=True, exist_ok=True)
    own = {n: tmp_path / f"own_{n}" for n in ("n2", "n3")}
    mounted = []
    try:
        for n, folder in own.items():
            folder.mkdir()
            res = lab.on(n, f"mount --bind {folder} {shared}")
            assert res.returncode == 0, res.stderr
            mounted.append(n)
        job_id, _ = submit(lab, path, slurm)
        info = wait_done(lab, job_id, limit_s=300)
        log = log_of(lab, job_id)
        assert info["state"] == "FAILED", (info, log[-3000:])
        for n in own:
            assert f"raytrain: {n}: the job's folder {results / 'unshared'} is not the one the batch script runs in" in log, log[-3000:]
        assert "the job's folder is not shared by every node (see the lines above): nothing was started" in log
        assert "Ray runtime started" not in log and "Ray is alive" not in log, log[-3000:]
        assert not (results / "unshared" / ".raytrain_shared_check").exists()
        assert not any(p.name.startswith("trial") or p.name.startswith("experiment_state") for p in (results / "unshared").iterdir())
        no_ray_left(lab)
    finally:
        for n in mounted:
            lab.on(n, f"umount {shared}")


def test_a_tmpdir_too_long_for_rays_sockets_ends_the_job_before_ray_starts(lab, sweep):
    """A site's per-job TMPDIR (here set through the Slurm file's `env:`) that is too long for Ray's Unix sockets:
    `ray start --head` failed after its GCS was up (`AF_UNIX path length cannot exceed 107 bytes`) and the job
    said only that the head did not come up. The head's step says why, and what to set, before any Ray starts."""
    long = "/tmp/" + "t" * 60
    path, slurm, results = sweep("name: longtmp\nsearch: {algorithm: random, num_samples: 1, seed: 0}\n", stop=1,
                                 env={"OMP_NUM_THREADS": "1", "TMPDIR": long})
    job_id, _ = submit(lab, path, slurm)
    info = wait_done(lab, job_id, limit_s=300)
    log = log_of(lab, job_id)
    said = " ".join(log.split())
    assert info["state"] == "FAILED", (info, log[-3000:])
    assert (f"raytrain: {lab.names[0]}: Ray's temp folder {long}/ray (from TMPDIR={long!r}) is too long for the Unix "
            f"sockets Ray makes in it: {long}/ray/session_<date>_<pid>/sockets/plasma_store would be ") in said, log[-3000:]
    assert ("set RAY_TMPDIR in the Slurm file's `env:` (Ray reads it before TMPDIR) to a short folder this user can "
            "write, e.g. `RAY_TMPDIR=/tmp`; nothing was started") in said
    assert f"Ray cannot start on {lab.names[0]} (see the line above): nothing was started" in said
    assert "Ray runtime started" not in log and "validate_socket_filename" not in log, log[-3000:]
    assert not any(p.name.startswith("trial") or p.name.startswith("experiment_state")
                   for p in (results / "longtmp").iterdir())
    no_ray_left(lab)


def test_a_worker_node_that_dies_mid_sweep_loses_nothing(lab, sweep):
    """A worker node powered off mid-sweep (its slurmd, Ray and trial die with it): the job keeps running on the
    others, Tune retries the lost trial there from its last checkpoint, every trial finishes, none restarts."""
    stop = 30  # iterations take a fraction of a second here: enough of them that the node dies mid-trial
    path, slurm, results = sweep(
        "name: lost\nsearch: {algorithm: random, num_samples: 2, seed: 0}\n"
        "space: {training.lr: {distribution: loguniform, low: 0.0001, high: 0.001}}\n"
        "failure: {max_failures: 2}\n",
        stop=stop,
    )
    job_id, said = submit(lab, path, slurm)
    assert "max_failures is 0" not in said
    exp = results / "lost"
    head = lab.names[0]  # the job's first node: Ray's head and the driver
    victim: tuple[Path, str] | None = None
    deadline = time.time() + 600
    polls = 0
    while victim is None and time.time() < deadline:
        for t in (p for p in exp.iterdir() if p.is_dir()) if exp.is_dir() else ():
            got = rows(t, live=True)
            if got and got[-1]["hostname"] != head and (t / "checkpoint_000002").is_dir():
                victim = (t, got[-1]["hostname"])
                break
        else:
            polls += 1
            if polls % 20 == 0:
                info = job_state(lab, job_id)
                assert info["state"] in ("PENDING", "RUNNING"), log_of(lab, job_id)[-4000:]
            time.sleep(0.2)
    if victim is None:
        pytest.fail(f"no trial with checkpoints on a worker node in time:\n{log_of(lab, job_id)[-4000:]}")
    trial, node = victim
    try:
        lab.node_down(node)
        assert lab.pid1(node) is None
        info = wait_done(lab, job_id)
        log = log_of(lab, job_id)
        assert info["state"] == "COMPLETED" and info["exit_code"] == "0:0", log[-4000:]
        assert info["restarts"] == "0", info  # the job itself went on: not requeued
        assert log.count("Ray is alive on all 3 nodes") == 1 and "driver exited with 0" in log, log[-4000:]
        assert f"Trial {trial.name} errored" in log, log[-4000:]  # Tune saw the trial die with its node
        # The driver writes result.json, so its rows are the trial's whole story: iterations 1..k on the dead
        # node, then, on the other nodes, a restored row (iterations_since_restore 1) at k+1 or below (its last
        # checkpoint, not iteration 1) and on up to `stop`.
        story = rows(trial)
        on_dead = [r for r in story if r["hostname"] == node]
        after = story[len(on_dead):]
        assert story[:len(on_dead)] == on_dead and on_dead, [(r["training_iteration"], r["hostname"]) for r in story]
        assert [r["training_iteration"] for r in on_dead] == list(range(1, len(on_dead) + 1))
        assert after, f"{trial.name} never ran again after {node} died"
        assert node not in {r["hostname"] for r in after}, after
        first = after[0]
        assert first["iterations_since_restore"] == 1, first
        assert 1 < first["training_iteration"] <= len(on_dead) + 1, (len(on_dead), first["training_iteration"])
        # Every trial: all iterations 1..stop, iteration 1 once (no restart from zero), the last one is `stop`.
        trials = [p for p in exp.iterdir() if p.is_dir() and rows(p)]
        assert len(trials) == 2
        for t in trials:
            its = [r["training_iteration"] for r in rows(t)]
            assert its[-1] == stop and its.count(1) == 1 and sorted(set(its)) == list(range(1, stop + 1)), (t.name, its)
        assert (exp / "best.yaml").is_file()
        no_ray_left(lab)
    finally:
        # Power the node on again: Slurm takes it back (ReturnToService=2) for the tests that follow.
        lab.slurm("scancel", job_id)  # only does something when an assertion above failed mid-job
        lab.node_up(node)
        lab.wait_idle(timeout=120)


def test_a_requeued_train_job_continues_its_run(lab, tmp_path):
    """`train --slurm`, then `scontrol requeue` (what a preemption does) between two periodic checkpoints: the job
    saves a checkpoint on SIGTERM if it can before Ray's processes are gone, starts again, and continues the same
    run folder from its latest complete checkpoint."""
    stop, every = 40, 5
    config = tmp_path / "train.yaml"
    config.write_text(tiny_base(stop, 1).replace("experiment: {", f"experiment: {{checkpoint_frequency: {every}, "))
    slurm = tmp_path / "slurm.yaml"
    slurm.write_text(json.dumps({"nodes": 1, "cpus_per_node": 2, "venv": str(VENV), "storage_path": str(tmp_path / "runs"),
                                 "start_timeout_s": 120, "env": {"OMP_NUM_THREADS": "1"}}))
    res = lab.raytrain("train", str(config), "--slurm", str(slurm))
    assert res.returncode == 0, res.stderr[-3000:]
    job_id = res.stdout.strip().splitlines()[-1]
    (run,) = (tmp_path / "runs" / "tiny").iterdir()  # named at submit time: the script and the log are in it
    assert (run / "slurm_job.sh").is_file() and f"run folder: {run}" in res.stderr
    try:
        # Wait for the first periodic checkpoint and an iteration past it, then requeue the running job.
        seen, deadline = 0, time.time() + 600
        while time.time() < deadline:
            lines = (run / "metrics.jsonl").read_text().splitlines() if (run / "metrics.jsonl").exists() else []
            its = [json.loads(line)["training_iteration"] for line in lines[:-1]]  # the last line may be half written
            seen = its[-1] if its else 0
            if (run / "checkpoints" / f"checkpoint_{every:06d}").is_dir() and seen > every:
                break
            assert job_state(lab, job_id)["state"] in ("PENDING", "RUNNING"), log_of(lab, job_id)[-4000:]
            time.sleep(0.5)
        else:
            pytest.fail(f"no checkpoint in time:\n{log_of(lab, job_id)[-4000:]}")
        assert seen < stop, "the run ended before it could be requeued: raise stop"
        requeued = lab.slurm("scontrol", "requeue", job_id)
        assert requeued.returncode == 0, requeued.stderr
        # Slurm holds a requeued job back for a while (its BeginTime, about 2 minutes here) before it may start
        # again; a user would wait, the test lets it start as soon as it is back in the queue.
        deadline = time.time() + 300
        while time.time() < deadline and job_state(lab, job_id)["state"] != "PENDING":
            time.sleep(1)
        now = lab.slurm("scontrol", "update", f"JobId={job_id}", "StartTime=now")
        assert now.returncode == 0, now.stderr
        info = wait_done(lab, job_id)
    finally:
        lab.slurm("scancel", job_id)  # only does something when the test failed mid-job
    log = log_of(lab, job_id)
    assert info["state"] == "COMPLETED" and info["exit_code"] == "0:0" and info["restarts"] == "1", (info, log[-4000:])
    # The first run of the job (up to the requeue and the driver's end) is what these two lines are about: a
    # failure shows that part of the log, not the requeued run's iterations at its end.
    first_run = log.partition("(restart 1)")[0]
    assert f"raytrain: a new run in {run}" in first_run, first_run[-4000:]
    assert "interrupted: saving a checkpoint" in first_run, first_run[-4000:]
    first, sep, second = log.partition(f"raytrain: {run} holds checkpoint_")
    assert sep, f"the requeued job did not continue the run:\n{log[-4000:]}"
    resumed_from = int(second[:6])
    before = [int(m) for m in re.findall(r"^iter +(\d+) \|", first, re.M)]
    after = [int(m) for m in re.findall(r"^iter +(\d+) \|", second, re.M)]
    assert before == list(range(1, len(before) + 1)) and before[-1] >= seen > every, (seen, before)
    # A requeue signals the driver and Ray's processes at once (README). When the driver finishes first, SIGTERM
    # saved a checkpoint of the last iteration done (past the periodic one; at most one iteration, cut short by
    # the signal, is done again). When Ray's node went first, Ray ended the driver (2 of 6 runs on a slow host,
    # before raytrain's algorithms kept no object in the node's store), and that checkpoint was left .partial and
    # the job went on from the periodic one. A driver cut short in its save still ends so.
    cut_short = run / "checkpoints" / f"checkpoint_{before[-1]:06d}.partial"
    if resumed_from < before[-1]:
        assert cut_short.is_dir() and resumed_from == before[-1] // every * every, (seen, before, resumed_from)
    else:
        assert resumed_from >= max(seen, before[-1]), (seen, before, resumed_from)
    # Either way the run went on from exactly there to the end.
    assert after == list(range(resumed_from + 1, stop + 1)), after
    # The same run folder, recorded as a resume: one run, every iteration once, the last checkpoint at `stop`.
    assert [p.name for p in (tmp_path / "runs" / "tiny").iterdir()] == [run.name]
    rows_ = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["training_iteration"] for r in rows_] == list(range(1, stop + 1))
    commands = [line for line in (run / "command.txt").read_text().splitlines() if not line.startswith("#")]
    assert len(commands) == 2 and f"--resume {run}" in commands[1], commands
    assert (run / "config.1.yaml").is_file() and json.loads((run / "run.json").read_text())["status"] == "finished"
    assert (run / "checkpoints" / f"checkpoint_{stop:06d}").is_dir()
    assert not (run / ".ray_auth_token").exists()
    no_ray_left(lab)

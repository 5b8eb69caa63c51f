"""`raytrain tune` and `tune resume|status|plot`: every config or usage error exits 2 before Ray starts, with
nothing written, and the experiment folder never leaves checkpoint.storage_path."""

import contextlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from raytrain.cli import app
from raytrain.training import RayCpus

from ..mounts import needs_mount_namespace, read_only, run_with_mounts
from .ray_starts import refuse_ray_starts

BASE = """
experiment: {name: base, seed: 1}
environment: {env: CartPole-v1}
env_runners: {num_env_runners: 0}
training: {train_batch_size: 400, minibatch_size: 100, lr: 0.001}
stop: {training_iteration: 5}
"""


def invoke(*args: str):
    return CliRunner().invoke(app, list(args))


_RAY_STARTS: list[str] = []


@pytest.fixture(autouse=True)
def _record_ray_starts(monkeypatch):
    """Record every attempt to start or join Ray (see ray_starts.py)."""
    refuse_ray_starts(monkeypatch, _RAY_STARTS)
    yield
    _RAY_STARTS.clear()


def ray_started() -> bool:
    return bool(_RAY_STARTS)


def listing(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.fixture
def sweep(tmp_path):
    """write(text, storage=...) -> path of a sweep file over a small CartPole base config."""
    (tmp_path / "base.yaml").write_text(BASE)

    def write(text: str, storage: Path | str | None = None) -> Path:
        storage = tmp_path / "results" if storage is None else storage
        path = tmp_path / "sweep.yaml"
        checkpoint = "" if "checkpoint:" in text else f"checkpoint: {{storage_path: {storage}}}\n"
        path.write_text("base: base.yaml\n" + checkpoint + text)
        return path

    return write


BAD_SWEEPS = [
    pytest.param(
        "name: pbt\nsearch: {algorithm: pbt}\npbt: {hyperparam_mutations: {training.lr: [0.001, 0.002]}}\n"
        "checkpoint: {storage_path: STORAGE, num_to_keep: 1}\n",
        "checkpoint.num_to_keep: 1 is too few for PBT",
        id="pbt-num_to_keep-1",
    ),
    pytest.param("name: metric\nsearch: {metric: episode_reward_mean}\n", "search.metric: is a metric PPO never reports", id="unknown-metric"),
    pytest.param(
        "name: rllib\nset: {evaluation.evaluation_interval: 1, evaluation.evaluation_duration: auto}\n",
        "base.yaml (with the sweep's `set:` and `stop:`): `evaluation_duration=auto` not supported",
        id="rllib-rejects-base",
    ),
    pytest.param(
        "name: rllib_trial\nset: {evaluation.evaluation_interval: 1}\n"
        "space: {evaluation.evaluation_duration: {distribution: choice, values: [2, auto]}}\n",
        "space.evaluation.evaluation_duration: with evaluation.evaluation_duration = 'auto' RLlib rejects a trial's config",
        id="rllib-rejects-a-trial",
    ),
    pytest.param(
        "name: q\nspace:\n  training.lr: {distribution: quniform, low: 0.001, high: 0.01, q: 0.003}\n",
        "sweep.yaml:5: space.training.lr: Ray Tune rejects it: Your lower variable bound 0.001 is not divisible",
        id="tune-rejects-a-domain",
    ),
    pytest.param(
        # Ray refuses an empty bundle in a placement group; Tune's controller then failed with a KeyError.
        "name: zero\nset: {env_runners.num_env_runners: 1, env_runners.num_cpus_per_env_runner: 0}\n",
        "sweep.yaml:4: env_runners.num_cpus_per_env_runner: each env runner actor reserves no CPU, GPU or custom "
        "resource, and Ray refuses such a bundle in a trial's placement group: give it a share of a CPU (such as 0.1)",
        id="env-runner-reserves-nothing",
    ),
    pytest.param(
        "name: zero_main\nset: {resources.num_cpus_for_main_process: 0, learners.num_cpus_per_learner: 0}\n",
        "resources.num_cpus_for_main_process: the trial's main process (with its local learner) reserves no CPU",
        id="main-process-reserves-nothing",
    ),
    pytest.param(
        "name: zero_trial\nset: {env_runners.num_env_runners: 1}\n"
        "space: {env_runners.num_cpus_per_env_runner: {distribution: choice, values: [0.5, 0]}}\n",
        "sweep.yaml:5: space.env_runners.num_cpus_per_env_runner: with env_runners.num_cpus_per_env_runner = 0 each "
        "env runner actor reserves no CPU",
        id="a-searched-value-reserves-nothing",
    ),
    pytest.param(
        # The trials that fit would run, and the sweep would then wait forever for the others.
        "name: big_trial\nspace: {env_runners.num_env_runners: {distribution: choice, values: [0, 1000]}}\n",
        "sweep.yaml:4: space.env_runners.num_env_runners: with env_runners.num_env_runners = 1000 each trial's "
        "actors (main process and learner, env runners) reserve 1001 CPUs, but a local Ray on this machine has",
        id="a-searched-value-larger-than-the-local-ray",
    ),
]


def test_a_trial_larger_than_the_local_ray_exits_2_before_ray(sweep, tmp_path, monkeypatch):
    """No trial could ever start (Tune would wait forever): refused at the field, before Ray, nothing written."""
    from raytrain.training import local_ray

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    runners = int(local_ray().total)  # with the main process's CPU, one more than the machine has
    path = sweep(f"name: big\nset: {{env_runners.num_env_runners: {runners}}}\n")
    before = listing(tmp_path)
    for dry_run in ([], ["--dry-run"]):
        result = invoke("tune", *dry_run, str(path))
        assert result.exit_code == 2, result.output
        assert (f"sweep.yaml:4: env_runners.num_env_runners: each trial's actors (main process and learner, env "
                f"runners) reserve {runners + 1} CPUs, but a local Ray on this machine has") in result.output
    assert listing(tmp_path) == before
    assert not ray_started()


def test_rllibs_default_env_runners_count_and_are_named(tmp_path):
    """With no env runners set, RLlib's PPO starts 2: a trial then needs 3 CPUs, and the error says why."""
    from raytrain.config.sweep_load import load_sweep
    from raytrain.errors import ConfigError
    from raytrain.training import RayCpus
    from raytrain.tune.build import check_cpus

    (tmp_path / "base.yaml").write_text("environment: {env: CartPole-v1}\n")
    (tmp_path / "sweep.yaml").write_text(f"base: base.yaml\nname: d\ncheckpoint: {{storage_path: {tmp_path / 'r'}}}\n")
    loaded = load_sweep(tmp_path / "sweep.yaml", [], storage="probe")
    check_cpus(loaded, RayCpus("a local Ray on this machine", 3))
    with pytest.raises(ConfigError) as caught:
        check_cpus(loaded, RayCpus("a local Ray on this machine", 2))
    assert str(caught.value).startswith(f"{tmp_path / 'base.yaml'}: env_runners.num_env_runners: ")
    assert "reserve 3 CPUs (unset: RLlib's default is 2), but a local Ray on this machine has 2" in str(caught.value)


def _refusal(tmp_path: Path, base: str, fits: RayCpus, lacks: RayCpus, space: str = "") -> str:
    """The CPU checks' error for a one-trial sweep of the train config `base` (plus a `space:` text) on the Ray
    `lacks`, once the same sweep has passed them on `fits`."""
    from raytrain.config.sweep_load import load_sweep
    from raytrain.errors import ConfigError
    from raytrain.tune.build import check_cpus

    (tmp_path / "base.yaml").write_text(base)
    (tmp_path / "sweep.yaml").write_text(f"base: base.yaml\nname: d\ncheckpoint: {{storage_path: {tmp_path / 'r'}}}\n"
                                         + space)
    loaded = load_sweep(tmp_path / "sweep.yaml", [], storage="probe")
    check_cpus(loaded, fits)
    with pytest.raises(ConfigError) as caught:
        check_cpus(loaded, lacks)
    return str(caught.value)


def test_a_trial_that_asks_for_gpus_the_ray_does_not_have_is_refused_at_the_gpu_field(tmp_path):
    """Tune waited forever for a trial's placement group with a GPU bundle on a Ray without GPUs."""
    said = _refusal(tmp_path, "environment: {env: CartPole-v1}\nenv_runners: {num_env_runners: 1}\n"
                    "learners: {num_gpus_per_learner: 1}\n", RayCpus("a cluster", 4, gpus=1.0),
                    RayCpus("a local Ray on this machine", 4, gpus=0.0))
    assert said == (
        f"{tmp_path / 'base.yaml'}:3: learners.num_gpus_per_learner: each trial's actors (main process and learner, env "
        "runners) reserve 1 GPU, but a local Ray on this machine has 0: lower learners.num_gpus_per_learner (0 trains "
        "on CPUs), or join a cluster that has them (--address, --cluster)")


def test_a_trial_that_asks_for_a_custom_resource_the_ray_lacks_is_refused_at_the_resource(tmp_path):
    """Tune waited forever for a trial's placement group with a `lab_sensor` bundle on a Ray without one."""
    said = _refusal(tmp_path, "environment: {env: CartPole-v1}\nenv_runners:\n  num_env_runners: 1\n"
                    "  custom_resources_per_env_runner: {lab_sensor: 1}\n", RayCpus("a cluster", 4, custom={"lab_sensor": 1.0}),
                    RayCpus("a local Ray on this machine", 4))
    assert said == (
        f"{tmp_path / 'base.yaml'}:4: env_runners.custom_resources_per_env_runner.lab_sensor: each trial's actors (main "
        "process and learner, env runners) reserve 1 of the resource 'lab_sensor', but a local Ray on this machine has "
        "0: remove or lower it, or join a cluster whose nodes have it (--address, --cluster)")


def test_a_strict_placement_the_ray_cannot_make_is_refused_at_the_strategy(tmp_path):
    """STRICT_SPREAD with a trial of 2 bundles on a one-node Ray, or STRICT_PACK with a trial larger than any one
    node: Tune waited forever for the trial's placement group."""
    base = "environment: {env: CartPole-v1}\nenv_runners: {num_env_runners: 1}\nresources: {placement_strategy: %s}\n"
    local = RayCpus("a local Ray on this machine", 4)
    said = _refusal(tmp_path, base % "STRICT_SPREAD", RayCpus("a cluster", 4, per_node=2, nodes=2), local)
    assert said == (
        f"{tmp_path / 'base.yaml'}:3: resources.placement_strategy: STRICT_SPREAD puts each of the 2 bundles of each "
        "trial's actors (main process and learner, env runners) on a node of its own, but a local Ray on this machine "
        "has 1 node: use SPREAD (on other nodes where it can), or join a cluster that has them (--address, --cluster)")
    said = _refusal(tmp_path, base % "STRICT_PACK", local, RayCpus("a cluster", 4, per_node=1, nodes=4))
    assert said.endswith(
        "resources.placement_strategy: STRICT_PACK puts each trial's actors (main process and learner, env runners) on "
        "one node, 2 CPUs, more than one node of a cluster has (1): use PACK (on one node where it can), or join a "
        "cluster that has them (--address, --cluster)")
    # A searched strategy: the range is refused at its line.
    said = _refusal(tmp_path, base % "PACK", RayCpus("a cluster", 4, per_node=2, nodes=2), local,
                    "space:\n  resources.placement_strategy: {distribution: choice, values: [PACK, STRICT_SPREAD]}\n")
    assert said.startswith(f"{tmp_path / 'sweep.yaml'}:5: space.resources.placement_strategy: ")
    assert "STRICT_SPREAD puts each of the 2 bundles" in said


@pytest.mark.parametrize("text, expected", BAD_SWEEPS)
@pytest.mark.parametrize("storage_exists", [False, True])
@pytest.mark.parametrize("dry_run", [False, True])
def test_a_bad_sweep_exits_2_before_ray_and_writes_nothing(sweep, tmp_path, text, expected, storage_exists, dry_run):
    storage = tmp_path / "results"
    if storage_exists:
        (storage / "older").mkdir(parents=True)
        (storage / "older" / "keep.txt").write_text("x")
    path = sweep(text.replace("STORAGE", str(storage)))
    before = listing(tmp_path)
    result = invoke("tune", *(["--dry-run"] if dry_run else []), str(path))
    assert result.exit_code == 2, result.output
    assert expected in result.output
    assert "Traceback" not in result.output
    assert listing(tmp_path) == before, "a refused sweep wrote something"
    assert storage.exists() == storage_exists
    assert not ray_started()


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc")
@pytest.mark.parametrize("dry_run", [True, False])
def test_storage_under_proc_is_refused_by_the_same_probe_in_dry_and_real_runs(sweep, dry_run):
    # As root, os.access() says /proc is writable; creating a file there fails, as the run's own would.
    path = sweep("name: p\n", storage="/proc/raytrain_x/results")
    result = invoke("tune", *(["--dry-run"] if dry_run else []), str(path))
    assert result.exit_code == 2, result.output
    assert f"{path}:2: checkpoint.storage_path: not writable: cannot create a file in /proc" in result.output
    assert not ray_started()


def test_dry_run_creates_nothing_and_prints_the_folder_under_storage(sweep, tmp_path):
    storage = tmp_path / "new" / "results"
    path = sweep("name: fresh\n", storage=storage)
    result = invoke("tune", "--dry-run", str(path))
    assert result.exit_code == 0, result.output
    assert f"# experiment folder: {storage / 'fresh'}\n" in result.output
    assert not (tmp_path / "new").exists()
    # Taken already: the dry run prints the folder the run would move to, as the run does.
    (storage / "fresh").mkdir(parents=True)
    (storage / "fresh" / "raytrain_sweep.json").write_text("{}")
    result = invoke("tune", "--dry-run", str(path))
    assert result.exit_code == 0, result.output
    assert f"# experiment folder: {storage / 'fresh_2'}\n" in result.output
    assert not (storage / "fresh_2").exists()


@pytest.mark.parametrize("name", ["../../x", "..", "a/b", "/tmp/x"])
@pytest.mark.parametrize("how", ["file", "--name"])
def test_a_sweep_name_that_leaves_the_storage_path_is_refused(sweep, tmp_path, name, how):
    quoted = "'" + name + "'"
    path = sweep(f"name: {quoted}\n" if how == "file" else "")
    args = ["tune", "--dry-run", str(path)] + (["--name", name] if how == "--name" else [])
    for extra in ([], ["--dry-run"]):
        before = listing(tmp_path)
        result = invoke(*[a for a in args if a != "--dry-run"], *extra)
        assert result.exit_code == 2, result.output
        where = f"{path}:3: name:" if how == "file" else f"--name {name!r}: must be a single folder name"
        assert where in result.output
        assert listing(tmp_path) == before
    assert not (tmp_path / "x").exists() and not Path("/tmp/x/raytrain_sweep.json").exists()
    assert not ray_started()


def test_an_experiment_folder_that_is_a_symlink_out_of_storage_is_refused(sweep, tmp_path):
    storage = tmp_path / "results"
    storage.mkdir()
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (storage / "linked").symlink_to(outside)
    path = sweep("name: linked\n")
    for dry in ([], ["--dry-run"]):
        result = invoke("tune", *dry, str(path))
        assert result.exit_code == 2, result.output
        assert f"{path}:3: name: the experiment folder {storage / 'linked'} leads outside checkpoint.storage_path" in result.output
    assert listing(outside) == []


def test_probe_writable_checks_by_writing(tmp_path):
    from raytrain.paths import inside, probe_writable

    assert probe_writable(tmp_path / "a" / "b") is None
    assert not (tmp_path / "a").exists(), "the probe must not create the missing levels"
    assert os.listdir(tmp_path) == []
    (tmp_path / "f").write_text("x")
    assert probe_writable(tmp_path / "f" / "sub") == f"not writable: {tmp_path / 'f'} is not a directory"
    if Path("/proc").is_dir():
        assert probe_writable("/proc/raytrain_x").startswith("not writable: cannot create a file in /proc")
    assert inside(tmp_path, tmp_path / "a" / "..") and inside(tmp_path, tmp_path / "a" / "b")
    assert not inside(tmp_path, tmp_path / ".." / "x")


# tune resume / status / plot on folders that are not experiments


def _meta_only_experiment(sweep, tmp_path) -> Path:
    """What a sweep killed before Tune saved any state leaves: raytrain's files, no experiment state."""
    from raytrain.config.sweep_load import load_sweep
    from raytrain.tune.build import plan
    from raytrain.tune.run import _write_meta

    loaded = load_sweep(sweep("name: early\n"))
    return _write_meta(loaded, plan(loaded), ["raytrain", "tune", "sweep.yaml"])


@pytest.mark.parametrize("case", ["missing", "plain-folder", "a-file", "no-tune-state"])
def test_resume_of_a_folder_that_is_not_a_sweep_exits_2_before_ray_writing_nothing(sweep, tmp_path, case):
    if case == "missing":
        target, message = tmp_path / "nope", "no such folder"
    elif case == "plain-folder":
        target, message = tmp_path / "plain", "is not a raytrain experiment folder (no raytrain_sweep.json)"
        target.mkdir()
        (target / "x.txt").write_text("x")
    elif case == "a-file":
        target, message = tmp_path / "base.yaml", "base.yaml is a file; give the experiment folder"  # was "no such folder"
        (tmp_path / "base.yaml").write_text(BASE)
    else:
        target, message = _meta_only_experiment(sweep, tmp_path), "has no Tune experiment state to resume from"
    before = listing(tmp_path)
    command_txt = (target / "command.txt").read_text() if (target / "command.txt").is_file() else None
    result = invoke("tune", "resume", str(target))
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output
    assert listing(tmp_path) == before
    if command_txt is not None:
        assert (target / "command.txt").read_text() == command_txt
    assert not ray_started()


@pytest.mark.parametrize("command", ["status", "plot"])
def test_status_and_plot_of_a_folder_that_is_not_a_sweep_exit_2(tmp_path, command):
    (tmp_path / "plain").mkdir()
    for target in (tmp_path / "plain", tmp_path / "nope"):
        result = invoke("tune", command, str(target))
        assert result.exit_code == 2, result.output
        assert str(target) in result.output and "Traceback" not in result.output
    assert listing(tmp_path) == ["plain"]


def test_resume_checks_the_experiments_base_config_before_ray(sweep, tmp_path):
    """An experiment whose recorded base config RLlib now rejects: exit 2 naming raytrain_sweep.json."""
    import json

    exp = _meta_only_experiment(sweep, tmp_path)
    meta = json.loads((exp / "raytrain_sweep.json").read_text())
    meta["base"]["evaluation"] = {"evaluation_interval": 1, "evaluation_duration": "auto"}
    (exp / "raytrain_sweep.json").write_text(json.dumps(meta))
    (exp / "tuner.pkl").write_bytes(b"")  # what Tuner.can_restore looks for
    before = listing(tmp_path)
    result = invoke("tune", "resume", str(exp))
    assert result.exit_code == 2, result.output
    assert f"{exp / 'raytrain_sweep.json'}: base: RLlib rejects the experiment's base config" in result.output
    assert listing(tmp_path) == before
    assert not ray_started()


def test_status_and_plot_take_a_relative_folder(sweep, tmp_path, monkeypatch):
    exp = _meta_only_experiment(sweep, tmp_path)
    monkeypatch.chdir(tmp_path)
    relative = os.path.relpath(exp, tmp_path)
    result = invoke("tune", "status", relative, "--json")
    assert result.exit_code == 0, result.output
    assert '"name": "early"' in result.output
    result = invoke("tune", "plot", relative)
    assert result.exit_code == 0, result.output
    assert str(exp / "plots" / "metric_per_trial.png") in result.output
    assert (exp / "plots" / "metric_per_trial.png").is_file()


def test_submit_checks_the_sweep_with_rllib_before_anything_reaches_the_cluster(sweep, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    cluster = tmp_path / "c.yaml"
    cluster.write_text("name: lab\nhead: {host: m10, address: 10.0.0.10}\nvenv: /opt/raytrain\nstorage: {path: /nfsroot/raytrain}\n")
    path = sweep("name: rllib\nset: {evaluation.evaluation_interval: 1, evaluation.evaluation_duration: auto}\n")
    before = listing(tmp_path)
    result = invoke("tune", str(path), "--cluster", str(cluster), "--submit", "--dry-run")
    assert result.exit_code == 2, result.output
    assert "RLlib rejects the base config" in result.output
    assert listing(tmp_path) == before
    assert not ray_started()


def test_a_storage_path_with_dotdot_is_refused(sweep, tmp_path):
    path = sweep("name: n\n", storage=f"{tmp_path}/a/../results")
    result = invoke("tune", "--dry-run", str(path))
    assert result.exit_code == 2, result.output
    assert f"{path}:2: checkpoint.storage_path: '{tmp_path}/a/../results' contains '..'" in result.output
    assert not (tmp_path / "a").exists()


def test_the_free_name_a_sweep_moves_to_is_checked_too(sweep, tmp_path):
    storage = tmp_path / "results"
    (storage / "n").mkdir(parents=True)
    (storage / "n" / "raytrain_sweep.json").write_text("{}")
    (tmp_path / "elsewhere").mkdir()
    (storage / "n_2").symlink_to(tmp_path / "elsewhere")
    path = sweep("name: n\n")
    result = invoke("tune", "--dry-run", str(path))
    assert result.exit_code == 2, result.output
    assert f"the experiment folder {storage / 'n_2'} leads outside checkpoint.storage_path" in result.output


def test_resume_of_trials_larger_than_the_local_ray_exits_2_before_ray(sweep, tmp_path, monkeypatch):
    """A sweep resumed on a smaller machine than it started on: its trials would stay PENDING forever."""
    import json

    from raytrain.training import RayCpus, local_ray
    from raytrain.tune.run import check_resume

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    exp = _meta_only_experiment(sweep, tmp_path)
    runners = int(local_ray().total)  # with the main process's CPU, one more than the machine has
    meta = json.loads((exp / "raytrain_sweep.json").read_text())
    meta["base"]["env_runners"]["num_env_runners"] = runners
    (exp / "raytrain_sweep.json").write_text(json.dumps(meta))
    (exp / "tuner.pkl").write_bytes(b"")  # what Tuner.can_restore looks for
    # Tune's state with a trial to continue (without one, the sweep never started: nothing to resume).
    paused = [[json.dumps({"relative_logdir": "early_00000", "trial_id": "00000", "status": "PAUSED"}), "{}"]]
    (exp / "experiment_state-2026-11-27_12-00-00.json").write_text(json.dumps({"trial_data": paused}))
    before = listing(tmp_path)
    command_txt = (exp / "command.txt").read_text()
    result = invoke("tune", "resume", str(exp))
    assert result.exit_code == 2, result.output
    assert (f"{exp / 'raytrain_sweep.json'}: base.env_runners.num_env_runners: each trial's actors (main process "
            f"and learner, env runners) reserve {runners + 1} CPUs, but a local Ray on this machine has "
            f"{local_ray().total:g}: resume it on a Ray that has them (--address, --cluster)") in result.output
    assert "Traceback" not in result.output
    assert listing(tmp_path) == before
    assert (exp / "command.txt").read_text() == command_txt
    assert not ray_started()
    # A Ray that holds them (a cluster named with --address / --cluster is not checked before it is joined).
    resumable = check_resume(exp)
    assert resumable.exp_dir == exp
    resumable.check_cpus(RayCpus("a cluster", runners + 1))


def test_resume_of_a_cut_short_experiment_state_without_a_copy_exits_2_before_ray(sweep, tmp_path):
    """Tune's experiment state emptied by a kill during its copy, and no complete copy: Tune would start over."""
    exp = _meta_only_experiment(sweep, tmp_path)
    (exp / "tuner.pkl").write_bytes(b"")  # what Tuner.can_restore looks for
    state_file = exp / "experiment_state-2026-11-25_12-00-00.json"
    state_file.write_text('{"trial_data": [["{\\"trial_id')  # cut short
    before = listing(tmp_path)
    result = invoke("tune", "resume", str(exp))
    assert result.exit_code == 2, result.output
    assert f"{state_file} is empty or cut short" in result.output and "no complete copy" in result.output
    assert "Traceback" not in result.output
    assert listing(tmp_path) == before
    assert not ray_started()


def test_resume_of_a_sweep_stopped_before_tune_saved_its_state_exits_2_before_ray(sweep, tmp_path):
    """tuner.pkl written, no experiment_state-*.json (the driver died at the start, as the Optuna sweep of
    configs/ that Tune refused did): resume started Ray and failed with RuntimeError `no search space has been
    defined` (Optuna), or started the sweep over."""
    exp = _meta_only_experiment(sweep, tmp_path)
    (exp / "tuner.pkl").write_bytes(b"")  # what Tuner.can_restore looks for
    before = listing(tmp_path)
    result = invoke("tune", "resume", str(exp))
    assert result.exit_code == 2, result.output
    assert (f"{exp} has no Tune experiment state to resume from (no experiment_state-*.json): the sweep stopped "
            "before its trials started") in result.output
    assert "Traceback" not in result.output
    assert listing(tmp_path) == before
    assert not ray_started()


def test_status_reads_the_complete_copy_of_a_cut_short_experiment_state(sweep, tmp_path):
    import json

    from raytrain.tune import state

    exp = _meta_only_experiment(sweep, tmp_path)
    state_file = exp / "experiment_state-2026-11-25_12-00-00.json"
    whole = {"trial_data": [[json.dumps({"relative_logdir": "early_00000", "trial_id": "00000", "status": "PAUSED"}), "{}"]]}
    state_file.with_name(state_file.name + ".complete").write_text(json.dumps(whole))
    state_file.write_text("")
    assert state.read(exp) == whole and state.broken(exp) == (state_file, True)
    result = invoke("tune", "status", str(exp), "--json")
    assert result.exit_code == 0, result.output
    # The copy is put back (atomically) only by a resume, and only over a broken file.
    assert state.repair(exp) == state_file and json.loads(state_file.read_text()) == whole
    assert state.broken(exp) is None and state.repair(exp) is None


def test_status_of_a_sweep_with_no_trial_yet_says_so(sweep, tmp_path):
    """It printed the leaderboard's header over no row, saying nothing."""
    exp = _meta_only_experiment(sweep, tmp_path)
    result = invoke("tune", "status", str(exp))
    assert result.exit_code == 0, result.output
    assert (f"no trial of {exp} has started yet: Tune has saved no trial (a sweep starting, or stopped before its "
            "first trial)") in " ".join(result.output.split())


def _experiment_with_trials(sweep, statuses: list[str], done: list[bool] | None = None) -> Path:
    """A sweep of a grid of 2 trials, with Tune's state holding a trial of each status given; with `done`, each
    trial's last result and whether Tune marked it done (as its stop criteria do, and the time budget does not)."""
    import json

    from raytrain.config.sweep_load import load_sweep
    from raytrain.tune.build import plan
    from raytrain.tune.run import _write_meta

    loaded = load_sweep(sweep("name: done\nspace: {training.lr: {distribution: grid, values: [0.001, 0.002]}}\n"))
    exp = _write_meta(loaded, plan(loaded), ["raytrain", "tune", "sweep.yaml"])
    (exp / "tuner.pkl").write_bytes(b"")  # what Tuner.can_restore looks for
    runtimes = ["{}"] * len(statuses) if done is None else [
        json.dumps({"last_result": {"training_iteration": 3, "done": d}}) for d in done]
    trials = [[json.dumps({"relative_logdir": f"done_0000{i}", "trial_id": f"0000{i}", "status": status}), runtime]
              for i, (status, runtime) in enumerate(zip(statuses, runtimes, strict=True))]
    (exp / "experiment_state-2026-11-27_12-00-00.json").write_text(json.dumps({"trial_data": trials}))
    return exp


def test_the_trials_a_signal_ended_are_told_from_the_states_before_and_after_it(tmp_path):
    """The signal watch's check after Tune's own save (a SIGTERM to every process): which trials have ended since the
    state saved before the signal. A trial Tune saw die to the signal is ERROR there, and `--restart-errored` would
    start it over from scratch; one that had ended before, or that the earlier state did not list, is left as it is."""
    import json

    from raytrain.tune import state

    exp = tmp_path / "exp"
    exp.mkdir()

    def saved(name: str, statuses: dict[str, str]) -> dict[str, str]:
        trials = [[json.dumps({"trial_id": trial, "status": status}), "{}"] for trial, status in statuses.items()]
        (exp / f"experiment_state-2026-12-03_0{name}.json").write_text(json.dumps({"trial_data": trials}))
        os.utime(exp / f"experiment_state-2026-12-03_0{name}.json", (int(name), int(name)))
        return state.statuses(exp)

    assert state.statuses(exp) == {}
    before = saved("1", {"a": "RUNNING", "b": "PAUSED", "c": "TERMINATED", "d": "ERROR", "e": "RUNNING"})
    assert before == {"a": "RUNNING", "b": "PAUSED", "c": "TERMINATED", "d": "ERROR", "e": "RUNNING"}
    after = saved("2", {"a": "ERROR", "b": "TERMINATED", "c": "TERMINATED", "d": "ERROR", "e": "RUNNING", "f": "ERROR"})
    assert after["a"] == "ERROR" and after["f"] == "ERROR"  # the newest state is read
    assert state.ended_since(before, after) == ["a", "b"]
    assert state.ended_since({}, after) == [] and state.ended_since(before, before) == []


def test_a_resume_forgets_the_decisions_tune_saved_for_saves_in_flight(tmp_path):
    """Tune 2.60 saves its controller's decisions that wait on a trial's save in flight (`runner_data`); a trial whose
    actor died while saving had STOP there, and the resumed controller ended that trial after its first iteration
    (TERMINATED, as if it had reached its stop). The resume drops them from the newest state, and only them."""
    import json

    from raytrain.tune import state

    exp = tmp_path / "exp"
    exp.mkdir()
    assert state.forget_pending_decisions(exp) == {}  # no state: nothing to do
    runner = {"_iteration": 61, "_earliest_stopping_actor": float("inf"), "_has_errored": True,
              "_cached_trial_decisions": {"a": "STOP"}, "_queued_trial_decisions": {"b": "PAUSE"}}
    older = exp / "experiment_state-2026-12-06_01-00-00.json"
    older.write_text(json.dumps({"trial_data": [], "runner_data": dict(runner)}))
    newest = exp / "experiment_state-2026-12-06_02-00-00.json"
    newest.write_text(json.dumps({"trial_data": [[json.dumps({"trial_id": "a", "status": "ERROR"}), "{}"]],
                                  "runner_data": runner}))
    older_text = older.read_text()
    assert state.forget_pending_decisions(exp) == {"a": "STOP", "b": "PAUSE"}
    kept = json.loads(newest.read_text())
    assert kept["runner_data"] == {**runner, "_cached_trial_decisions": {}, "_queued_trial_decisions": {}}
    assert state.statuses(exp) == {"a": "ERROR"} and older.read_text() == older_text
    mtime = newest.stat().st_mtime_ns
    assert state.forget_pending_decisions(exp) == {} and newest.stat().st_mtime_ns == mtime  # none left: not written


def test_resume_of_a_sweep_whose_trials_all_finished_starts_nothing(sweep, tmp_path):
    """Tune would start Ray, restore the experiment, run nothing and write new state files (6.6 s for a 2-trial sweep)."""
    exp = _experiment_with_trials(sweep, ["TERMINATED", "TERMINATED"])
    before = listing(tmp_path)
    command_txt = (exp / "command.txt").read_text()
    result = invoke("tune", "resume", str(exp))
    assert result.exit_code == 0, result.output
    assert "every trial of done has finished (2 TERMINATED): nothing to resume, so nothing was started or changed" in result.output
    assert "ranked on" in result.output  # the leaderboard, as `tune status` shows it
    assert listing(tmp_path) == before
    assert (exp / "command.txt").read_text() == command_txt
    assert not ray_started()


@pytest.mark.parametrize("statuses", [["TERMINATED"], ["TERMINATED", "PAUSED"], ["TERMINATED", "ERROR"], []])
def test_a_sweep_with_work_left_is_resumed(sweep, tmp_path, statuses):
    """A trial not yet made (the grid's second), paused or errored (retried) leaves work for Tune."""
    from raytrain.tune.run import check_resume

    assert check_resume(_experiment_with_trials(sweep, statuses)).finished is None


@pytest.mark.parametrize(("statuses", "done", "cut"), [
    (["TERMINATED", "TERMINATED"], [True, False], ["00001"]),  # one met its stop criteria, the budget stopped one
    (["TERMINATED", "PAUSED"], [False, False], ["00000"]),  # and left one paused (Tune's stop can, with PBT)
    (["TERMINATED", "TERMINATED"], [True, True], []),  # both met their stop criteria
    (["RUNNING", "PAUSED"], [False, False], []),  # Ctrl-C or SIGTERM: Tune saves the trials as they were
    (["TERMINATED", "ERROR"], [True, False], []),
])
def test_the_trials_the_time_budget_stopped_are_terminated_without_a_done_result(sweep, tmp_path, statuses, done, cut):
    """Tune marks a trial's last result done when its stop criteria or its scheduler stop it; the stop of the whole
    experiment at its time budget marks the trials TERMINATED alone."""
    from raytrain.tune import state

    assert state.cut_by_the_budget(_experiment_with_trials(sweep, statuses, done)) == cut


@pytest.mark.parametrize("statuses", [["TERMINATED", "TERMINATED"], ["TERMINATED", "PAUSED"]])
def test_resume_of_a_sweep_whose_time_budget_ran_out_starts_nothing(sweep, tmp_path, statuses):
    """Tune keeps the spent budget in its state (its TimeoutStopper): a resume started Ray and the trials, which Tune
    stopped at once, and exit 0 said nothing of the budget (the shipped PBT sweep, 8 trials on 2 CPUs, 600 s: 29 s for
    nothing). A new sweep of the name is told the folder holds a finished experiment."""
    exp = _experiment_with_trials(sweep, statuses, [False, False])
    before = listing(tmp_path)
    command_txt = (exp / "command.txt").read_text()
    result = invoke("tune", "resume", str(exp))
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert ("warning: done ended when its time budget (time_budget_s) ran out, and Tune keeps the spent budget in its "
            "state: a resume would stop its trials at once, so nothing was started or changed. To search further, run "
            "the sweep again with a larger time_budget_s (raytrain tune SWEEP_FILE --set time_budget_s=SECONDS --name "
            "NEW_NAME)") in said, result.output
    assert "ranked on" in result.output  # the leaderboard, as `tune status` shows it
    assert listing(tmp_path) == before
    assert (exp / "command.txt").read_text() == command_txt
    assert not ray_started()
    moved = invoke("tune", "--dry-run", str(tmp_path / "sweep.yaml"))
    assert moved.exit_code == 0, moved.output
    assert (f"notice: {exp} already holds a finished experiment (its leaderboard: `raytrain tune status {exp}`); this "
            f"sweep goes to {exp}_2") in " ".join(moved.output.split())


@pytest.mark.parametrize(("statuses", "said"), [
    (["TERMINATED", "TERMINATED"], "a finished experiment (its leaderboard: `raytrain tune status {exp}`)"),
    (["TERMINATED", "PAUSED"], "an experiment (continue it with `raytrain tune resume {exp}`)"),
])
def test_a_sweep_moved_to_a_free_name_says_what_the_taken_one_holds(sweep, tmp_path, statuses, said):
    """A finished experiment has nothing to resume: the notice named `tune resume` for it too."""
    exp = _experiment_with_trials(sweep, statuses)
    result = invoke("tune", "--dry-run", str(tmp_path / "sweep.yaml"))
    assert result.exit_code == 0, result.output
    assert f"notice: {exp} already holds {said.format(exp=exp)}; this sweep goes to {exp}_2" in result.output


@pytest.mark.parametrize("command", ["status", "plot", "resume"])
def test_a_storage_path_given_for_an_experiment_names_its_sweeps(tmp_path, command):
    """`raytrain tune status ~/raytrain_results` (one level too high) names the sweeps there and the newest."""
    import os

    for name, stamp in (("cartpole_pbt", 2_000_000), ("cartpole_pbt_2", 3_000_000), ("cartpole_asha", 1_000_000)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "raytrain_sweep.json").write_text("{}")
        os.utime(tmp_path / name, (stamp, stamp))
    (tmp_path / "ppo_cartpole" / "2026-01-01_00-00-00").mkdir(parents=True)
    (tmp_path / "ppo_cartpole" / "2026-01-01_00-00-00" / "config.yaml").write_text("x: 1\n")
    before = listing(tmp_path)
    result = invoke("tune", command, str(tmp_path))
    assert result.exit_code == 2, result.output
    assert (f"{tmp_path} is a storage path of 3 sweeps: cartpole_asha, cartpole_pbt, cartpole_pbt_2 (and 1 "
            f"experiment of `raytrain train`): give one, the newest being {tmp_path / 'cartpole_pbt_2'}") in " ".join(result.output.split())
    assert listing(tmp_path) == before
    assert not ray_started()


@pytest.mark.parametrize("command", ["status", "plot", "resume"])
def test_a_sweep_file_given_for_its_experiment_names_the_newest(sweep, tmp_path, command):
    """`raytrain tune status sweep.yaml` said "no such folder" of a file that exists."""
    import os

    path = sweep("name: pbtx\n")
    results = tmp_path / "results"
    for name, stamp in (("pbtx", 1_000_000), ("pbtx_2", 2_000_000), ("pbtxy", 3_000_000)):
        (results / name).mkdir(parents=True)
        (results / name / "raytrain_sweep.json").write_text("{}")
        os.utime(results / name, (stamp, stamp))
    before = listing(tmp_path)
    result = invoke("tune", command, str(path))
    assert result.exit_code == 2, result.output
    assert (f"{path} is a sweep file, not its experiment folder: the newest experiment of this sweep is "
            f"{results / 'pbtx_2'}\n") in " ".join(result.output.split(" "))
    assert listing(tmp_path) == before
    fresh = sweep("name: never\n")
    result = invoke("tune", command, str(fresh))
    assert result.exit_code == 2, result.output
    assert (f"{fresh} is a sweep file, not its experiment folder: it has no experiment in {results} yet "
            f"(`raytrain tune {fresh}`)") in " ".join(result.output.split())
    assert not ray_started()


@pytest.mark.parametrize("name", ["2024", "yes", "1e3", "null"])
def test_tune_name_takes_any_folder_name_as_text(sweep, tmp_path, name):
    """`--name 2024` was read as YAML, the number 2024, and refused: "name: Input should be a valid string"."""
    result = invoke("tune", str(sweep("")), "--name", name, "--dry-run")
    assert result.exit_code == 0, result.output
    assert f"# experiment folder: {tmp_path / 'results' / name}" in result.output
    assert not ray_started()


@pytest.mark.parametrize("name", ["a b", "../x", "x/y", ""])
def test_tune_name_that_is_no_folder_name_is_refused_as_the_flag_given(sweep, name):
    """`--name ""` was ignored by a local sweep (it ran under the file's name) but refused with --slurm and
    --submit; it is refused the same way everywhere."""
    result = invoke("tune", str(sweep("")), "--name", name, "--dry-run")
    assert result.exit_code == 2, result.output
    said = ("Invalid value for --name: empty: give a value, or leave --name out" if name == ""  # as every empty flag
            else f"--name {name!r}: must be a single folder name")
    assert said in result.output and "--set" not in result.output
    assert not ray_started()


def test_of_two_drivers_that_chose_one_folder_at_once_only_the_first_goes_on(tmp_path):
    """Two `raytrain tune` of one file started together both find its name free; the folder is claimed (O_EXCL)
    before anything is written into it, so the second stops with nothing written there. A dead driver's record
    is replaced."""
    import json
    import subprocess
    import sys

    from raytrain.errors import SweepError
    from raytrain.tune.run import DRIVER_FILE, _driving

    exp = tmp_path / "results" / "same"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\nfrom pathlib import Path\nfrom raytrain.tune.run import _driving\n"
         "with _driving(Path(sys.argv[1])):\n    print('held', flush=True)\n    time.sleep(60)\n", str(exp)],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        before = sorted(p.name for p in exp.iterdir())
        with pytest.raises(SweepError, match=rf"is taken by another driver, process {holder.pid} \(since .*\), that "
                                             "chose it at the same time: run the sweep again"):
            with _driving(exp):
                (exp / "written.txt").write_text("x")
        assert sorted(p.name for p in exp.iterdir()) == before == [DRIVER_FILE]
    finally:
        holder.kill()
        holder.wait()
    # Its driver died without removing the record (kill -9): the next one takes the folder.
    assert json.loads((exp / DRIVER_FILE).read_text())["pid"] == holder.pid
    with _driving(exp):
        assert json.loads((exp / DRIVER_FILE).read_text())["pid"] == os.getpid()
    assert not (exp / DRIVER_FILE).exists()


PERTURBED = """search: {algorithm: pbt, num_samples: 4}
pbt:
  perturbation_interval: 2
  hyperparam_mutations:
    training.lr: {distribution: loguniform, low: 1.0e-4, high: 1.0e-3}
    %s
"""


@pytest.mark.parametrize("mutation, expected", [
    # Failed at the first exploit, after Ray started: `RuntimeError: Error(s) in loading state_dict for
    # DefaultPPOTorchRLModule: size mismatch for encoder.actor_encoder.net.mlp.0.weight ...`, exit 1.
    ("model.fcnet_hiddens: {distribution: choice, values: [[32], [64, 64]]}",
     "sweep.yaml:8: pbt.hyperparam_mutations.model.fcnet_hiddens: PBT perturbs it, but its values build networks of "
     "other shapes (encoder.encoder.net.mlp.0.bias: [32] with [32], [64] with [64, 64]): an exploit loads the "
     "stronger trial's weights into the perturbed config, and they would not fit; search it under space: instead (an "
     "exploit copies the stronger trial's value with its weights), and perturb settings that keep the network "
     "(training.lr, training.clip_param, ...)"),
    ("model.vf_share_layers: {distribution: choice, values: [false, true]}",
     "sweep.yaml:8: pbt.hyperparam_mutations.model.vf_share_layers: PBT perturbs it, but its values build networks"),
])
def test_a_pbt_mutation_that_changes_the_network_exits_2_before_ray(sweep, tmp_path, mutation, expected):
    path = sweep(PERTURBED % mutation)
    before = listing(tmp_path)
    result = invoke("tune", str(path))
    output = " ".join(result.output.split())
    assert result.exit_code == 2, result.output
    assert f"error: {tmp_path / expected}" in output, output
    assert listing(tmp_path) == before and not ray_started()


def test_a_pbt_mutation_that_keeps_the_network_and_a_searched_network_pass(sweep):
    # Activations have no weights; a value of `space:` is copied with the weights at an exploit.
    path = sweep(PERTURBED % "model.fcnet_activation: {distribution: choice, values: [tanh, relu]}"
                 + "space:\n  model.fcnet_hiddens: {distribution: choice, values: [[32], [64, 64]]}\n")
    result = invoke("tune", "--dry-run", str(path))
    assert result.exit_code == 0, result.output


def test_a_pbt_mutation_with_the_base_configs_own_network_among_its_values_exits_2(sweep, tmp_path):
    """[64, 64] is the base config's own value: it was skipped, and with one other value nothing was compared."""
    (tmp_path / "base.yaml").write_text(BASE + "model: {fcnet_hiddens: [64, 64]}\n")
    path = sweep(PERTURBED % "model.fcnet_hiddens: {distribution: choice, values: [[32], [64, 64]]}")
    result = invoke("tune", "--dry-run", str(path))
    assert result.exit_code == 2, result.output
    assert "pbt.hyperparam_mutations.model.fcnet_hiddens: PBT perturbs it" in " ".join(result.output.split())


@pytest.mark.parametrize("command", ["resume", "status", "plot"])
def test_a_run_folder_or_a_trial_given_for_an_experiment_names_what_takes_it(tmp_path, command):
    """They said only "is not a raytrain experiment folder (no raytrain_sweep.json)"."""
    run = tmp_path / "runs" / "cartpole" / "2026-11-29_03-32-48"
    (run / "checkpoints" / "checkpoint_000004").mkdir(parents=True)
    (run / "config.yaml").write_text("{}\n")
    (run / "checkpoints" / "checkpoint_000004" / "raytrain_state.json").write_text("{}\n")
    exp = tmp_path / "results" / "pbt"
    (exp / "pbt_1a2b3_00001" / "checkpoint_000003").mkdir(parents=True)
    (exp / "raytrain_sweep.json").write_text("{}\n")
    before = listing(tmp_path)
    said = {}
    for target in (run, run / "checkpoints" / "checkpoint_000004", exp / "pbt_1a2b3_00001",
                   exp / "pbt_1a2b3_00001" / "checkpoint_000003"):
        result = invoke("tune", command, str(target))
        assert result.exit_code == 2, result.output
        said[target] = " ".join(result.output.split())
    for target in (run, run / "checkpoints" / "checkpoint_000004"):
        assert (f"error: {target} is {'a run folder' if target == run else 'a checkpoint of the run'} of `raytrain "
                f"train`{'' if target == run else f' in {run}'}, not a sweep's experiment folder: continue it with "
                f"`raytrain train --resume {run}`") in said[target], said[target]
    for target, what in ((exp / "pbt_1a2b3_00001", "a trial"), (exp / "pbt_1a2b3_00001" / "checkpoint_000003",
                                                                 "a trial's checkpoint")):
        assert f"error: {target} is {what} of the sweep in {exp}: give its experiment folder, {exp}" in said[target], said[target]
    assert listing(tmp_path) == before and not ray_started()


@pytest.mark.parametrize("command", ["resume", "status", "plot"])
def test_a_train_experiment_folder_given_for_a_sweeps_names_its_latest_run(tmp_path, command):
    """It said "is not a raytrain experiment folder (no raytrain_sweep.json)": the folder holds a train config's
    runs, one level above what `train --resume` takes."""
    exp = tmp_path / "runs" / "cartpole"
    for name in ("2026-11-28_10-00-00", "2026-11-29_03-32-48"):
        (exp / name / "checkpoints").mkdir(parents=True)
        (exp / name / "config.yaml").write_text("{}\n")
    before = listing(tmp_path)
    result = invoke("tune", command, str(exp))
    assert result.exit_code == 2, result.output
    assert (f"error: {exp} is an experiment folder of `raytrain train` (2 runs), not a sweep's: continue its latest "
            f"run with `raytrain train --resume {exp / '2026-11-29_03-32-48'}`") in " ".join(result.output.split())
    assert listing(tmp_path) == before and not ray_started()


def test_status_of_a_stopped_sweep_says_it_is_not_running_and_how_to_continue_it(sweep, tmp_path):
    """Its trials showed RUNNING, as Tune saved them when Ctrl-C stopped the sweep, with no word that nothing runs."""
    import json
    import socket
    import subprocess
    import sys

    exp = _experiment_with_trials(sweep, ["RUNNING", "TERMINATED"])
    said = " ".join(invoke("tune", "status", str(exp)).output.split())
    assert (f"the sweep is not running: 1 of 2 trials had not finished (their status is as Tune last saved it); "
            f"continue it with `raytrain tune resume {exp}`") in said, said
    # While its driver runs (a process named like one stands in for it), nothing more is said.
    driver = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "raytrain"])
    try:
        (exp / "driver.json").write_text(json.dumps({"pid": driver.pid, "host": socket.gethostname(), "started": "now"}))
        assert "not running" not in invoke("tune", "status", str(exp)).output
    finally:
        driver.kill()
        driver.wait()


def test_the_rows_after_a_checkpoint_are_split_off_result_json_and_progress_csv(tmp_path):
    """What `tune resume` moves aside with the checkpoints newer than Tune's state: the rows it would write again.
    progress.csv keeps its header in both files; a line cut short by the kill stays where it was."""
    from raytrain.tune.state import _rows_after

    result = tmp_path / "result.json"
    result.write_text("".join(f'{{"training_iteration": {i}, "x": [1, 2]}}\n' for i in range(1, 6)) + '{"training_it')
    kept, later = _rows_after(result, 3)
    assert [line[:25] for line in later] == ['{"training_iteration": 4,', '{"training_iteration": 5,']
    assert len(kept) == 4 and kept[-1] == '{"training_it'
    progress = tmp_path / "progress.csv"
    progress.write_text('a,training_iteration,config/x\n1,1,"[1, 2]"\n1,2,"a,b"\n1,3,x\n')
    kept, later = _rows_after(progress, 1)
    assert kept == ["a,training_iteration,config/x\n", '1,1,"[1, 2]"\n'] and later == ['1,2,"a,b"\n', "1,3,x\n"]
    assert _rows_after(tmp_path / "missing.csv", 1) == ([], [])


HOLDS = ("import sys, time\nfrom pathlib import Path\nfrom raytrain.paths import hold_folder\n"
         "assert hold_folder(Path(sys.argv[1]))\nprint('held', flush=True)\ntime.sleep(60)")


@contextlib.contextmanager
def held_by_another_process(folder: Path):
    """`folder` held (`hold_folder`) by a process of its own, as a driver that has just started holds it."""
    holder = subprocess.Popen([sys.executable, "-c", HOLDS, str(folder)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        yield
    finally:
        holder.kill()
        holder.wait()


def test_resume_of_a_sweep_another_process_has_just_started_exits_2_before_ray(sweep, tmp_path):
    """Its driver.json comes seconds after its start: a second `tune resume` within them started Ray, appended to
    command.txt, and failed (exit 1) advising a new sweep's remedy."""
    exp = _experiment_with_trials(sweep, ["TERMINATED", "PAUSED"])
    before = {p: p.read_bytes() for p in exp.rglob("*") if p.is_file()}
    with held_by_another_process(exp):
        result = invoke("tune", "resume", str(exp))
    assert result.exit_code == 2, result.output
    assert (f"{exp} is being run right now, by another raytrain process of this machine, which holds the folder (it "
            "started moments ago)") in " ".join(result.output.split())
    assert {p: p.read_bytes() for p in exp.rglob("*") if p.is_file()} == before
    assert not ray_started()


def test_a_new_sweep_takes_the_next_name_where_another_process_is_starting_one(sweep, tmp_path):
    """Two sweeps of one name started together both found the name free; the second started Ray and failed (exit 1),
    told to resume the first, once that had written its state."""
    from raytrain.config.sweep_load import load_sweep

    path = sweep("name: same\nspace: {training.lr: {distribution: choice, values: [0.001]}}\n")
    first = tmp_path / "results" / "same"
    first.mkdir(parents=True)
    with held_by_another_process(first):
        loaded = load_sweep(path)
        assert loaded.take_free_name() is None  # a dry run: nothing made, nothing held
        said = loaded.take_free_name(hold=True)
    assert said == (f"notice: {first} already holds a sweep another raytrain process is starting now; this sweep goes "
                    f"to {tmp_path / 'results' / 'same_2'}")
    assert loaded.experiment_dir == tmp_path / "results" / "same_2" and loaded.experiment_dir.is_dir()
    assert load_sweep(path).take_free_name(hold=True) is None  # free again once its process ended


@needs_mount_namespace
def test_resume_of_a_sweep_in_a_read_only_folder_exits_2_before_ray(sweep, tmp_path):
    """It started Ray and failed writing command.txt (exit 1); `train --resume` said it before Ray."""
    exp = _experiment_with_trials(sweep, ["TERMINATED", "PAUSED"])
    done = run_with_mounts(read_only(exp), [sys.executable, "-m", "raytrain", "tune", "resume", str(exp)], timeout=300)
    assert done.returncode == 2, done.stderr[-3000:]
    assert f"cannot resume in {exp}: not writable: cannot create a file in {exp} (Read-only file system)" in \
        " ".join(done.stderr.split()), done.stderr[-3000:]


@pytest.mark.parametrize("text", ["", "{", "[1]"])
def test_status_and_plot_of_a_sweep_with_a_damaged_params_json_show_every_trial(sweep, tmp_path, text):
    """It failed `tune status`, `tune plot` and a finished sweep's `resume` with JSONDecodeError, exit 1, no file named,
    and hid the whole leaderboard."""
    import json

    exp = _experiment_with_trials(sweep, ["TERMINATED", "TERMINATED"])
    for i, params in enumerate([text, json.dumps({"raytrain": {"overrides": {"training.lr": 0.002}}})]):
        trial = exp / f"done_0000{i}"
        trial.mkdir()
        (trial / "params.json").write_text(params)
        (trial / "result.json").write_text(json.dumps({"training_iteration": 1, "trial_id": f"0000{i}",
                                                       "env_runners": {"episode_return_mean": 20.0 + i}}) + "\n")
    for command in ("status", "plot"):
        result = invoke("tune", command, str(exp))
        assert result.exit_code == 0, result.output
        if command == "status":
            said = " ".join(result.output.split())
            assert f"warning: {exp / 'done_00000' / 'params.json'} cannot be read (" in said
    listed = invoke("tune", "status", str(exp), "--json")
    assert listed.exit_code == 0, listed.output
    trials = json.loads(listed.stdout[listed.stdout.index("{"):])["trials"]
    assert sorted((t["name"], t["hyperparameters"]) for t in trials) == [("done_00000", {}),
                                                                          ("done_00001", {"training.lr": 0.002})]


def test_plot_where_a_file_holds_the_plots_name_says_so(sweep, tmp_path):
    """A file named plots where the folder goes: Python's FileExistsError, exit 1, no word of what to do."""
    exp = _experiment_with_trials(sweep, ["TERMINATED", "TERMINATED"])
    (exp / "plots").write_text("not a folder\n")
    result = invoke("tune", "plot", str(exp))
    assert result.exit_code == 1, result.output
    assert (f"error: cannot write the plots: {exp / 'plots'}: File exists (the plots go to {exp / 'plots'}/, a folder: "
            "move what is there, or make the folder writable)") in " ".join(result.output.split()), result.output
    assert (exp / "plots").read_text() == "not a folder\n"


def test_a_sweep_whose_time_budget_ran_out_with_a_trial_left_paused_is_over(sweep, tmp_path, capsys):
    """Tune's stop at the budget can leave a PBT trial PAUSED (seen with 8 trials on 2 CPUs): the sweep was reported
    as stopped by Ctrl-C (exit 130, "continue it with `raytrain tune resume`"); it is over, said so (exit 0)."""
    import typer

    from raytrain.cli.tune_cmd import _out_of_time, _stopped_early
    from raytrain.tune.results import summarize

    exp = _experiment_with_trials(sweep, ["TERMINATED", "PAUSED"], [False, False])
    trials = summarize(exp)[1]
    assert _out_of_time(exp, trials)
    said = " ".join(capsys.readouterr().err.split())
    assert ("warning: the sweep's time budget ran out: Tune stopped 2 of 2 trials before their stop criteria, 1 of "
            "them left paused.") in said
    status = invoke("tune", "status", str(exp))
    assert status.exit_code == 0, status.output
    assert ("the sweep ran out of its time budget (time_budget_s): 1 of 2 trials were left paused, and Tune keeps the "
            "spent budget in its state, so there is nothing to resume") in " ".join(status.output.split())
    assert "continue it with" not in status.output
    # Ctrl-C or SIGTERM: Tune saved the trials as they were (none TERMINATED without a done result).
    exp = _experiment_with_trials(sweep, ["RUNNING", "PAUSED"], [False, False])
    assert not _out_of_time(exp, summarize(exp)[1])
    with pytest.raises(typer.Exit) as stopped:
        _stopped_early(exp, summarize(exp)[1], None)
    assert stopped.value.exit_code == 130


def test_a_failed_trial_of_a_sweep_whose_time_budget_ran_out_is_not_sent_to_resume(sweep, tmp_path):
    """`tune resume` retries a failed trial, but not where the budget is spent (Tune stops the trials at once): the
    end of such a sweep (exit 1) does not send the user there."""
    from raytrain.cli.tune_cmd import _report
    from raytrain.errors import SweepError

    exp = _experiment_with_trials(sweep, ["TERMINATED", "ERROR"], [False, False])
    with pytest.raises(SweepError) as failed:
        _report(exp)
    assert ("1 trial(s) failed, and the sweep's time budget (time_budget_s) ran out, which Tune keeps spent in its "
            "state, so `raytrain tune resume` cannot retry them") in str(failed.value)

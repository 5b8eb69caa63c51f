"""Run folders without Ray: where a run goes, which checkpoint is chosen, what a resume records, and the
`train`/`eval` refusals that must come before Ray starts (exit 2, nothing written)."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from raytrain.cli import app
from raytrain.errors import ConfigError, UsageError
from raytrain.runs import RLLIB_PARTS, STAMP_PLACEHOLDER, STATE_FILE, MetricsWriter, RunFolder, experiment_dir

runner = CliRunner()

TINY = (
    "experiment: {{name: tiny, seed: 1, storage_path: {storage}}}\n"
    "environment: {{env: CartPole-v1}}\n"
    "env_runners: {{num_env_runners: 0}}\n"
    "training: {{train_batch_size: 200, minibatch_size: 100, num_epochs: 1}}\n"
    "stop: {{training_iteration: 2}}\n"
)


def _checkpoint(run: Path, name: str, iteration: int | None, state: str | None = None, rllib: bool = True) -> Path:
    path = run / "checkpoints" / name
    path.mkdir(parents=True)
    for part in RLLIB_PARTS if rllib else ():  # the folders RLlib writes (empty: nothing here loads them)
        (path / part).mkdir(parents=True)
    (path / "config.yaml").write_text("environment: {env: CartPole-v1}\n")
    if iteration is not None or state is not None:
        (path / STATE_FILE).write_text(state if state is not None else json.dumps({"iteration": iteration}))
    return path


@pytest.fixture
def run_dir(tmp_path):
    """A finished run folder as `raytrain train` leaves it (no RLlib files: nothing here loads them)."""
    run = tmp_path / "results" / "tiny" / "2026-01-01_00-00-00"
    run.mkdir(parents=True)
    (run / "config.yaml").write_text(TINY.format(storage=tmp_path / "results"))
    (run / "rllib_config.json").write_text("{}\n")
    (run / "command.txt").write_text("# 2026-01-01 00:00:00 in /x\nraytrain train tiny.yaml\n")
    (run / "run.json").write_text(json.dumps({"status": "finished", "iteration": 2}) + "\n")
    return run


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def no_ray_start(monkeypatch):
    """Fail the test if Ray is started: these refusals must come before it."""
    import raytrain.ray_session

    def refuse(*args, **kwargs):
        raise AssertionError("Ray was started before the refusal")

    monkeypatch.setattr(raytrain.ray_session, "connect_ray", refuse)


# --- item 7: where a run goes ---------------------------------------------------------------------


@pytest.mark.parametrize("name", ["/tmp/x", "../..", "..", ".", "a/b", "", "x/../../y"])
def test_experiment_dir_refuses_names_that_leave_storage(tmp_path, name):
    with pytest.raises(ConfigError) as caught:
        experiment_dir(str(tmp_path / "results"), name, "f.yaml:3")
    assert caught.value.exit_code == 2
    assert str(caught.value).startswith("f.yaml:3: experiment.name:")


def test_experiment_dir_refuses_a_symlink_out_of_storage(tmp_path):
    storage = tmp_path / "results"
    storage.mkdir()
    (storage / "escape").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(ConfigError, match="outside experiment.storage_path"):
        experiment_dir(str(storage), "escape")
    with pytest.raises(ConfigError):
        RunFolder.create(str(storage), "escape")
    assert not (tmp_path / "elsewhere").exists()


def test_experiment_dir_is_absolute_and_expanded(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    assert experiment_dir("~/results", "exp") == tmp_path / "results" / "exp"
    assert experiment_dir("rel/results", "exp") == tmp_path / "rel" / "results" / "exp"
    assert experiment_dir(str(tmp_path / "a" / ".." / "results"), "exp") == tmp_path / "results" / "exp"


def test_dry_run_prints_the_folder_create_uses(tmp_path, monkeypatch, no_ray_start):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    config = tmp_path / "tiny.yaml"
    config.write_text(TINY.format(storage="~/results"))
    result = runner.invoke(app, ["train", str(config), "--dry-run"])
    assert result.exit_code == 0, result.output
    shown = re.search(r"^# run folder: (.*)$", result.stdout, re.M).group(1)
    assert not (tmp_path / "home").exists()  # a dry run writes nothing
    created = RunFolder.create("~/results", "tiny").path
    assert shown == f"{created.parent}/{STAMP_PLACEHOLDER}"
    assert created.parent == tmp_path / "home" / "results" / "tiny"
    assert re.fullmatch(r"\d{4}-\d\d-\d\d_\d\d-\d\d-\d\d", created.name)  # what the placeholder stands for


def test_name_outside_storage_exit_2_nothing_written(tmp_path, no_ray_start):
    config = tmp_path / "tiny.yaml"
    config.write_text(TINY.format(storage=tmp_path / "results").replace("name: tiny", f"name: {tmp_path / 'x'}"))
    for args in (["--dry-run"], []):
        result = runner.invoke(app, ["train", str(config), *args])
        assert result.exit_code == 2, result.output
        assert "experiment.name" in result.output and "Traceback" not in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tiny.yaml"]


@pytest.mark.parametrize("dry_run", [False, True])
def test_more_actors_than_a_local_ray_has_cpus_exit_2_before_ray(tmp_path, monkeypatch, no_ray_start, dry_run):
    """Ray would wait forever for actors it cannot place: with no cluster named, the local Ray's CPUs are known
    before it starts, so the refusal comes first, at the field, and nothing is written."""
    from raytrain.training import local_ray

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    config = tmp_path / "tiny.yaml"
    config.write_text(TINY.format(storage=tmp_path / "results"))
    runners = int(local_ray().total) + 1
    result = runner.invoke(app, ["train", str(config), "--set", f"env_runners.num_env_runners={runners}",
                                 *(["--dry-run"] if dry_run else [])])
    assert result.exit_code == 2, result.output
    assert (f"--set env_runners.num_env_runners={runners}: env_runners.num_env_runners: the config's actors "
            f"(env runners, learners, evaluation runners) reserve {runners} CPUs") in result.output
    assert "Traceback" not in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tiny.yaml"]


def test_a_main_process_that_reserves_no_cpu_passes_the_checks(tmp_path):
    """`train` places no placement group: with no CPU for the main process and no actor, the CPU check has
    nothing to count (Ray's PlacementGroupFactory refuses to describe such a trial: it raised a ValueError)."""
    from raytrain.config.load import load_config
    from raytrain.training import RayCpus, check_train_cpus, trial_bundles

    config = tmp_path / "tiny.yaml"
    config.write_text(TINY.format(storage=tmp_path / "results"))
    loaded = load_config(config, ["resources.num_cpus_for_main_process=0", "learners.num_cpus_per_learner=0"])
    assert trial_bundles(loaded.config) == [{}]
    check_train_cpus(loaded.config, loaded.source, RayCpus("a local Ray on this machine", 1))


def test_the_local_cpu_check_points_at_the_field_in_the_file(tmp_path):
    from raytrain.config.load import load_config
    from raytrain.training import RayCpus, check_train_cpus

    config = tmp_path / "tiny.yaml"
    config.write_text(TINY.format(storage=tmp_path / "results").replace("num_env_runners: 0", "num_env_runners: 3"))
    loaded = load_config(config, [])
    check_train_cpus(loaded.config, loaded.source, RayCpus("a local Ray on this machine", 3))
    with pytest.raises(ConfigError) as caught:
        check_train_cpus(loaded.config, loaded.source, RayCpus("a local Ray on this machine", 2.5))
    assert str(caught.value).startswith(f"{config}:3: env_runners.num_env_runners: ")
    assert "reserve 3 CPUs, but a local Ray on this machine has 2.5" in str(caught.value)


def test_the_cpu_check_points_at_the_actors_that_reserve_the_most(write_yaml):
    """It pointed at env_runners.num_env_runners whenever that was above 0: with 1 env runner and 3 evaluation
    runners it said to lower the env runners, which could not make the config fit."""
    from raytrain.config.load import load_config
    from raytrain.training import RayCpus, check_train_cpus

    ray = RayCpus("a local Ray on this machine", 2)
    for text, line, key in [
        ("env_runners: {num_env_runners: 1}\nevaluation: {evaluation_interval: 1, evaluation_num_env_runners: 3}\n",
         3, "evaluation.evaluation_num_env_runners"),
        ("env_runners: {num_env_runners: 1}\nlearners: {num_learners: 3}\n", 3, "learners.num_learners"),
        ("env_runners: {num_env_runners: 3}\nevaluation: {evaluation_interval: 1, evaluation_num_env_runners: 1}\n",
         2, "env_runners.num_env_runners"),
        ("env_runners: {num_env_runners: 2}\nlearners: {num_learners: 2}\n", 2, "env_runners.num_env_runners"),
    ]:
        path = write_yaml("environment: {env: CartPole-v1}\n" + text)
        loaded = load_config(path, [])
        with pytest.raises(ConfigError) as caught:
            check_train_cpus(loaded.config, loaded.source, ray)
        assert str(caught.value).startswith(f"{path}:{line}: {key}: "), (text, str(caught.value))
        assert f"lower {key} (or the CPUs per actor)" in str(caught.value)


GPU_CASES = [
    ("env_runners: {num_env_runners: 1, num_gpus_per_env_runner: 1}\n", 2, "env_runners.num_gpus_per_env_runner",
     "the config's actors (env runners, learners, evaluation runners) reserve 1 GPU, but a local Ray on this machine "
     "has 0: lower env_runners.num_gpus_per_env_runner (0 trains on CPUs), or join a cluster that has them (--address, "
     "--cluster)"),
    ("env_runners: {num_env_runners: 1}\nlearners: {num_learners: 1, num_gpus_per_learner: 1}\n", 3,
     "learners.num_gpus_per_learner", "the config's actors (env runners, learners, evaluation runners) reserve 1 GPU, "
     "but a local Ray on this machine has 0: lower learners.num_gpus_per_learner (0 trains on CPUs), or join a "
     "cluster that has them (--address, --cluster)"),
    ("env_runners: {num_env_runners: 1}\nlearners: {num_gpus_per_learner: 1}\n", 3, "learners.num_gpus_per_learner",
     "the local learner (learners.num_learners is 0: it trains in the driver's process) asks for 1 GPU, but the "
     "driver's machine has 0: set learners.num_gpus_per_learner to 0 to train on CPUs, or run the driver where a GPU is"),
]


@pytest.mark.parametrize(("text", "line", "key", "said"), GPU_CASES, ids=["env runners", "learners", "local learner"])
def test_gpus_the_machine_does_not_have_are_exit_2_before_ray_at_the_gpu_field(write_yaml, tmp_path, monkeypatch,
                                                                              no_ray_start, text, line, key, said):
    """On a machine without GPUs, env runners or remote learners that ask for one made Ray wait forever ("No
    available node types can fulfill resource request {'GPU': 1.0}" every 35 s), and a local learner on a GPU
    failed the build (`AssertionError: local_gpu_idx 0 is not a valid GPU ID`), exit 1."""
    import raytrain.training
    from raytrain.config.load import load_config
    from raytrain.training import RayCpus, check_train_cpus

    monkeypatch.setattr(raytrain.training, "local_ray", lambda: RayCpus("a local Ray on this machine", 4.0, gpus=0.0,
                                                                        driver_gpus=0.0))
    path = write_yaml("environment: {env: CartPole-v1}\n" + text + f"experiment: {{storage_path: {tmp_path / 'runs'}}}\n")
    for args in (["train", str(path)], ["train", str(path), "--dry-run"]):
        result = runner.invoke(app, args)
        assert result.exit_code == 2, result.output
        assert f"error: {path}:{line}: {key}: {said}" in " ".join(result.output.split())
    assert not (tmp_path / "runs").exists()
    loaded = load_config(path, [])
    check_train_cpus(loaded.config, loaded.source, RayCpus("a machine with a GPU", 4.0, gpus=1.0, driver_gpus=1.0))


CUSTOM_CASES = [
    ("env_runners:\n  num_env_runners: 1\n  custom_resources_per_env_runner:\n    lab_sensor: 1\n", 5,
     "env_runners.custom_resources_per_env_runner.lab_sensor", "reserve 1 of the resource 'lab_sensor', but a local "
     "Ray on this machine has 0: remove or lower it, or join a cluster whose nodes have it (--address, --cluster)"),
    ("env_runners: {num_env_runners: 0}\nlearners: {num_learners: 1, custom_resources_per_learner: {fpga: 0.5}}\n", 3,
     "learners.custom_resources_per_learner.fpga", "reserve 0.5 of the resource 'fpga', but a local Ray on this "
     "machine has 0: remove or lower it, or join a cluster whose nodes have it (--address, --cluster)"),
]


@pytest.mark.parametrize(("text", "line", "key", "said"), CUSTOM_CASES, ids=["env runners", "learners"])
def test_custom_resources_a_local_ray_lacks_are_exit_2_before_ray_at_the_resource(write_yaml, tmp_path, no_ray_start,
                                                                                   text, line, key, said):
    """`custom_resources_per_env_runner: {lab_sensor: 1}` on a local Ray (which has no custom resources): Ray
    waited forever, printing "No available node types can fulfill resource request {'CPU': 1.0, 'lab_sensor':
    1.0}" every 35 s, as it did for GPUs."""
    from raytrain.config.load import load_config
    from raytrain.training import RayCpus, check_train_cpus

    path = write_yaml("environment: {env: CartPole-v1}\n" + text + f"experiment: {{storage_path: {tmp_path / 'runs'}}}\n")
    for args in (["train", str(path)], ["train", str(path), "--dry-run"]):
        result = runner.invoke(app, args)
        assert result.exit_code == 2, result.output
        assert f"error: {path}:{line}: {key}: the config's actors (env runners, learners, evaluation runners) {said}" in \
            " ".join(result.output.split())
    assert not (tmp_path / "runs").exists()
    loaded = load_config(path, [])
    check_train_cpus(loaded.config, loaded.source, RayCpus("a cluster", 4.0, custom={"lab_sensor": 1.0, "fpga": 1.0}))
    with pytest.raises(ConfigError, match="more than one node of a cluster has"):
        check_train_cpus(loaded.config, loaded.source, RayCpus("a cluster", 4.0, custom={"lab_sensor": 2.0, "fpga": 2.0},
                                                               custom_per_node={"lab_sensor": 0.25, "fpga": 0.25}))


def test_ray_own_resources_named_with_a_colon_are_left_to_a_live_ray(write_yaml, no_ray_start):
    """`node:<ip>` and `accelerator_type:A100` are resources Ray gives a node itself: only a running Ray knows them."""
    from raytrain.config.load import load_config
    from raytrain.training import RayCpus, check_train_cpus

    path = write_yaml("environment: {env: CartPole-v1}\nenv_runners: {num_env_runners: 1, custom_resources_per_env_runner: "
                      "{'node:10.0.0.5': 0.01}}\n")
    loaded = load_config(path, [])
    check_train_cpus(loaded.config, loaded.source, RayCpus("a local Ray on this machine", 4.0))
    with pytest.raises(ConfigError, match="'node:10.0.0.5', but the Ray cluster at h:6379 has 0"):
        check_train_cpus(loaded.config, loaded.source, RayCpus("the Ray cluster at h:6379", 4.0, live=True))


@pytest.mark.parametrize("name", ["CPU", "GPU", "memory", "object_store_memory", "bad name", "", "-x", "a;b"])
@pytest.mark.parametrize("section", ["env_runners", "learners"])
def test_ray_own_or_unusable_custom_resource_names_are_refused_at_load(write_yaml, no_ray_start, name, section):
    """`{CPU: 1}` failed once Ray had started, exit 1 with no line: "ValueError: Use the 'num_cpus' and 'num_gpus'
    keyword instead of 'CPU' and 'GPU' in 'resources' keyword" (for `memory`: "must not contain the key")."""
    per = "env_runner" if section == "env_runners" else "learner"
    path = write_yaml(f"environment: {{env: CartPole-v1}}\n{section}:\n  custom_resources_per_{per}: {{'{name}': 1}}\n")
    result = runner.invoke(app, ["config", "validate", str(path)])
    assert result.exit_code == 2, result.output
    said = " ".join(result.output.split())
    assert f"{path}:3: {section}.custom_resources_per_{per}: " in said
    if name in ("CPU", "GPU", "memory", "object_store_memory"):
        assert (f"['{name}']: Ray's own resources, not custom ones: reserve CPUs and GPUs with num_cpus_per_{per} and "
                f"num_gpus_per_{per}; RLlib reserves no memory per actor") in said
    else:
        assert "resource names must be letters, digits and `_.:/-`, starting with a letter or `_`" in said


# --- item 8: the same writability probe for dry and real runs ----------------------------------------


@pytest.mark.parametrize("dry", [True, False], ids=["dry-run", "real"])
def test_unwritable_storage_exit_2_with_field_and_line(tmp_path, dry, no_ray_start):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder\n")
    config = tmp_path / "tiny.yaml"
    config.write_text(TINY.format(storage=blocker / "results"))
    result = runner.invoke(app, ["train", str(config), *(["--dry-run"] if dry else [])])
    assert result.exit_code == 2, result.output
    assert f"{config}:1: experiment.storage_path: not writable: {blocker} is not a directory" in result.output
    assert blocker.read_text() == "not a folder\n" and sorted(p.name for p in tmp_path.iterdir()) == ["a_file", "tiny.yaml"]


@pytest.mark.parametrize("command", ["train", "tune"])
@pytest.mark.parametrize("dry", [True, False], ids=["dry-run", "real"])
@pytest.mark.parametrize("kind", ["link to nothing", "below a link to nothing", "link loop", "long name"])
def test_a_storage_path_no_folder_can_be_made_at_is_exit_2_saying_why(tmp_path, no_ray_start, command, dry, kind):
    """A link to nothing passed the dry run, and the real run failed once Ray had started (`mkdir`: File exists,
    exit 1); a loop of links and a name over 255 bytes ended the dry run with Python's own error, exit 1."""
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    (tmp_path / "loop1").symlink_to("loop2")
    (tmp_path / "loop2").symlink_to("loop1")
    storage, said = {
        "link to nothing": (tmp_path / "dangling", f"{tmp_path}/dangling is a symbolic link to {tmp_path}/nowhere, "
                                                   "which does not exist"),
        "below a link to nothing": (tmp_path / "dangling" / "results", f"{tmp_path}/dangling is a symbolic link to "
                                                                       f"{tmp_path}/nowhere, which does not exist"),
        "link loop": (tmp_path / "loop1" / "results", f"{tmp_path}/loop1 is a loop of symbolic links"),
        "long name": (tmp_path / ("a" * 256), f"the name {'a' * 24}... is 256 bytes, longer than the 255 a file system "
                                              "takes"),
    }[kind]
    config = tmp_path / "tiny.yaml"
    config.write_text(TINY.format(storage=storage))
    before = sorted(p.name for p in tmp_path.iterdir())
    if command == "tune":
        sweep = tmp_path / "sweep.yaml"
        sweep.write_text(f"base: tiny.yaml\nsearch: {{algorithm: random, num_samples: 1}}\nspace: {{training.lr: "
                         f"{{distribution: choice, values: [0.001]}}}}\ncheckpoint: {{storage_path: {storage}}}\n")
        before.append("sweep.yaml")
        args, field, line = ["tune", str(sweep)], "checkpoint.storage_path", f"{sweep}:4"
    else:
        args, field, line = ["train", str(config)], "experiment.storage_path", f"{config}:1"
    result = runner.invoke(app, [*args, *(["--dry-run"] if dry else [])])
    assert result.exit_code == 2, result.output
    assert f"{line}: {field}: not writable: {said}" in " ".join(result.output.split()), result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(before)


@pytest.mark.skipif(os.geteuid() != 0 or not Path("/proc/self").is_dir(), reason="needs root and /proc")
def test_proc_is_unwritable_even_for_root(tmp_path, no_ray_start):
    # os.access says yes to root here; a real write does not.
    config = tmp_path / "tiny.yaml"
    config.write_text(TINY.format(storage="/proc/raytrain_x"))
    result = runner.invoke(app, ["train", str(config), "--dry-run"])
    assert result.exit_code == 2, result.output
    assert f"{config}:1: experiment.storage_path: not writable" in result.output


# --- item 9: usage errors before Ray --------------------------------------------------------------


def test_eval_and_resume_of_a_non_run_exit_2_before_ray(tmp_path, monkeypatch, no_ray_start):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "keep" / "notarun").mkdir(parents=True)
    for args, said in ((["eval", "keep/notarun"], "not a raytrain"), (["train", "--resume", "keep/notarun"], "not a raytrain"),
                       (["eval", "missing"], "missing does not exist")):
        result = runner.invoke(app, args)
        assert result.exit_code == 2, (args, result.output)
        assert said in result.output and "Traceback" not in result.output


def _sweep_trial(exp: Path, name: str, checkpoints: int, params: str | None = None) -> Path:
    """A trial folder as a raytrain sweep leaves it (params.json, checkpoint_<n> with RLlib's marker file)."""
    trial = exp / name
    trial.mkdir(parents=True)
    spec = {"raytrain": {"base": yaml.safe_load(TINY.format(storage=exp / "runs")), "overrides": {"model.fcnet_hiddens": [8]}}}
    (trial / "params.json").write_text(params if params is not None else json.dumps(spec))
    for n in range(checkpoints):
        (trial / f"checkpoint_{n:06d}").mkdir()
        (trial / f"checkpoint_{n:06d}" / "rllib_checkpoint.json").write_text("{}")
        for part in RLLIB_PARTS:  # the folders RLlib writes (empty: nothing here loads them)
            (trial / f"checkpoint_{n:06d}" / part).mkdir(parents=True)
    return trial


def test_eval_finds_a_sweep_trials_checkpoint_and_its_config(tmp_path, no_ray_start):
    from raytrain.evaluate import plan_eval

    exp = tmp_path / "results" / "sweep"
    trial = _sweep_trial(exp, "sweep_0001", 11)
    (trial / "checkpoint_000011.partial").mkdir()  # not Tune's name for a checkpoint: ignored
    latest = trial / "checkpoint_000010"
    for target in (latest, trial):
        plan = plan_eval(target)
        assert plan.checkpoint == latest and plan.config.model.fcnet_hiddens == [8]
        assert plan.config.env_runners.num_env_runners == 0
    assert plan_eval(trial / "checkpoint_000002").checkpoint == trial / "checkpoint_000002"
    # The experiment folder: the best trial with a checkpoint on the leaderboard, found even after a move.
    _sweep_trial(exp, "sweep_0002", 0)
    board = [{"name": "sweep_0002", "checkpoint": None},
             {"name": "sweep_0001", "checkpoint": "/elsewhere/sweep/sweep_0001/checkpoint_000004"}]
    (exp / "leaderboard.json").write_text(json.dumps(board))
    assert plan_eval(exp).checkpoint == trial / "checkpoint_000004"


def test_eval_of_a_sweep_whose_leaderboard_cannot_be_read_exit_2_saying_so(tmp_path, no_ray_start):
    """It said `no trial on its leaderboard has a checkpoint`: the file could not be read at all."""
    exp = tmp_path / "results" / "sweep"
    _sweep_trial(exp, "sweep_0001", 2)
    (exp / "leaderboard.json").write_text('[{"name": ')
    result = runner.invoke(app, ["eval", str(exp)])
    assert result.exit_code == 2, result.output
    assert (f"{exp / 'leaderboard.json'} cannot be read (Expecting value): give one of the sweep's trial folders "
            f"(`raytrain tune status {exp}` ranks them)") in " ".join(result.output.split())


def test_eval_of_a_sweep_stopped_with_trials_left_says_its_best_so_far_is_evaluated(tmp_path, no_ray_start):
    """A sweep stopped by Ctrl-C has a leaderboard; its best trial so far was evaluated without a word."""
    from raytrain.evaluate import plan_eval

    exp = tmp_path / "results" / "sweep"
    trial = _sweep_trial(exp, "sweep_0001", 2)
    (exp / "leaderboard.json").write_text(json.dumps([{"name": "sweep_0001", "checkpoint": str(trial / "checkpoint_000001")}]))
    data = [[json.dumps({"relative_logdir": f"sweep_000{i}", "status": s}), "{}"] for i, s in enumerate(["TERMINATED", "PAUSED"], 1)]
    (exp / "experiment_state-2026-12-02_01-00-00.json").write_text(json.dumps({"trial_data": data}))
    said: list[str] = []
    assert plan_eval(exp, on_skip=said.append).checkpoint == trial / "checkpoint_000001"
    assert said == [f"note: {exp} has not finished (1 of its 2 trials not finished; `raytrain tune resume {exp}` continues "
                    "it): its best trial so far is evaluated"]


@pytest.mark.parametrize("params", ["", "{", "[]", '{"raytrain": 1}', '{"other": {}}', '{"raytrain": {"overrides": {}}}'])
def test_eval_of_a_trial_that_is_not_raytrains_exit_2(tmp_path, no_ray_start, params):
    trial = _sweep_trial(tmp_path / "exp", "t", 1, params=params)
    for target in (trial, trial / "checkpoint_000000"):
        result = runner.invoke(app, ["eval", str(target)])
        assert result.exit_code == 2, result.output
        assert "is not the params.json of a raytrain sweep's trial" in result.output and "Traceback" not in result.output


def test_eval_of_a_sweep_trials_checkpoint_missing_a_part_of_rllibs_state_exits_2(tmp_path, no_ray_start):
    trial = _sweep_trial(tmp_path / "exp", "t", 2)
    shutil.rmtree(trial / "checkpoint_000001" / "learner_group")
    result = runner.invoke(app, ["eval", str(trial / "checkpoint_000001")])
    assert result.exit_code == 2, result.output
    assert (f"{trial / 'checkpoint_000001'} has no learner_group/learner/rl_module (the network's weights), which RLlib "
            "writes in every checkpoint") in " ".join(result.output.split()), result.output


def test_eval_of_a_trial_or_sweep_without_checkpoints_says_so(tmp_path, no_ray_start):
    trial = _sweep_trial(tmp_path / "exp", "t", 0)
    result = runner.invoke(app, ["eval", str(trial)])
    assert result.exit_code == 2 and "sweep trial without a checkpoint" in result.output
    (tmp_path / "exp" / "leaderboard.json").write_text(json.dumps([{"name": "t", "checkpoint": None}]))
    result = runner.invoke(app, ["eval", str(tmp_path / "exp")])
    assert result.exit_code == 2 and "no trial on its leaderboard has a checkpoint" in result.output


def test_eval_of_a_run_without_checkpoints_says_so(run_dir, no_ray_start):
    for make_dir in (False, True):
        if make_dir:
            (run_dir / "checkpoints").mkdir()
        result = runner.invoke(app, ["eval", str(run_dir)])
        assert result.exit_code == 2 and "run folder without a complete checkpoint" in result.output


def test_eval_of_a_runs_checkpoints_folder_takes_its_latest_checkpoint(run_dir, no_ray_start):
    """`raytrain eval RUN/checkpoints` (a tab completion away from the run folder) means the run: its latest
    complete checkpoint. It was told it held 'run folders of raytrain train' named checkpoint_<n>."""
    from raytrain.evaluate import resolve_checkpoint

    _checkpoint(run_dir, "checkpoint_000002", 2)
    _checkpoint(run_dir, "checkpoint_000004", 4)
    _checkpoint(run_dir, "checkpoint_000006.partial", 6)
    assert resolve_checkpoint(run_dir / "checkpoints") == run_dir / "checkpoints" / "checkpoint_000004"


@pytest.mark.parametrize("seed", ["-1", str(2**31)])
def test_eval_seed_out_of_range_is_refused_as_the_flag_given(run_dir, no_ray_start, seed):
    """It was reported as `--set experiment.seed=-1`, a flag the user never typed."""
    _checkpoint(run_dir, "checkpoint_000002", 2)
    result = runner.invoke(app, ["eval", str(run_dir), "--seed", seed])
    assert result.exit_code == 2, result.output
    assert "Invalid value for '--seed'" in result.output and "--set" not in result.output


def test_eval_of_a_partial_checkpoint_exit_2(run_dir, no_ray_start):
    partial = _checkpoint(run_dir, "checkpoint_000003.partial", 3)
    result = runner.invoke(app, ["eval", str(partial)])
    assert result.exit_code == 2 and "incomplete checkpoint" in result.output


def test_rllib_rejection_exit_2_before_ray(tmp_path, no_ray_start):
    config = tmp_path / "tiny.yaml"
    config.write_text(TINY.format(storage=tmp_path / "results"))
    args = ["--set", "evaluation.evaluation_interval=1", "--set", "evaluation.evaluation_duration=auto"]
    for dry in (["--dry-run"], []):
        result = runner.invoke(app, ["train", str(config), *args, *dry])
        assert result.exit_code == 2, result.output
        assert "RLlib rejects the config" in result.output
    assert not (tmp_path / "results").exists()


# --- item 10: which checkpoint is chosen -------------------------------------------------------------


def test_checkpoints_only_complete_exact_names(run_dir):
    _checkpoint(run_dir, "checkpoint_000001", 1)
    good = _checkpoint(run_dir, "checkpoint_000002", 2)
    _checkpoint(run_dir, "checkpoint_000003.partial", 3)  # state written, rename not yet done
    _checkpoint(run_dir, "checkpoint_000004.deleting", 4)
    _checkpoint(run_dir, "checkpoint_5", 5).rename(run_dir / "checkpoints" / "checkpoint_x5")
    _checkpoint(run_dir, "checkpoint_000006", None)  # no state file
    (run_dir / "checkpoints" / "checkpoint_000007").write_text("a file, not a folder")
    folder = RunFolder(run_dir)
    assert [p.name for p in folder.checkpoints()] == ["checkpoint_000001", "checkpoint_000002"]
    assert folder.latest_checkpoint() == good


@pytest.mark.parametrize(
    "state", ["{not json", "", "[]", '{"iteration": "3"}', '{"time_total_s": 1}', "\xff\xfe"], ids=repr
)
def test_unreadable_state_is_skipped_with_a_warning(run_dir, state):
    good = _checkpoint(run_dir, "checkpoint_000002", 2)
    bad = _checkpoint(run_dir, "checkpoint_000003", None, state)
    if state == "\xff\xfe":
        (bad / STATE_FILE).write_bytes(b"\xff\xfe\x00")
    warned: list[str] = []
    assert RunFolder(run_dir).latest_checkpoint(warned.append) == good
    assert len(warned) == 1 and str(bad) in warned[0] and STATE_FILE in warned[0]


def test_unreadable_state_warning_reaches_the_user(run_dir, no_ray_start):
    _checkpoint(run_dir, "checkpoint_000003", None, "{")
    result = runner.invoke(app, ["train", "--resume", str(run_dir), "--dry-run"])
    assert result.exit_code == 2  # the only checkpoint is unreadable: nothing to resume from
    assert "skipping checkpoint" in result.output and "checkpoint_000003" in result.output
    assert "no complete checkpoint" in result.output


def test_commit_checkpoint_renames_and_leaves_no_partial(run_dir):
    folder = RunFolder(run_dir)
    partial = _checkpoint(run_dir, "checkpoint_000001.partial", 1)
    (partial / "sub").mkdir()
    (partial / "sub" / "weights.bin").write_bytes(b"\0" * 10)
    target = folder.commit_checkpoint(partial, folder.checkpoint_path(1))
    assert not partial.exists() and (target / "sub" / "weights.bin").read_bytes() == b"\0" * 10
    assert folder.checkpoints() == [target]


def test_commit_checkpoint_fsyncs_everything_before_the_rename(run_dir, monkeypatch):
    """A spy around the real os.fsync records which file or folder each call made durable, and when."""
    folder = RunFolder(run_dir)
    partial = _checkpoint(run_dir, "checkpoint_000001.partial", 1, rllib=False)
    (partial / "learner_group" / "learner").mkdir(parents=True)
    (partial / "learner_group" / "learner" / "state.pkl").write_bytes(b"x")
    synced: list[str] = []
    real_fsync = os.fsync

    def spy(fd):
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        return real_fsync(fd)

    monkeypatch.setattr(os, "fsync", spy)
    before_rename = {str(p) for p in [partial, *partial.rglob("*")]}
    assert len(before_rename) == 6  # 3 folders, 3 files
    target = folder.commit_checkpoint(partial, folder.checkpoint_path(1))
    assert before_rename <= set(synced[:-1])  # every file and folder, all under the .partial name
    assert synced[-1] == str(target.parent)  # then the rename itself


def test_prune_never_leaves_a_half_deleted_checkpoint(run_dir):
    folder = RunFolder(run_dir)
    for i in (1, 2, 3):
        _checkpoint(run_dir, f"checkpoint_00000{i}", i)
    leftover = _checkpoint(run_dir, "checkpoint_000009.deleting", 9)  # a deletion cut short earlier
    removed = folder.prune_checkpoints(1)
    assert [p.name for p in removed] == ["checkpoint_000001", "checkpoint_000002"]
    assert sorted(p.name for p in folder.checkpoints_dir.iterdir()) == ["checkpoint_000003"]
    assert not leftover.exists()


def test_metrics_survive_a_torn_last_line(run_dir):
    rows = [{"training_iteration": 1, "a": 1.0}, {"training_iteration": 2, "a": 2.0}]
    (run_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"training_itera')
    writer = MetricsWriter(RunFolder(run_dir))
    assert writer.rows == rows
    writer.drop_after(2)
    writer.append({"training_iteration": 3, "a": 3.0})
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(line)["training_iteration"] for line in lines] == [1, 2, 3]
    assert (run_dir / "metrics.csv").read_text().splitlines() == ["training_iteration,a", "1,1.0", "2,2.0", "3,3.0"]


# --- item 11: what a resume records ------------------------------------------------------------------


def test_record_resume_keeps_earlier_configs_numbered(run_dir):
    folder = RunFolder(run_dir)
    first = (run_dir / "config.yaml").read_bytes()
    assert folder.record_resume({"training": {"lr": 0.1}}, {"training": {"lr": 0.1}}, ["raytrain", "train", "--resume", "r"]) == 1
    assert (run_dir / "config.1.yaml").read_bytes() == first
    assert (run_dir / "rllib_config.1.json").read_text() == "{}\n"
    assert yaml.safe_load((run_dir / "config.yaml").read_text()) == {"training": {"lr": 0.1}}
    assert json.loads((run_dir / "rllib_config.json").read_text()) == {"training": {"lr": 0.1}}
    assert folder.record_resume({"training": {"lr": 0.2}}, {}, ["raytrain", "x"]) == 2
    assert yaml.safe_load((run_dir / "config.2.yaml").read_text()) == {"training": {"lr": 0.1}}
    assert (run_dir / "config.1.yaml").read_bytes() == first
    commands = (run_dir / "command.txt").read_text()
    assert commands.count("\nraytrain ") == 3 and commands.endswith("raytrain x\n")


def test_failed_resume_before_ray_changes_nothing(run_dir, no_ray_start):
    _checkpoint(run_dir, "checkpoint_000002", 2)
    before = _snapshot(run_dir)
    failures = {
        "bad override": ["--set", "training.lr=fast"],
        "unknown key": ["--set", "training.lrr=0.1"],
        "RLlib rejection": ["--set", "evaluation.evaluation_interval=1", "--set", "evaluation.evaluation_duration=auto"],
    }
    for what, args in failures.items():
        saved = sys.argv
        sys.argv = ["raytrain", "train", "--resume", str(run_dir), *args]
        try:
            result = runner.invoke(app, sys.argv[1:])
        finally:
            sys.argv = saved
        assert result.exit_code == 2, (what, result.output)
        assert _snapshot(run_dir) == before, what


@pytest.mark.parametrize(
    ("file", "text", "said"),
    [
        ("run.json", b"{bad", "run.json: not JSON (Expecting property name enclosed in double quotes): it records the "
                              "run's status only: delete it, or mend it"),
        ("run.json", b"[1]", "run.json: a JSON object of the run's status, not list"),
        ("metrics.jsonl", b'{"training_iteration": 1}\n{garbage\n{"training_iteration": 2}\n',
         "metrics.jsonl:2: not a JSON line (Expecting property name enclosed in double quotes): mend or delete that "
         "line (a row after the checkpoint resumed from is written again)"),
        ("metrics.jsonl", b'{"training_iteration": 1}\n[1, 2]\n', "metrics.jsonl:2: a row is a JSON object of one "
                                                                     "iteration's metrics, not list"),
        ("config.yaml", b"\xff\xfe stop: {}\n", "config.yaml:1: byte 0xff at column 1 is not UTF-8; save the file as UTF-8"),
    ],
)
def test_resume_of_a_run_with_a_damaged_file_exit_2_naming_it_before_ray(run_dir, no_ray_start, file, text, said):
    """Each failed the resume once Ray had started with Python's own error (JSONDecodeError, AttributeError,
    UnicodeDecodeError), exit 1, no file named, and with config.yaml already replaced and command.txt appended."""
    _checkpoint(run_dir, "checkpoint_000002", 2)
    (run_dir / file).write_bytes(text)
    before = _snapshot(run_dir)
    result = runner.invoke(app, ["train", "--resume", str(run_dir)])
    assert result.exit_code == 2, result.output
    assert f"{run_dir}/{said}" in " ".join(result.output.split()), result.output
    assert _snapshot(run_dir) == before


HOLDS = "import sys, time\nfrom raytrain.runs import RunFolder\nassert RunFolder(sys.argv[1]).claim()\nprint('held', flush=True)\ntime.sleep(60)"


def test_a_resume_of_a_run_another_process_holds_exit_2(run_dir, no_ray_start):
    """run.json says `running` only once the algorithm is built: two resumes started seconds apart both trained,
    each over the other's checkpoints and rows. The first holds the folder from its start."""
    _checkpoint(run_dir, "checkpoint_000002", 2)
    before = _snapshot(run_dir)
    holder = subprocess.Popen([sys.executable, "-c", HOLDS, str(run_dir)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        result = runner.invoke(app, ["train", "--resume", str(run_dir), "--set", "stop.training_iteration=4"])
    finally:
        holder.kill()
        holder.wait()
    assert result.exit_code == 2, result.output
    assert (f"{run_dir} is being trained right now, by another raytrain process of this machine, which holds the folder "
            "(it started moments ago)") in " ".join(result.output.split())
    assert _snapshot(run_dir) == before
    assert RunFolder(run_dir).claim()  # let go of when its process ended


def test_a_resume_sets_aside_the_checkpoints_after_the_one_it_resumes_from(run_dir):
    """A newest checkpoint that cannot be read (its state file lost) is passed over; the resumed run then found its
    name taken when it came to save that iteration again, and saved nothing, without a word."""
    _checkpoint(run_dir, "checkpoint_000002", 2)
    _checkpoint(run_dir, "checkpoint_000003", None)
    _checkpoint(run_dir, "checkpoint_000004", 4, state="{")
    folder = RunFolder(run_dir)
    said = folder.set_aside_after(run_dir / "checkpoints" / "checkpoint_000002", "2026-12-02_01-00-00")
    aside = run_dir / "not_resumed" / "2026-12-02_01-00-00"
    assert said == (f"note: 2 checkpoint(s) after checkpoint_000002 that cannot be resumed from (checkpoint_000003 to "
                    f"checkpoint_000004) moved to {aside}: the run writes those iterations again")
    assert sorted(p.name for p in aside.iterdir()) == ["checkpoint_000003", "checkpoint_000004"]
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == ["checkpoint_000002"]
    assert folder.set_aside_after(run_dir / "checkpoints" / "checkpoint_000002", "later") is None


def test_resume_without_a_checkpoint_exit_2_changes_nothing(run_dir, no_ray_start):
    _checkpoint(run_dir, "checkpoint_000003.partial", 3)
    before = _snapshot(run_dir)
    result = runner.invoke(app, ["train", "--resume", str(run_dir)])
    assert result.exit_code == 2 and "no complete checkpoint" in result.output
    assert _snapshot(run_dir) == before


def _rows(run: Path, iterations: int, **last: float) -> None:
    rows = [{"training_iteration": i, "num_env_steps_sampled_lifetime": 200 * i, "env_runners/episode_return_mean": 20.0}
            for i in range(1, iterations + 1)]
    rows[-1].update(last)
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.mark.parametrize("rows", [2, 0, 1], ids=["metrics", "no metrics.jsonl", "its row missing"])
def test_resume_of_a_run_that_reached_its_stop_changes_nothing(run_dir, no_ray_start, rows):
    """It trained one more iteration past its stop, wrote a checkpoint and a command line, and said the stop was
    reached again: a finished run has nothing to resume unless a stop criterion is raised. Its checkpoint's own
    record tells where metrics.jsonl lacks the checkpoint's row (it trained on)."""
    _checkpoint(run_dir, "checkpoint_000002", 2)
    if rows:
        _rows(run_dir, rows)
    before = _snapshot(run_dir)
    result = runner.invoke(app, ["train", "--resume", str(run_dir)])
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert (f"{run_dir} already reached stop criterion training_iteration >= 2 reached (2) at its latest checkpoint "
            "checkpoint_000002: nothing to resume, so nothing was started or changed; to train further, raise it: "
            f"raytrain train --resume {run_dir} --set stop.training_iteration=N") in said
    assert result.stdout.strip().splitlines()[-1] == str(run_dir)
    assert _snapshot(run_dir) == before
    dry = runner.invoke(app, ["train", "--resume", str(run_dir), "--dry-run"])
    assert dry.exit_code == 0 and "# nothing to resume: stop criterion training_iteration >= 2 reached (2)" in dry.output


@pytest.mark.parametrize("checkpoint, overrides", [
    (2, ["stop.training_iteration=5"]),  # the stop raised: it goes on
    (1, []),  # a killed run's rows past its checkpoint do not count: it resumes from iteration 1
])
def test_resume_of_a_run_short_of_its_stop_goes_on(run_dir, checkpoint, overrides):
    from raytrain import train_run

    _checkpoint(run_dir, f"checkpoint_{checkpoint:06d}", checkpoint)
    _rows(run_dir, 2)
    assert train_run.prepare(None, overrides, resume=run_dir).finished is None


def test_resume_of_a_checkpoint_names_its_run(run_dir, no_ray_start):
    ckpt = _checkpoint(run_dir, "checkpoint_000002", 2)
    result = runner.invoke(app, ["train", "--resume", str(ckpt)])
    assert result.exit_code == 2 and f"is a checkpoint, not a run folder; resume its run: --resume {run_dir}" in result.output


def test_open_takes_relative_paths(run_dir, monkeypatch):
    monkeypatch.chdir(run_dir.parent.parent)
    folder = RunFolder.open(f"tiny/{run_dir.name}")
    assert folder.path == run_dir and folder.path.is_absolute()
    with pytest.raises(UsageError):
        RunFolder.open("tiny")


def test_eval_of_the_folder_of_a_train_experiment_names_its_latest_run(run_dir, no_ray_start, monkeypatch):
    """storage_path/<experiment.name>/ holds a run folder per `raytrain train`: eval asks for one, naming the latest."""
    experiment = run_dir.parent
    monkeypatch.chdir(experiment.parent)
    result = runner.invoke(app, ["eval", "tiny"])
    assert result.exit_code == 2, result.output
    assert "tiny holds 1 run folder of `raytrain train` (2026-01-01_00-00-00): give one, the latest being " \
           "`raytrain eval tiny/2026-01-01_00-00-00`" in " ".join(result.output.split())
    for stamp in ("2026-01-02_00-00-00", "2026-01-03_00-00-00", "2026-01-04_00-00-00"):
        (experiment / stamp).mkdir()
        (experiment / stamp / "config.yaml").write_text((run_dir / "config.yaml").read_text())
    result = runner.invoke(app, ["eval", str(experiment)])
    assert result.exit_code == 2, result.output
    assert (f"holds 4 run folders of `raytrain train` (..., 2026-01-02_00-00-00, 2026-01-03_00-00-00, 2026-01-04_00-00-00): "
            f"give one, the latest being `raytrain eval {experiment / '2026-01-04_00-00-00'}`") in " ".join(result.output.split())


def test_eval_of_a_train_config_names_its_latest_run(run_dir, no_ray_start, tmp_path):
    """`raytrain eval tiny.yaml` (the config, where its run was meant) said only that it was no checkpoint."""
    config = tmp_path / "tiny.yaml"
    config.write_text(TINY.format(storage=tmp_path / "results"))
    result = runner.invoke(app, ["eval", str(config)])
    assert result.exit_code == 2, result.output
    assert (f"{config} is a train config, not a run folder or a checkpoint: the latest run of this config is "
            f"{run_dir} (`raytrain eval {run_dir}`)") in " ".join(result.output.split())
    other = tmp_path / "other.yaml"
    other.write_text(TINY.format(storage=tmp_path / "results").replace("name: tiny", "name: other"))
    result = runner.invoke(app, ["eval", str(other)])
    assert result.exit_code == 2, result.output
    assert (f"{other} is a train config, not a run folder or a checkpoint: it has no run in "
            f"{tmp_path / 'results' / 'other'} yet (`raytrain train {other}`)") in " ".join(result.output.split())


def test_eval_of_a_storage_path_names_the_experiments_in_it(run_dir, no_ray_start, tmp_path):
    """`raytrain eval ~/raytrain_results` (the storage path, one level too high) lists what it could mean."""
    storage = run_dir.parent.parent
    (storage / "cartpole_pbt").mkdir()
    (storage / "cartpole_pbt" / "leaderboard.json").write_text("[]")
    (storage / "cartpole_pbt" / "raytrain_sweep.json").write_text("{}")
    (storage / "cartpole_asha").mkdir()
    (storage / "cartpole_asha" / "raytrain_sweep.json").write_text("{}")
    (storage / "notes").mkdir()
    os.utime(storage / "cartpole_pbt", (1_000_000, 1_000_000))  # the example is the newest that can be evaluated
    result = runner.invoke(app, ["eval", str(storage)])
    assert result.exit_code == 2, result.output
    assert (f"{storage} is a storage path of 3 experiments: cartpole_asha (a sweep that has not finished), "
            "cartpole_pbt (a sweep), tiny (1 run of `raytrain train`): give one, the newest being "
            f"`raytrain eval {run_dir}`") in " ".join(result.output.split())  # its run: `eval tiny` is refused too
    # A write probe (`--dry-run`) touched the older experiment's folder: the newest is still told by its runs.
    older = storage / "older" / "2025-01-01_00-00-00"
    older.mkdir(parents=True)
    (older / "config.yaml").write_text("x: 1\n")
    os.utime(older, (2_000_000, 2_000_000))
    result = runner.invoke(app, ["eval", str(storage)])
    assert f"the newest being `raytrain eval {run_dir}`" in " ".join(result.output.split()), result.output
    result = runner.invoke(app, ["eval", str(storage / "cartpole_asha")])
    assert result.exit_code == 2, result.output
    assert (f"{storage / 'cartpole_asha'} is a sweep that has not finished (no leaderboard yet): give one of its "
            f"trial folders (`raytrain tune status {storage / 'cartpole_asha'}` lists them)") in " ".join(result.output.split())


def _marked_running(folder: Path, **fields) -> RunFolder:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "run.json").write_text(json.dumps({"status": "running", "started": "2026-01-01 00:00:00", **fields}))
    return RunFolder(folder)


def test_a_run_trained_now_by_a_live_raytrain_process_here_is_busy(tmp_path):
    import socket
    import subprocess

    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "raytrain", "train"])
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        here = socket.gethostname()
        busy, warning = _marked_running(tmp_path / "a", pid=alive.pid, host=here).trained_now()
        assert busy == f"process {alive.pid} (since 2026-01-01 00:00:00)" and warning is None
        # Written before run.json recorded the host: this machine's processes are what can be checked.
        assert _marked_running(tmp_path / "b", pid=alive.pid).trained_now()[0] is not None
        # A pid that is not raytrain's (the one that ran it died and the pid was given to another process).
        assert _marked_running(tmp_path / "c", pid=other.pid, host=here).trained_now() == (None, None)
    finally:
        alive.kill()
        other.kill()
        alive.wait()
        other.wait()
    # Its process has died (a crash leaves `running` behind): resuming is what such a run needs.
    assert _marked_running(tmp_path / "d", pid=alive.pid, host=here).trained_now() == (None, None)
    assert RunFolder(tmp_path / "d").trained_now() == (None, None)
    (tmp_path / "d" / "run.json").write_text(json.dumps({"status": "interrupted", "pid": os.getpid() + 1}))
    assert RunFolder(tmp_path / "d").trained_now() == (None, None)


def test_a_run_marked_running_on_another_machine_gets_a_warning_not_a_refusal(tmp_path):
    busy, warning = _marked_running(tmp_path / "a", pid=123, host="w7.lab").trained_now()
    assert busy is None
    assert warning == (f"warning: {tmp_path / 'a' / 'run.json'} says the run trains on w7.lab (pid 123, since "
                       "2026-01-01 00:00:00); if it still does, stop it first: two runs in one folder overwrite each "
                       "other's checkpoints")


def test_resuming_an_experiment_folder_names_its_latest_run(tmp_path):
    """`--resume storage_path/<name>` (the folder above the runs) said only "not a raytrain run folder"."""
    from raytrain.runs import RunFolder

    for stamp in ("2026-11-27_10-00-00", "2026-11-27_11-00-00", "2026-11-27_11-00-00_1"):
        (tmp_path / stamp).mkdir()
        (tmp_path / stamp / "config.yaml").write_text("{}\n")
    with pytest.raises(UsageError) as info:
        RunFolder.open(tmp_path)
    assert str(info.value) == (f"{tmp_path} holds 3 run folders of `raytrain train` (2026-11-27_10-00-00, "
                               "2026-11-27_11-00-00, 2026-11-27_11-00-00_1): give one, the latest being "
                               f"`raytrain train --resume {tmp_path / '2026-11-27_11-00-00_1'}`")
    run = tmp_path / "2026-11-27_10-00-00"
    with pytest.raises(UsageError) as info:
        RunFolder.open(run / "checkpoints")
    assert str(info.value) == (f"{run / 'checkpoints'} is the checkpoints folder of the run {run}: give the run folder, "
                               f"`raytrain train --resume {run}`")


def test_the_local_learner_gpu_refusal_counts_in_words(write_yaml):
    from raytrain.config.load import load_config
    from raytrain.training import RayCpus, local_learner_gpus

    loaded = load_config(write_yaml("environment: {env: CartPole-v1}\nlearners: {num_gpus_per_learner: 2}\n"), [])
    error = local_learner_gpus(loaded.config, loaded.source, RayCpus("a machine", 16.0, driver_gpus=1.0))
    assert error is not None and "asks for 2 GPUs, but the driver's machine has 1: set" in str(error)
    assert local_learner_gpus(loaded.config, loaded.source, RayCpus("a machine", 16.0, driver_gpus=2.0)) is None


def test_a_placement_strategy_in_train_is_said_to_apply_to_sweeps_only(write_yaml, no_ray_start):
    """`resources.placement_strategy: SPREAD` reached RLlib and did nothing in `raytrain train`: RLlib uses it
    only for the placement group Tune makes a trial; its Algorithm in the driver places no group."""
    path = write_yaml("environment: {env: CartPole-v1}\nenv_runners: {num_env_runners: 1}\n"
                      "resources: {placement_strategy: SPREAD}\n")
    result = runner.invoke(app, ["train", str(path), "--dry-run"])
    assert result.exit_code == 0, result.output
    assert (f"warning: {path}:3: resources.placement_strategy: SPREAD applies to a sweep's trials only (Tune places "
            "each trial's actors in one placement group with it); `raytrain train` runs RLlib's Algorithm in its own "
            "process, where RLlib places no group, so Ray places its env runners and learners by its default "
            "policy") in " ".join(result.output.split())
    quiet = runner.invoke(app, ["train", str(write_yaml("environment: {env: CartPole-v1}\n", "plain.yaml")), "--dry-run"])
    assert quiet.exit_code == 0 and "placement_strategy" not in quiet.output, quiet.output


def test_a_local_ray_checked_once_started_gives_a_local_rays_advice(write_yaml, monkeypatch):
    """Ray's own resources (`accelerator_type:A100`) are checked once a local Ray has started; the refusal said to
    "give it to a node (`resources:` of the node in the cluster file ...)" of a Ray that no cluster file made."""
    import ray

    from raytrain.config.load import load_config
    from raytrain.training import check_train_cpus, connected_ray

    monkeypatch.setattr(ray, "nodes", lambda: [{"Alive": True, "Resources": {"CPU": 2.0, "node:10.0.0.5": 1.0}},
                                               {"Alive": False, "Resources": {"CPU": 8.0, "accelerator_type:A100": 1.0}}])
    path = write_yaml("environment: {env: CartPole-v1}\nenv_runners:\n  num_env_runners: 1\n"
                      "  custom_resources_per_env_runner: {'accelerator_type:A100': 0.01}\n")
    loaded = load_config(path, [])
    with pytest.raises(ConfigError) as caught:
        check_train_cpus(loaded.config, loaded.source, connected_ray("local Ray"))
    assert str(caught.value) == (
        f"{path}:4: env_runners.custom_resources_per_env_runner.accelerator_type:A100: the config's actors (env "
        "runners, learners, evaluation runners) reserve 0.01 of the resource 'accelerator_type:A100', but the local "
        "Ray (1 node, 2 CPUs) has 0: remove or lower it, or join a cluster whose nodes have it (--address, --cluster)")
    with pytest.raises(ConfigError, match="has 0: remove or lower it, or give it to a node"):
        check_train_cpus(loaded.config, loaded.source, connected_ray("Ray cluster at 10.0.0.5:6379"))


def test_resuming_a_sweeps_folder_names_the_command_that_continues_it(tmp_path):
    """`train --resume` of a sweep's experiment folder, a trial folder or a trial's checkpoint said only "not a
    raytrain run folder ... give the folder `raytrain train` printed"."""
    from raytrain.runs import RunFolder

    exp = tmp_path / "pbt"
    checkpoint = exp / "pbt_1a2b3_00001" / "checkpoint_000003"
    checkpoint.mkdir(parents=True)
    (exp / "raytrain_sweep.json").write_text("{}\n")
    (exp / "pbt_1a2b3_00001" / "params.json").write_text("{}\n")
    (checkpoint / "rllib_checkpoint.json").write_text("{}\n")
    said = {}
    for path in (exp, exp / "pbt_1a2b3_00001", checkpoint):
        with pytest.raises(UsageError) as info:
            RunFolder.open(path)
        said[path] = str(info.value)
    assert said[exp] == (f"{exp} is a sweep's experiment folder, not a run folder of `raytrain train`: continue the "
                         f"sweep with `raytrain tune resume {exp}`")
    for path, what in ((exp / "pbt_1a2b3_00001", "a trial"), (checkpoint, "a trial's checkpoint")):
        assert said[path] == (
            f"{path} is {what} of the sweep in {exp}, not a run folder of `raytrain train`: its trials go on with "
            f"`raytrain tune resume {exp}`; `raytrain train {exp / 'best.yaml'}` trains the best trial's config as a "
            f"new run, and `raytrain eval {path}` plays it")


@pytest.mark.parametrize("lost", ["learner_group", "env_runner"])
def test_a_checkpoint_missing_a_part_of_rllibs_state_is_passed_over_or_refused(run_dir, no_ray_start, lost):
    """RLlib's restore skips a part it does not find without a word: `eval` of a checkpoint whose learner_group/ was
    lost (copied in part) scored 8 with a fresh network, exit 0, and `train --resume` trained on from it. A run's
    latest such checkpoint is passed over with a warning, as one with an unreadable state file is; named, exit 2."""
    from raytrain import train_run

    older = _checkpoint(run_dir, "checkpoint_000001", 1)
    latest = _checkpoint(run_dir, "checkpoint_000002", 2)
    shutil.rmtree(latest / lost)
    _rows(run_dir, 2)
    what = {"learner_group": "learner_group/learner/rl_module (the network's weights)",
            "env_runner": "env_runner (the env runner's connector states, observation filters among them)"}[lost]
    incomplete = (f"has no {what}, which RLlib writes in every checkpoint: it is incomplete (copied or synced in "
                  "part?), and RLlib would restore the rest without a word")
    assert RunFolder(run_dir).scan_checkpoints() == ([older], [f"warning: skipping checkpoint {latest}: it {incomplete}"])
    lines: list[str] = []
    assert train_run.prepare(None, [], resume=run_dir, notify=lines.append).checkpoint == older
    assert f"warning: skipping checkpoint {latest}: it {incomplete}" in lines, lines
    before = _snapshot(run_dir)
    result = runner.invoke(app, ["eval", str(latest)])
    assert result.exit_code == 2, result.output
    assert f"error: {latest} {incomplete}: give a complete one, such as {older}" in " ".join(result.output.split()), \
        result.output
    assert _snapshot(run_dir) == before


@pytest.mark.parametrize("override", ["experiment.storage_path=/tmp/elsewhere_of_a_resume", "experiment.name=other"])
def test_a_resume_told_to_move_its_run_is_refused(run_dir, no_ray_start, override):
    """It printed the override as applied, trained on in the same folder, and wrote the new name or path into the
    run's config.yaml, which then named a place the run is not in."""
    _checkpoint(run_dir, "checkpoint_000001", 1)
    _rows(run_dir, 1)
    before = _snapshot(run_dir)
    result = runner.invoke(app, ["train", "--resume", str(run_dir), "--set", override, "--set", "stop.training_iteration=5"])
    assert result.exit_code == 2, result.output
    key = override.partition("=")[0]
    assert (f"--set {override}: a resumed run stays in its folder, {run_dir}, so {key} cannot change: to train "
            "elsewhere, start a new run (raytrain train CONFIG.yaml), or copy the run folder there and resume the "
            "copy; nothing was changed") in " ".join(result.output.split()), result.output
    assert _snapshot(run_dir) == before and not Path("/tmp/elsewhere_of_a_resume").exists()


def test_a_resume_given_its_own_name_or_storage_path_goes_on(run_dir, tmp_path, no_ray_start):
    """A requeued `train --slurm` job resumes with the storage path its submission set: the same place, no move."""
    from raytrain import train_run

    _checkpoint(run_dir, "checkpoint_000001", 1)
    _rows(run_dir, 1)
    same = [f"experiment.storage_path={tmp_path / 'results'}", "experiment.name=tiny", "stop.training_iteration=5"]
    assert train_run.prepare(None, same, resume=run_dir).checkpoint is not None


@pytest.mark.parametrize("command", [["train", "--resume"]])
def test_a_runs_checkpoints_folder_names_its_run(run_dir, no_ray_start, command):
    """It said the folder "holds 2 run folders of `raytrain train` (checkpoint_000001, checkpoint_000002)" and named a
    checkpoint as the run folder to give, which was then refused as a checkpoint. (`eval` takes the folder: it
    evaluates the run's latest checkpoint.)"""
    _checkpoint(run_dir, "checkpoint_000001", 1)
    _checkpoint(run_dir, "checkpoint_000002", 2)
    _rows(run_dir, 2)
    before = _snapshot(run_dir)
    result = runner.invoke(app, [*command, str(run_dir / "checkpoints")])
    assert result.exit_code == 2, result.output
    assert (f"{run_dir / 'checkpoints'} is the checkpoints folder of the run {run_dir}: give the run folder, "
            f"`raytrain {' '.join(command)} {run_dir}`") in " ".join(result.output.split()), result.output
    assert _snapshot(run_dir) == before


@pytest.mark.parametrize(("line", "key"), [
    ("experiment: {{name: other_name, seed: 1, storage_path: {storage}}}", "experiment.name"),
    ("experiment: {{name: tiny, seed: 1, storage_path: /tmp/elsewhere_of_a_resume}}", "experiment.storage_path"),
])
def test_a_resume_whose_file_moves_its_run_is_refused(run_dir, tmp_path, no_ray_start, line, key):
    """`train OTHER.yaml --resume RUN` with another experiment name or storage path trained on in the run's folder,
    exit 0 without a word, and its config.yaml then named the other name and path (a --set of them was refused)."""
    _checkpoint(run_dir, "checkpoint_000001", 1)
    _rows(run_dir, 1)
    other = tmp_path / "other.yaml"
    other.write_text(TINY.format(storage=tmp_path / "results").replace(
        TINY.splitlines()[0].format(storage=tmp_path / "results"), line.format(storage=tmp_path / "results")))
    before = _snapshot(run_dir)
    result = runner.invoke(app, ["train", str(other), "--resume", str(run_dir)])
    assert result.exit_code == 2, result.output
    had = {"experiment.name": "tiny", "experiment.storage_path": str(tmp_path / "results")}[key]
    assert (f"{other}:1: {key}: a resumed run stays in its folder, {run_dir}, whose {key} is {had}: write that (or "
            "leave it out), or start a new run (raytrain train FILE); nothing was changed") in " ".join(result.output.split()), \
        result.output
    assert _snapshot(run_dir) == before and not Path("/tmp/elsewhere_of_a_resume").exists()


def test_a_resume_with_a_file_keeps_the_runs_place_and_tells_what_the_file_changes(run_dir, tmp_path, no_ray_start):
    """A file that leaves the name out (so the env's gives it) resumes in the run's place; each setting the file
    changes from the run's config is told, as `--set` overrides are."""
    from raytrain import train_run

    _checkpoint(run_dir, "checkpoint_000001", 1)
    _rows(run_dir, 1)
    other = tmp_path / "other.yaml"
    other.write_text("environment: {env: CartPole-v1}\nenv_runners: {num_env_runners: 0}\n"
                     "training: {train_batch_size: 200, minibatch_size: 100, num_epochs: 2, lr: 0.0003}\n"
                     "stop: {training_iteration: 4}\n"
                     f"experiment: {{seed: 1, storage_path: {tmp_path / 'results'}}}\n")
    lines: list[str] = []
    prepared = train_run.prepare(other, ["stop.training_iteration=5"], resume=run_dir, notify=lines.append)
    assert (prepared.cfg.experiment.name, prepared.cfg.experiment.storage_path) == ("tiny", str(tmp_path / "results"))
    changed = [line for line in lines if "in the run" in line]
    assert changed == [
        f"notice: {other}:3: training.lr: 0.0003 here (unset in the run): the resumed run trains on with it",
        f"notice: {other}:3: training.num_epochs: 2 here (1 in the run): the resumed run trains on with it",
    ], lines


@pytest.mark.parametrize(("lost", "said"), [
    # It said ".../params.json is not the params.json of a raytrain sweep's trial", of a file that does not exist.
    ("config.yaml", "has no config.yaml (the run's config, which raytrain writes in every checkpoint): it is incomplete "
                    "(copied or synced in part?): give a complete one"),
    # It said "... is a run folder without a complete checkpoint".
    (STATE_FILE, f"is a checkpoint without its {STATE_FILE} (raytrain writes it last, in every checkpoint): it is "
                 "incomplete (copied or synced in part?): give a complete one"),
])
def test_eval_of_a_checkpoint_copied_in_part_says_what_it_lacks(run_dir, no_ray_start, tmp_path, lost, said):
    checkpoint = _checkpoint(run_dir, "checkpoint_000001", 1)
    (checkpoint / "rllib_checkpoint.json").write_text("{}")
    copy = tmp_path / "mycp"
    shutil.copytree(checkpoint, copy)
    (copy / lost).unlink()
    result = runner.invoke(app, ["eval", str(copy)])
    assert result.exit_code == 2, result.output
    assert f"error: {copy} {said}" in " ".join(result.output.split()), result.output


def test_a_train_config_that_writes_no_checkpoint_at_all_is_warned_of(tmp_path, no_ray_start):
    """checkpoint_frequency: 0 and checkpoint_at_end: false: no checkpoint along the way, at the end or on Ctrl-C,
    so nothing to resume or evaluate; it was taken without a word."""
    from raytrain import train_run

    path = tmp_path / "none.yaml"
    path.write_text(TINY.format(storage=tmp_path / "results").replace(
        "experiment: {", "experiment: {checkpoint_frequency: 0, checkpoint_at_end: false, "))
    lines: list[str] = []
    train_run.prepare(path, [], notify=lines.append)
    assert [line for line in lines if "no checkpoint" in line] == [
        f"warning: {path}:1: experiment.checkpoint_at_end: false with experiment.checkpoint_frequency 0: the run "
        "writes no checkpoint at all (none along the way, at its end or on Ctrl-C), so there is nothing to resume or "
        "evaluate; set checkpoint_at_end: true (the default) or a frequency"]


def test_a_run_folder_that_lost_its_config_yaml_is_told_how_to_put_it_back(run_dir, no_ray_start):
    """`train --resume` said it was no run folder; `eval` took its checkpoints/ for an experiment of 2 runs."""
    _checkpoint(run_dir, "checkpoint_000001", 1)
    newest = _checkpoint(run_dir, "checkpoint_000002", 2)
    (run_dir / "config.yaml").unlink()
    before = _snapshot(run_dir)
    for args in (["train", "--resume", str(run_dir)], ["eval", str(run_dir)]):
        result = runner.invoke(app, args)
        assert result.exit_code == 2, result.output
        assert (f"{run_dir} is a run folder that has lost its config.yaml; its newest checkpoint holds the config it was "
                f"saved with: copy it back (cp {newest / 'config.yaml'} {run_dir}/), or give the checkpoint itself") \
            in " ".join(result.output.split()), result.output
    assert _snapshot(run_dir) == before

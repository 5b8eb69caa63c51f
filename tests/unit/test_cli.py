"""What a user sees from the CLI: exit codes, messages, no tracebacks."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from raytrain.cli import app
from raytrain.runs import RLLIB_PARTS

runner = CliRunner()


def test_validate_bad_file_exit_2_with_location_no_traceback(write_yaml):
    path = write_yaml("environment: {env: CartPole-v1}\ntraining:\n  minibatch_sise: 3\n")
    result = runner.invoke(app, ["config", "validate", str(path), "--no-rllib"])
    assert result.exit_code == 2
    assert f"error: {path}:3: training.minibatch_sise: unknown key; did you mean 'minibatch_size'?" in result.output
    assert "Traceback" not in result.output


def test_validate_good_file(write_yaml):
    path = write_yaml("environment: {env: CartPole-v1}\n")
    result = runner.invoke(app, ["config", "validate", str(path)])
    assert result.exit_code == 0, result.output
    assert f"ok: {path}" in result.output


def test_validate_reports_rllib_rejections(write_yaml):
    # Valid for raytrain's schema, rejected by RLlib's own PPOConfig.validate().
    path = write_yaml("environment: {env: CartPole-v1}\nevaluation: {evaluation_interval: 1, evaluation_duration: auto}\n")
    result = runner.invoke(app, ["config", "validate", str(path)])
    assert result.exit_code == 2
    assert "RLlib rejects the config" in result.output and "evaluation_duration=auto" in result.output
    assert "Traceback" not in result.output


def test_an_rllib_rejection_points_at_the_setting_it_names(write_yaml, tmp_path):
    """RLlib's cross-field checks name a setting; the error gave only the file, with RLlib's advice to set
    `config.experimental(_validate_config=False)`, which a raytrain config cannot do."""
    path = write_yaml("environment: {env: CartPole-v1}\nevaluation:\n  evaluation_interval: 1\n"
                      "  evaluation_parallel_to_training: true\n")
    said = ("evaluation.evaluation_parallel_to_training: RLlib rejects the config: `evaluation_parallel_to_training` "
            "can only be done if `evaluation_num_env_runners` > 0! Try setting `config.evaluation_parallel_to_training` "
            "to False.")
    for args in (["config", "validate", str(path)], ["train", str(path), "--dry-run"]):
        result = runner.invoke(app, args)
        assert result.exit_code == 2, result.output
        assert f"error: {path}:4: {said}" in " ".join(result.output.split())
        assert "_validate_config" not in result.output
    plain = write_yaml("environment: {env: CartPole-v1}\n", "plain.yaml")
    result = runner.invoke(app, ["train", str(plain), "--dry-run", "--set", "evaluation={evaluation_interval: 1, "
                                 "evaluation_duration: auto}"])
    assert result.exit_code == 2, result.output
    assert ("error: --set evaluation={evaluation_interval: 1, evaluation_duration: auto}: evaluation.evaluation_duration: "
            "RLlib rejects the config: `evaluation_duration=auto` not supported") in " ".join(result.output.split())
    sweep = write_yaml(f"base: plain.yaml\nname: s\ncheckpoint: {{storage_path: {tmp_path / 'r'}}}\n"
                       "set: {evaluation.evaluation_interval: 1, evaluation.evaluation_parallel_to_training: true}\n",
                       "sweep.yaml")
    result = runner.invoke(app, ["tune", str(sweep), "--dry-run"])
    assert result.exit_code == 2, result.output
    assert (f"error: {sweep}:4: evaluation.evaluation_parallel_to_training: RLlib rejects the base config {plain} (with "
            "the sweep's `set:` and `stop:`): `evaluation_parallel_to_training` can only") in " ".join(result.output.split())


def test_rllib_warnings_are_said_once_at_the_setting_they_name(write_yaml, tmp_path, capfd):
    """RLlib's config checks log warnings (a setting it ignores) with a timestamp of their own, three times over
    for one `raytrain train --dry-run`, naming no file or line."""
    path = write_yaml("environment: {env: CartPole-v1}\nevaluation:\n  evaluation_interval: 1\n"
                      "  evaluation_num_env_runners: 1\n  evaluation_parallel_to_training: true\n"
                      "  evaluation_duration: auto\n  evaluation_duration_unit: episodes\n"
                      "env_runners: {num_env_runners: 0}\nstop: {training_iteration: 2}\n")
    said = (f"warning: {path}:6: evaluation.evaluation_duration: RLlib: When using `config.evaluation_duration='auto'`, "
            "the sampling unit used is always 'timesteps'! You have set `config.evaluation_duration_unit='episodes'`, "
            "which is ignored.")
    sweep = write_yaml(f"base: {path.name}\nname: s\ncheckpoint: {{storage_path: {tmp_path / 'r'}}}\n", "sweep.yaml")
    for args in (["train", str(path), "--dry-run"], ["config", "validate", str(path)], ["tune", str(sweep), "--dry-run"]):
        result = runner.invoke(app, args)
        assert result.exit_code == 0, result.output
        shown = " ".join((result.output + capfd.readouterr().err).split())
        assert shown.count(said) == 1, shown
        assert "WARNING" not in shown


def test_show_json_has_both_views(write_yaml):
    path = write_yaml("environment: {env: CartPole-v1}\ntraining: {lambda: 0.9, train_batch_size: 500}\n")
    result = runner.invoke(app, ["config", "show", str(path), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["raytrain"]["training"] == {"lambda": 0.9, "train_batch_size": 500}
    assert data["rllib"]["training"] == {"lambda_": 0.9, "train_batch_size_per_learner": 500}


def test_show_prints_overrides(write_yaml):
    path = write_yaml("environment: {env: CartPole-v1}\n")
    result = runner.invoke(app, ["config", "show", str(path), "--set", "training.lr=0.01"])
    assert result.exit_code == 0
    assert "override: training.lr = 0.01 (not set in the file)" in result.output


def test_schema_is_json_schema_with_docs():
    result = runner.invoke(app, ["config", "schema"])
    assert result.exit_code == 0
    schema = json.loads(result.stdout)
    assert schema["$schema"].startswith("https://json-schema.org/")
    training = schema["$defs"]["TrainingConfig"]["properties"]
    assert "lambda" in training and "minibatch_size" in training
    assert training["minibatch_size"]["description"] == "SGD minibatch size."


def test_schema_of_sweep_and_cluster_files():
    for kind, key, section in (("sweep", "search", "pbt"), ("cluster", "head", "ssh")):
        result = runner.invoke(app, ["config", "schema", "--kind", kind])
        assert result.exit_code == 0, result.output
        schema = json.loads(result.stdout)
        assert schema["title"] == f"raytrain {kind} config"
        assert key in schema["properties"] and section in schema["properties"]
    bad = runner.invoke(app, ["config", "schema", "--kind", "sweeps"])
    assert bad.exit_code == 2 and "choose train, sweep, cluster or slurm" in bad.output


def test_train_dry_run_starts_nothing(write_yaml, tmp_path):
    storage = tmp_path / "results"
    path = write_yaml(f"environment: {{env: CartPole-v1}}\nexperiment: {{storage_path: {storage}}}\n")
    result = runner.invoke(app, ["train", str(path), "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "train_batch_size_per_learner" not in result.output  # nothing set, nothing claimed
    assert "callbacks_class" in result.output
    assert not storage.exists()


def test_tune_dry_run_with_set_and_name_starts_nothing(tmp_path):
    storage = tmp_path / "results"
    # No env runners: with RLlib's default 2 a trial needs 3 CPUs, more than a 2-CPU machine has (refused).
    (tmp_path / "base.yaml").write_text("environment: {env: CartPole-v1}\nenv_runners: {num_env_runners: 0}\n"
                                        "stop: {training_iteration: 3}\n")
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(
        f"base: base.yaml\nsearch: {{algorithm: random, num_samples: 2}}\ncheckpoint: {{storage_path: {storage}}}\n"
        "space: {training.lr: {distribution: loguniform, low: 0.0001, high: 0.01}}\n"
    )
    result = runner.invoke(app, ["tune", str(sweep), "--dry-run", "--name", "renamed", "--set", "search.num_samples=5", "--set", "set.training.gamma=0.9"])
    assert result.exit_code == 0, result.output
    import yaml

    shown = yaml.safe_load(result.stdout.split("# experiment folder:")[0])
    assert shown["run_config"]["name"] == "renamed" and shown["tune_config"]["num_samples"] == 5
    assert shown["param_space"]["raytrain"]["overrides"]["training.lr"] == {"loguniform": [0.0001, 0.01]}
    assert f"# experiment folder: {storage / 'renamed'}" in result.stdout
    assert not storage.exists()  # a dry run writes nothing
    bad = runner.invoke(app, ["tune", str(sweep), "--dry-run", "--set", "search.algorithm=pbtt"])
    assert bad.exit_code == 2 and "search.algorithm" in bad.output and "Traceback" not in bad.output


def test_train_config_error_exit_2(write_yaml):
    path = write_yaml("environment: {env: NoSuchEnv-v0}\n")
    result = runner.invoke(app, ["train", str(path)])
    assert result.exit_code == 2
    assert f"{path}:1: environment.env" in result.output


def test_train_needs_file_or_resume():
    result = runner.invoke(app, ["train"])
    assert result.exit_code == 2
    assert "--resume" in result.output


def test_verbose_shows_traceback(write_yaml):
    path = write_yaml("environment: {env: NoSuchEnv-v0}\n")
    result = runner.invoke(app, ["--verbose", "train", str(path)])
    assert result.exit_code == 2
    assert "Traceback" in result.output


def test_python_m_and_help_do_not_import_ray():
    code = "import sys, runpy; sys.argv=['raytrain','--help']\ntry:\n  runpy.run_module('raytrain', run_name='__main__')\nexcept SystemExit: pass\nprint('ray' in sys.modules, 'torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "train" in out
    assert out.strip().endswith("False False")


SWEEP = "base: base.yaml\nsearch: {algorithm: random, num_samples: 2}\nspace:\n  training.lr: {distribution: loguniform, low: 1.0e-4, high: 1.0e-3}\n"
CLUSTER = "name: c1\nhead: {host: localhost}\nworkers:\n  - {host: w1, address: 10.0.0.2}\nauth: {mode: token}\n"


def test_validate_tells_sweep_and_cluster_files_from_train_files(write_yaml, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    write_yaml("environment: {env: CartPole-v1}\n", "base.yaml")
    sweep = write_yaml(SWEEP + f"checkpoint: {{storage_path: {tmp_path / 'results'}}}\n", "sweep.yaml")
    cluster = write_yaml(CLUSTER, "cluster.yaml")
    result = runner.invoke(app, ["config", "validate", str(sweep), str(cluster)])
    assert result.exit_code == 0, result.output
    assert f"ok: {sweep} (sweep: the base and 2 trial config(s)" in result.output
    assert f"ok: {cluster} (cluster: the schema and the start plan: 2 node(s)" in result.output
    assert not (tmp_path / "results").exists() and not (tmp_path / ".raytrain").exists()


def test_validate_errors_of_each_kind_exit_2_with_file_line(write_yaml):
    write_yaml("environment: {env: CartPole-v1}\n", "base.yaml")
    sweep = write_yaml(SWEEP.replace("training.lr:", "training.lrr:"), "sweep.yaml")
    cluster = write_yaml(CLUSTER.replace("10.0.0.2", "10.0.0.2; touch /tmp/x"), "cluster.yaml")
    train = write_yaml("environment: {env: CartPole-v1}\ntraining:\n  lr: -1\n", "train.yaml")
    for path, line, key, kind in ((sweep, 4, "space.training.lrr", "sweep"), (cluster, 4, "workers.0.address", "cluster"),
                                  (train, 3, "training.lr", "train")):
        result = runner.invoke(app, ["config", "validate", str(path), "--no-rllib"])
        assert result.exit_code == 2, result.output
        assert f"error: {path}:{line}: {key}: " in result.output
        assert f"note: {path} was checked as a {kind} file" in result.output
        assert "Traceback" not in result.output


def test_validate_unknown_or_mixed_kind_exit_2(write_yaml):
    train = write_yaml("environment: {env: CartPole-v1}\n", "train.yaml")
    bad = runner.invoke(app, ["config", "validate", str(train), "--kind", "sweeps"])
    assert bad.exit_code == 2 and "--kind 'sweeps': choose train, sweep, cluster or slurm" in bad.output
    mixed = write_yaml("name: x\nhead: {host: localhost}\nsearch: {algorithm: pbt}\n", "mixed.yaml")
    result = runner.invoke(app, ["config", "validate", str(mixed)])
    assert result.exit_code == 2
    assert f"{mixed}:2: head: cannot tell which kind of raytrain file this is" in result.output
    assert "search (sweep); head (cluster)" in result.output
    wrong = runner.invoke(app, ["config", "validate", str(train), "--kind", "cluster"])
    assert wrong.exit_code == 2
    assert (f"{train}: a train config (it has no section of a sweep, cluster or Slurm file), not a cluster file: "
            f"train it with `raytrain train {train}`") in " ".join(wrong.output.split())
    assert "checked as a cluster file (--kind), but its sections look like a train file" in wrong.output
    given = runner.invoke(app, ["config", "validate", str(train), "--kind", "train", "--no-rllib"])
    assert given.exit_code == 0 and f"ok: {train} (train: " in given.output


@pytest.mark.parametrize(
    "command,kind,expected",
    [
        (["train", "{file}", "--dry-run"], "sweep", "a sweep file (it has base, checkpoint, search, space), not a train config: run it "
         "with `raytrain tune {file}`"),
        (["tune", "{file}", "--dry-run"], "train", "a train config (it has no section of a sweep, cluster or Slurm file), "
         "not a sweep file: train it with `raytrain train {file}`"),
        (["cluster", "up", "{file}", "--dry-run"], "sweep", "a sweep file (it has base, checkpoint, search, space), not a cluster "
         "file: run it with `raytrain tune {file}`"),
        (["train", "{train}", "--cluster", "{file}", "--dry-run"], "sweep", "not a cluster file: run it with `raytrain tune"),
        (["tune", "{sweep}", "--slurm", "{file}", "--dry-run"], "cluster", "a cluster file (it has head, workers), not a Slurm file: "
         "start it with `raytrain cluster up {file}`, or give it as `--cluster {file}`"),
        (["train", "{file}", "--dry-run"], "slurm", "a Slurm file (it has cpus_per_node, nodes), not a train config: give "
         "it as `--slurm {file}` to `raytrain tune` or `raytrain train`"),
    ],
)
def test_a_file_of_another_kind_says_which_command_takes_it(write_yaml, tmp_path, monkeypatch, command, kind, expected):
    """`raytrain train sweep.yaml` gave an `unknown section` error for each of the sweep's sections."""
    monkeypatch.setenv("HOME", str(tmp_path))
    train = write_yaml("environment: {env: CartPole-v1}\n", "base.yaml")
    sweep = write_yaml(SWEEP + f"checkpoint: {{storage_path: {tmp_path / 'results'}}}\n", "sweep.yaml")
    files = {"train": train, "sweep": sweep, "cluster": write_yaml(CLUSTER, "cluster.yaml"),
             "slurm": write_yaml("nodes: 2\ncpus_per_node: 4\n", "slurm.yaml")}
    fill = {"file": files[kind], "train": train, "sweep": sweep}
    before = sorted(p.name for p in tmp_path.iterdir())
    result = runner.invoke(app, [part.format(**fill) for part in command])
    assert result.exit_code == 2, result.output
    output = " ".join(result.output.split())
    assert f"error: {files[kind]}: " in output and expected.format(**fill) in output, output
    assert "unknown section" not in output and "unknown key" not in output
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_show_sweep_and_cluster(write_yaml, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    write_yaml("environment: {env: CartPole-v1}\ntraining: {gamma: 0.9}\n", "base.yaml")
    sweep = write_yaml(SWEEP + "set: {training.lambda: 0.8}\n", "sweep.yaml")
    data = json.loads(runner.invoke(app, ["config", "show", str(sweep), "--json"]).stdout)
    assert data["kind"] == "sweep" and data["sweep"]["search"]["num_samples"] == 2
    assert data["base"]["training"] == {"gamma": 0.9, "lambda": 0.8}
    # A trial's folder and checkpoints are the sweep's: the base config's own are not shown beside them.
    assert data["sweep"]["checkpoint"]["frequency"] == 5 and "checkpoint_frequency" not in data["base"]["experiment"]
    assert not {"name", "storage_path", "num_to_keep", "checkpoint_at_end"} & set(data["base"]["experiment"])
    shown = runner.invoke(app, ["config", "show", str(sweep)]).stdout
    assert "checkpoint_frequency" not in shown and "its name, storage and checkpoints are the sweep's" in shown
    cluster = write_yaml(CLUSTER, "cluster.yaml")
    text = runner.invoke(app, ["config", "show", str(cluster)])
    assert text.exit_code == 0, text.output
    assert "# resolved cluster" in text.stdout and "name: c1" in text.stdout
    assert "[w1] ssh " in text.stdout and "ray start --address" in text.stdout
    assert "[localhost] " in text.stdout and "ray start --head" in text.stdout
    assert not (tmp_path / ".raytrain").exists()  # the token is neither made nor read


@pytest.mark.parametrize("code, status, stderr", [(None, 0, ""), (3, 3, ""), ("bad news", 1, "bad news\n")])
def test_exit_process_ends_like_sys_exit_without_the_teardown(tmp_path, code, status, stderr):
    """With torch loaded the process ends by os._exit, after what a normal exit does first: non-daemon threads
    finish, atexit handlers run, unflushed output is written; the status and message are sys.exit's."""
    script = (
        "import atexit, sys, threading, time, torch\n"
        "from raytrain.cli import exit_process\n"
        f"out = {str(tmp_path)!r}\n"
        "atexit.register(lambda: open(out + '/atexit', 'w').write('ran'))\n"
        "threading.Thread(target=lambda: (time.sleep(0.5), open(out + '/thread', 'w').write('done'))).start()\n"
        "sys.stdout.write('no newline, not flushed')\n"
        f"exit_process({code!r})\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == status
    assert done.stdout == "no newline, not flushed"
    assert done.stderr == stderr
    assert (tmp_path / "atexit").read_text() == "ran" and (tmp_path / "thread").read_text() == "done"


def test_a_run_joined_with_cluster_warns_when_its_checkpoints_are_off_the_clusters_share(tmp_path, monkeypatch):
    """`storage.path` of a cluster file is its shared checkpoint folder; a train config or sweep left at
    ~/raytrain_results wrote elsewhere without a word (a multi-node sweep then stopped at Tune's own check)."""
    for key in ("RAY_ADDRESS", "RAY_AUTH_MODE", "RAY_AUTH_TOKEN_PATH"):  # --cluster sets them for the driver
        monkeypatch.setenv(key, "")
    share = tmp_path / "share"
    share.mkdir()
    cluster = tmp_path / "lab.yaml"
    cluster.write_text(f"name: lab\nhead: {{host: localhost}}\nstorage: {{path: {share}}}\nauth: {{mode: disabled}}\n")
    configs = Path(__file__).resolve().parents[2] / "configs"
    train = ["train", str(configs / "ppo_cartpole.yaml"), "--cluster", str(cluster), "--dry-run"]
    result = runner.invoke(app, [*train, "--set", f"experiment.storage_path={tmp_path / 'here'}"])
    assert result.exit_code == 0, result.output
    assert (f"warning: experiment.storage_path {tmp_path / 'here'} is outside the shared storage.path {share} of "
            f"{cluster}: checkpoints written there are not where the other nodes look; to keep them on the share: "
            f"--set experiment.storage_path={share}") in " ".join(result.output.split())
    result = runner.invoke(app, [*train, "--set", f"experiment.storage_path={share / 'runs'}"])
    assert result.exit_code == 0 and "warning: experiment.storage_path" not in result.output, result.output
    sweep = ["tune", str(configs / "ppo_pbt.yaml"), "--cluster", str(cluster), "--dry-run"]
    result = runner.invoke(app, [*sweep, "--set", f"checkpoint.storage_path={tmp_path / 'here'}"])
    assert result.exit_code == 0, result.output
    assert f"warning: checkpoint.storage_path {tmp_path / 'here'} is outside the shared storage.path {share}" in " ".join(result.output.split())
    result = runner.invoke(app, [*sweep, "--set", f"checkpoint.storage_path={share}"])
    assert result.exit_code == 0 and "outside the shared storage.path" not in result.output, result.output


def test_an_interrupted_build_says_interrupted_without_rays_half_built_objects(tmp_path):
    """A SIGTERM during an Algorithm's build (eval, a second after Ray connected) left a LearnerGroup half
    made; at exit its `__del__` printed "Exception ignored in: <function LearnerGroup.__del__ ...>
    AttributeError: 'LearnerGroup' object has no attribute '_is_shut_down'" under `interrupted`. Other
    unraisable exceptions still print."""
    import subprocess
    import sys

    script = tmp_path / "interrupted.py"
    script.write_text(
        "import os, signal\n"
        "from raytrain.cli.common import interrupt_on_signals\n"
        "class LearnerGroup:\n"
        "    def __init__(self):\n"
        "        os.kill(os.getpid(), signal.SIGTERM)\n"
        "        self._is_shut_down = False\n"
        "    def __del__(self):\n"
        "        if not self._is_shut_down: pass\n"
        "LearnerGroup.__del__.__module__ = 'ray.rllib.core.learner.learner_group'  # as RLlib defines it\n"
        "class Mine:\n"
        "    def __del__(self):\n"
        "        raise AttributeError('mine')\n"
        "interrupt_on_signals()\n"
        "try:\n"
        "    LearnerGroup()\n"
        "except KeyboardInterrupt:\n"
        "    print('interrupted', flush=True)\n"
        "Mine()\n"
    )
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert result.stdout == "interrupted\n", result.stderr
    assert "LearnerGroup" not in result.stderr and "_is_shut_down" not in result.stderr, result.stderr
    assert "AttributeError: mine" in result.stderr


@pytest.mark.parametrize(
    "stray,expected",
    [
        # A section of a sweep, cluster or Slurm file in a train config is a misplaced setting, not a file of that
        # kind: the refusal was `a sweep file (it has checkpoint), not a train config: run it with raytrain tune`.
        ("checkpoint: {frequency: 5}", "checkpoint: unknown section; a train run's checkpoints are set in "
         "experiment: checkpoint_frequency, num_to_keep, checkpoint_at_end"),
        ("time_budget_s: 600", "time_budget_s: unknown section; a train run's time limit is stop: {time_total_s: 600}"),
        ("workers: 2", "workers: unknown section; a train config's env runners are env_runners: {num_env_runners: N}"),
        ("storage_path: /tmp/runs", "storage_path: unknown section; it belongs in the 'experiment' section "
         "(experiment: {storage_path: ...})"),
        ("space: {training.lr: {distribution: choice, values: [0.1]}}", "space: unknown section; 'space' is a "
         "section of a sweep file (raytrain tune), whose base: names a train config like this one"),
        # A key of one section written at the top level: it said "unknown section; did you mean 'env_runners'?".
        ("num_env_runners: 2", "num_env_runners: unknown section; it belongs in the 'env_runners' section "
         "(env_runners: {num_env_runners: ...})"),
        ("seed: 3", "seed: unknown section; it belongs in the 'experiment' section (experiment: {seed: ...})"),
        # The experiment-level names of RLlib's and Tune's former files (`rllib train -f`, `tune.run`): it said
        # "unknown section; valid sections: ..." or, for `resume`, "did you mean 'resources'?".
        ("checkpoint_freq: 5", "checkpoint_freq: unknown section; RLlib's checkpoint_freq is experiment: "
         "{checkpoint_frequency: ...} here"),
        ("keep_checkpoints_num: 2", "keep_checkpoints_num: unknown section; RLlib's keep_checkpoints_num is "
         "experiment: {num_to_keep: ...} here"),
        ("local_dir: /tmp/runs", "local_dir: unknown section; RLlib's local_dir is experiment: {storage_path: ...} here"),
        ("run: PPO", "run: unknown section; raytrain trains PPO, and no setting names the algorithm: leave it out"),
        ("run: DQN", "run: unknown section; raytrain trains PPO only, not DQN: leave it out"),
        ("algorithm: PPO", "algorithm: unknown section; raytrain trains PPO, and no setting names the algorithm: "
         "leave it out"),
        ("resume: true", "resume: unknown section; a run is resumed by a command, not a setting: raytrain train "
         "--resume RUN_FOLDER"),
    ],
)
def test_a_stray_section_of_a_train_config_is_placed_at_its_line(write_yaml, tmp_path, monkeypatch, stray, expected):
    monkeypatch.setenv("HOME", str(tmp_path))
    train = write_yaml(f"environment:\n  env: CartPole-v1\n{stray}\n", "train.yaml")
    result = runner.invoke(app, ["train", str(train), "--dry-run"])
    output = " ".join(result.output.split())
    assert result.exit_code == 2, result.output
    assert f"error: {train}:3: {expected}" in output, output
    assert "raytrain cluster up" not in output and "--slurm" not in output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train.yaml"]


def test_a_file_with_sections_of_a_train_config_and_of_a_sweep_is_not_told_as_either(write_yaml, tmp_path, monkeypatch):
    """`config validate` checked a train config with a stray `checkpoint:` as a sweep, and listed its train
    sections as unknown keys of a sweep."""
    monkeypatch.setenv("HOME", str(tmp_path))
    mixed = write_yaml("environment:\n  env: CartPole-v1\ncheckpoint:\n  frequency: 5\n", "mixed.yaml")
    result = runner.invoke(app, ["config", "validate", str(mixed), "--no-rllib"])
    output = " ".join(result.output.split())
    assert result.exit_code == 2, result.output
    assert (f"error: {mixed}:3: checkpoint: cannot tell which kind of raytrain file this is: it has sections of more "
            "than one kind: environment (train); checkpoint (sweep)") in output, output
    assert "pass --kind train, sweep, cluster or slurm" in output
    as_train = runner.invoke(app, ["config", "validate", str(mixed), "--no-rllib", "--kind", "train"])
    assert as_train.exit_code == 2 and f"{mixed}:3: checkpoint: unknown section" in " ".join(as_train.output.split())


@pytest.mark.parametrize(
    "stray,expected",
    [
        # It said "unknown key; valid keys: name, base, ..." (or "did you mean 'train'?" for `training:`).
        ("num_samples: 8", "num_samples: unknown key; it belongs in the 'search' section (search: {num_samples: ...})"),
        ("max_failures: 3", "max_failures: unknown key; it belongs in the 'failure' section (failure: {max_failures: ...})"),
        ("perturbation_interval: 4", "perturbation_interval: unknown key; it belongs in the 'pbt' or 'pb2' section"),
        ("training: {lr: 0.001}", "training: unknown key; 'training' is a section of a train config: every trial "
         "starts from base: (or train:); set a value for every trial with set: {training.lr: ...}, or search it under space:"),
        ("lr: 0.001", "lr: unknown key; it is a train config's training.lr: set it for every trial with "
         "set: {training.lr: ...}, or search it under space:"),
        ("head: {host: a}", "head: unknown key; 'head' is a section of a cluster file (raytrain cluster up)"),
        # The env is not searchable, and a sweep's checkpoints are its own.
        ("env: Pendulum-v1", "env: unknown key; it is a train config's environment.env: set it for every trial with "
         "set: {environment.env: ...}"),
        ("checkpoint_frequency: 5", "checkpoint_frequency: unknown key; experiment.checkpoint_frequency is not used by "
         "a sweep (its experiment folder and checkpoints are its own): write checkpoint.frequency in the sweep file"),
        # Ray Tune's own names (Tuner, TuneConfig, RunConfig, tune.run), as someone who wrote Tune scripts writes
        # them. They said "unknown key; valid keys: ..." or "did you mean 'search'?" / "'checkpoint'?".
        ("scheduler: {type: asha}", "scheduler: unknown key; Tune's scheduler is chosen by search.algorithm here: "
         "pbt, pb2 or asha (search: {algorithm: asha}), with its settings in the section of that name (asha: {max_t: ...})"),
        ("search_alg: optuna", "search_alg: unknown key; Tune's search algorithm is search.algorithm here: random, "
         "grid or optuna (search: {algorithm: optuna}), with Optuna's settings in optuna:"),
        ("param_space: {lr: 0.1}", "param_space: unknown key; Tune's param_space is written here as space: (what is "
         "searched, by the train config's dotted keys: space: {training.lr: {distribution: loguniform, low: ..., "
         "high: ...}}) and set: (one value for every trial: set: {training.gamma: 0.99})"),
        ("config: {lr: 0.1}", "config: unknown key; Tune's param_space is written here as space:"),
        ("tune_config: {num_samples: 4}", "tune_config: unknown key; Tune's TuneConfig is the search section here: "
         "search: {algorithm, num_samples, metric, mode, max_concurrent_trials}"),
        ("run_config: {name: x}", "run_config: unknown key; Tune's RunConfig is written here as name:, stop:, "
         "checkpoint: {storage_path, frequency, num_to_keep, at_end} and failure: {max_failures}"),
        ("resources_per_trial: {cpu: 1}", "resources_per_trial: unknown key; a trial reserves what its train "
         "config's settings ask for: set them for every trial with set: {resources.num_cpus_for_main_process: ..., "
         "learners.num_cpus_per_learner: ..., env_runners.num_env_runners: ...}"),
        ("local_dir: /tmp/x", "local_dir: unknown key; Tune's local_dir is checkpoint: {storage_path: ...} here"),
        ("checkpoint_freq: 5", "checkpoint_freq: unknown key; Tune's checkpoint_freq is checkpoint: {frequency: ...} here"),
        ("keep_checkpoints_num: 2", "keep_checkpoints_num: unknown key; Tune's keep_checkpoints_num is "
         "checkpoint: {num_to_keep: ...} here"),
        ("checkpoint_at_end: true", "checkpoint_at_end: unknown key; Tune's checkpoint_at_end is "
         "checkpoint: {at_end: ...} here"),
        ("resume: true", "resume: unknown key; a sweep is resumed by a command, not a setting: raytrain tune resume "
         "EXPERIMENT_FOLDER (the folder checkpoint.storage_path/name)"),
        # In a section, where it was "valid keys: storage_path, frequency, num_to_keep, at_end".
        ("checkpoint: {checkpoint_freq: 5}", "checkpoint.checkpoint_freq: unknown key; Tune's checkpoint_freq is "
         "checkpoint: {frequency: ...} here"),
        ("checkpoint: {keep_checkpoints_num: 2}", "checkpoint.keep_checkpoints_num: unknown key; Tune's "
         "keep_checkpoints_num is checkpoint: {num_to_keep: ...} here"),
        ("checkpoint: {local_dir: /tmp}", "checkpoint.local_dir: unknown key; Tune's local_dir is "
         "checkpoint: {storage_path: ...} here"),
    ],
)
def test_a_stray_key_of_a_sweep_file_says_where_it_goes(write_yaml, tmp_path, monkeypatch, stray, expected):
    monkeypatch.setenv("HOME", str(tmp_path))
    write_yaml("environment: {env: CartPole-v1}\n", "base.yaml")
    sweep = write_yaml(SWEEP + stray + "\n", "sweep.yaml")
    result = runner.invoke(app, ["tune", str(sweep), "--dry-run"])
    output = " ".join(result.output.split())
    assert result.exit_code == 2, result.output
    assert f"error: {sweep}:5: {expected}" in output, output
    assert "under space:" in expected or "under space:" not in output, output



def test_a_stray_key_of_a_cluster_file_names_its_section(write_yaml, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    cluster = write_yaml(CLUSTER + "user: ubuntu\n", "cluster.yaml")
    result = runner.invoke(app, ["cluster", "up", str(cluster), "--dry-run"])
    output = " ".join(result.output.split())
    assert result.exit_code == 2, result.output
    assert f"error: {cluster}:6: user: unknown key; it belongs in the 'ssh' section (ssh: {{user: ...}})" in output, output


@pytest.mark.parametrize("section", ["space", "set"])
def test_a_sweep_key_without_its_section_names_it_once(write_yaml, tmp_path, monkeypatch, section):
    """`set: {lr: 0.1}` said "is not a searchable key: use a dotted section.key ..." and then again, at the same
    line, "lr: unknown section" of the base config."""
    monkeypatch.setenv("HOME", str(tmp_path))
    write_yaml("environment: {env: CartPole-v1}\n", "base.yaml")
    value = "{distribution: uniform, low: 0.1, high: 0.2}" if section == "space" else "0.1"
    sweep = write_yaml(f"base: base.yaml\nsearch: {{algorithm: random, num_samples: 2}}\n{section}: {{lr: {value}}}\n",
                       "sweep.yaml")
    result = runner.invoke(app, ["tune", str(sweep), "--dry-run"])
    output = " ".join(result.output.split())
    assert result.exit_code == 2, result.output
    assert f"error: {sweep}:3: {section}.lr: is not a searchable key; did you mean 'training.lr'?" in output, output
    assert output.count("error:") == 1, output


def test_a_run_whose_env_module_is_not_importable_here_names_the_folder_it_was_started_in(tmp_path, monkeypatch):
    """A custom env's module beside the config where the run started: `eval` or `train --resume` from another folder
    said only "run raytrain from the folder that holds walk_env_here.py", and the user had to remember which."""
    start = tmp_path / "my project"
    start.mkdir()
    (start / "walk_env_here.py").write_text("raise RuntimeError('not imported in this test')\n")
    run = tmp_path / "runs" / "walk" / "2026-11-29_09-36-57"
    checkpoint = run / "checkpoints" / "checkpoint_000001"
    checkpoint.mkdir(parents=True)
    config = "environment: {env: 'walk_env_here:Walk'}\nstop: {training_iteration: 1}\n"
    for folder in (run, checkpoint):
        (folder / "config.yaml").write_text(config)
    (checkpoint / "raytrain_state.json").write_text('{"iteration": 1}\n')
    for part in RLLIB_PARTS:  # the folders RLlib writes (empty: nothing here loads them)
        (checkpoint / part).mkdir(parents=True)
    (run / "command.txt").write_text(f"# 2026-11-29 09:36:57 in {start}\nraytrain train walk.yaml\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    for args in (["train", "--resume", str(run), "--set", "stop.training_iteration=2"], ["eval", str(run)],
                 ["eval", str(checkpoint)]):
        result = runner.invoke(app, args)
        output = " ".join(result.output.split())
        assert result.exit_code == 2, result.output
        assert "cannot import module 'walk_env_here'" in output, output
        assert (f"This run was started in {start} (its command.txt), where walk_env_here.py is: run raytrain from "
                f"there (cd '{start}')") in output, output


def test_a_sweep_trial_whose_env_module_is_not_importable_here_names_the_sweeps_start(tmp_path, monkeypatch):
    from raytrain.errors import ConfigError, ConfigIssue
    from raytrain.runs import where_it_imported

    experiment = tmp_path / "sweeps" / "walk"
    trial = experiment / "walk_00000" / "checkpoint_000001"
    trial.mkdir(parents=True)
    (experiment / "raytrain_sweep.json").write_text("{}\n")
    (experiment / "command.txt").write_text(f"# 2026-11-29 09:36:57 in {tmp_path}\nraytrain tune walk.yaml\n")
    monkeypatch.chdir(experiment)
    said = where_it_imported(ConfigError([ConfigIssue("params.json", "environment.env", "cannot import module "
                                                      "'walk_env_here': No module named 'walk_env_here'")]), trial)
    assert str(said.issues[0]).endswith(f"This sweep was started in {tmp_path} (its command.txt): run raytrain from "
                                        f"there (cd {tmp_path})")


@pytest.mark.parametrize("override,dotted", [("training.lr=0.001", "training.lr"), ("lr=0.001", "training.lr"),
                                             ("env_runners.num_envs_per_env_runner=4", "env_runners.num_envs_per_env_runner")])
def test_a_train_setting_given_to_tune_with_set_is_told_the_set_that_works(write_yaml, tmp_path, monkeypatch, override,
                                                                           dotted):
    """`raytrain tune SWEEP --set training.lr=0.001` was told to write `set: {training.lr: ...}` in the file."""
    monkeypatch.setenv("HOME", str(tmp_path))
    write_yaml("environment: {env: CartPole-v1}\n", "base.yaml")
    sweep = write_yaml(SWEEP, "sweep.yaml")
    result = runner.invoke(app, ["tune", str(sweep), "--dry-run", "--set", override])
    output = " ".join(result.output.split())
    assert result.exit_code == 2, result.output
    assert f"set it for every trial with --set set.{dotted}={override.partition('=')[2]}" in output or \
        f"set a value for every trial with --set set.{dotted}={override.partition('=')[2]}" in output, output


def test_tune_resume_of_a_sweep_whose_env_module_is_not_importable_here_names_where_it_started(tmp_path, monkeypatch):
    start = tmp_path / "project"
    start.mkdir()
    (start / "walk_env_here.py").write_text("raise RuntimeError('not imported in this test')\n")
    experiment = tmp_path / "sweeps" / "walk"
    experiment.mkdir(parents=True)
    (experiment / "raytrain_sweep.json").write_text(json.dumps({"name": "walk", "algorithm": "random", "metric": "m", "mode": "max",
                                                                "base": {"environment": {"env": "walk_env_here:Walk"}}}))
    (experiment / "tuner.pkl").write_bytes(b"")
    (experiment / "command.txt").write_text(f"# 2026-11-29 09:36:57 in {start}\nraytrain tune walk.yaml\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    result = runner.invoke(app, ["tune", "resume", str(experiment)])
    output = " ".join(result.output.split())
    assert result.exit_code == 2, result.output
    assert (f"This sweep was started in {start} (its command.txt), where walk_env_here.py is: run raytrain from there "
            f"(cd {start})") in output, output


def test_an_error_whose_message_holds_a_traceback_prints_its_last_line(capsys):
    """Tune's TuneError carries the failed trial's whole traceback in its message: it was printed whole, without
    --verbose, under `error: TuneError: Traceback (most recent call last): ...`."""
    import click
    import typer

    from raytrain.cli.common import handle_errors

    class TuneError(Exception):
        pass

    message = ("Traceback (most recent call last):\n  File \"x.py\", line 1, in f\n    f()\n"
               "TypeError: 'float' object is not callable\n")

    @handle_errors
    def fails() -> None:
        raise TuneError(message)

    with pytest.raises((typer.Exit, click.exceptions.Exit)):
        fails()
    said = capsys.readouterr().err
    assert said.splitlines()[0].startswith("error: TuneError: TypeError: 'float' object is not callable")
    assert "Traceback" not in said and "(run with --verbose for the traceback)" in said


@pytest.mark.parametrize(("args", "said"), [
    # `run --workers 2` failed once Ray had started (`ValueError: Invalid address format: `); train, tune and
    # run --workers 1 took it for no address and started a local Ray.
    (["train", "cfg.yaml", "--address", ""], "Invalid value for --address: empty: give a value, or leave --address out"),
    (["run", "p.py", "--main", "main", "--workers", "2", "--address="], "Invalid value for --address: empty: give a "
                                                                          "value, or leave --address out"),
    # An empty path was taken as `.`: eval said ". holds 8 run folders", tune status called the directory a train
    # experiment folder, and train --resume looked for a run there.
    (["eval", ""], "Invalid value for argument 2 (after eval): empty: give a value"),
    (["tune", "status", ""], "Invalid value for argument 3 (after status): empty: give a value"),
    (["train", "--resume", ""], "Invalid value for --resume: empty: give a value, or leave --resume out"),
    (["config", "schema", "-o", ""], "Invalid value for -o: empty: give a value, or leave -o out"),
])
def test_an_empty_argument_is_refused_before_anything_runs(tmp_path, monkeypatch, args, said):
    from .ray_starts import refuse_ray_starts

    monkeypatch.chdir(tmp_path)
    starts: list[str] = []
    refuse_ray_starts(monkeypatch, starts)
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert said in " ".join(result.output.split()), result.output
    assert starts == [] and list(tmp_path.iterdir()) == []


def test_an_empty_argument_of_the_command_a_cluster_runs_is_its_own(tmp_path):
    """`cluster exec FILE -- printf '%s' ''`: what follows `--` is the user's command, empties included."""
    result = runner.invoke(app, ["cluster", "exec", str(tmp_path / "missing.yaml"), "--", "printf", "%s", ""])
    assert "no such file" in result.output and "give a value" not in result.output, result.output


def test_validate_checks_a_train_configs_storage_path_as_train_does(write_yaml, tmp_path):
    """`config validate` said ok of `storage_path: /etc/hostname` (a file), which `train` and `--dry-run` refuse."""
    afile = tmp_path / "afile"
    afile.write_text("x")
    path = write_yaml(f"experiment: {{storage_path: {afile}}}\nenvironment: {{env: CartPole-v1}}\n")
    for args in (["config", "validate", str(path), "--no-rllib"], ["train", str(path), "--dry-run"]):
        result = runner.invoke(app, args)
        assert result.exit_code == 2, result.output
        assert f"{path}:1: experiment.storage_path: not writable: {afile} is not a directory" in " ".join(
            result.output.split()), result.output


def test_a_file_of_a_checkpoint_given_to_eval_names_its_checkpoint(tmp_path):
    """`eval CHECKPOINT/raytrain_state.json` said "is not a raytrain checkpoint (no raytrain_state.json)"."""
    checkpoint = tmp_path / "run" / "checkpoints" / "checkpoint_000001"
    checkpoint.mkdir(parents=True)
    (checkpoint / "raytrain_state.json").write_text('{"iteration": 1}')
    (checkpoint / "config.yaml").write_text("environment: {env: CartPole-v1}\n")
    for name in ("raytrain_state.json", "config.yaml"):
        result = runner.invoke(app, ["eval", str(checkpoint / name)])
        assert result.exit_code == 2, result.output
        assert (f"{checkpoint / name} is a file of the checkpoint {checkpoint}: give the checkpoint folder, "
                f"`raytrain eval {checkpoint}`") in " ".join(result.output.split()), result.output


def test_output_into_a_file_taken_for_a_folder_says_so(tmp_path):
    """`config schema -o FILE/x.json` said "the folder FILE does not exist"."""
    afile = tmp_path / "afile"
    afile.write_text("x")
    result = runner.invoke(app, ["config", "schema", "-o", str(afile / "x.json")])
    assert result.exit_code == 2, result.output
    assert f"-o {afile / 'x.json'}: {afile} is a file, not a folder" in " ".join(result.output.split()), result.output


def test_a_python_file_given_for_a_config_is_told_configs_are_yaml(tmp_path):
    """It said only "rllib_py.py:2: invalid YAML: mapping values are not allowed here"."""
    script = tmp_path / "ppo.py"
    script.write_text("from ray.rllib.algorithms.ppo import PPOConfig\nconfig = PPOConfig().environment('CartPole-v1')\n")
    for args in (["config", "validate", str(script)], ["train", str(script)], ["config", "import-rllib", str(script)]):
        result = runner.invoke(app, args)
        assert result.exit_code == 2, result.output
        assert (f"{script}: a Python file: raytrain reads YAML (a train config: `raytrain config schema` lists its "
                "settings, and README's table maps RLlib's names)") in " ".join(result.output.split()), result.output


@pytest.mark.parametrize("form", ["file", "module"])
def test_a_pipeline_that_runs_itself_when_imported_is_told_to_guard_it(tmp_path, monkeypatch, form):
    """A script with `Parallel.runner(2)(main)` at its top level and no `__main__` guard ran the whole pipeline as
    raytrain run imported it, then once more from --main, without a word."""
    from .ray_starts import refuse_ray_starts

    (tmp_path / "pipe.py").write_text(
        "from raytrain.framework import Parallel, task\n\n\ndef main():\n    with task.start():\n        pass\n\n\n"
        "Parallel.runner(n_parallel_workers=2)(main)\n")
    monkeypatch.chdir(tmp_path)
    starts: list[str] = []
    refuse_ray_starts(monkeypatch, starts)
    target, main = ("pipe.py", "main") if form == "file" else (".", "pipe.main")
    result = runner.invoke(app, ["run", target, "--main", main, "--workers", "2"])
    assert result.exit_code == 2, result.output
    assert ("pipe.py:9 runs Parallel.runner(...)(main) as it is imported: raytrain run imports the module and runs "
            "--main on every node itself; put that call under `if __name__ == \"__main__\":`") in " ".join(
        result.output.split()), result.output
    assert starts == []


@pytest.mark.parametrize("command", ["logs", "stop"])
def test_tune_logs_and_stop_of_a_folder_say_what_they_take(tmp_path, command):
    """`tune stop results/my_sweep` said only that it needs --cluster FILE."""
    from typer.testing import CliRunner

    from raytrain.cli import app

    result = CliRunner().invoke(app, ["tune", command, str(tmp_path)])
    assert result.exit_code == 2, result.output
    said = " ".join(result.output.split())
    assert f"tune {command} takes the id of a job submitted with `raytrain tune --submit` (it printed it), not a " \
           "folder" in said and f"`raytrain tune status {tmp_path}` shows its trials" in said, said


def test_a_command_run_from_a_deleted_directory_says_so(tmp_path):
    """torch's oneMKL ended every command that imports torch with `Intel oneMKL FATAL ERROR`, exit 2, no word of why."""
    gone = tmp_path / "gone"
    gone.mkdir()
    script = "import os, sys; os.chdir(sys.argv[1]); os.rmdir(sys.argv[1]); os.execv(sys.executable, [sys.executable, '-m', 'raytrain', 'config', 'validate', sys.argv[2]])"
    done = subprocess.run([sys.executable, "-c", script, str(gone), str(Path(__file__).resolve().parents[2] / "configs" / "ppo_cartpole.yaml")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert "error: the current directory no longer exists (it was deleted, or its file system went away): cd to one " \
           "that does" in done.stderr

"""The Slurm file, the batch script and `raytrain slurm`: refusals (exit 2, file:line, nothing written), quoting
(the values section run by a real bash), the #SBATCH lines, job ids, scontrol parsing, SIGTERM handling."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from raytrain.cli import app
from raytrain.config.slurm import SlurmConfig, load_slurm, time_limit_seconds
from raytrain.errors import ConfigError
from raytrain.runs import RLLIB_PARTS
from raytrain.slurm.script import Job, batch_script, sbatch_argv, sbatch_options

runner = CliRunner()


@pytest.fixture
def files(tmp_path):
    """A tiny sweep (storage under tmp_path) and a writer for Slurm files."""
    (tmp_path / "base.yaml").write_text("environment: {env: CartPole-v1}\nenv_runners: {num_env_runners: 0}\n"
                                        "training: {train_batch_size: 200, minibatch_size: 100}\nstop: {training_iteration: 1}\n")
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text("name: s\nbase: base.yaml\nsearch: {num_samples: 1}\n")

    def slurm(text: str) -> Path:
        path = tmp_path / "slurm.yaml"
        path.write_text(f"storage_path: {tmp_path / 'results'}\n" + text)
        return path

    return sweep, slurm, tmp_path


BAD = [
    ("partition: 'a b'\n", 2, "partition", "partition names"),
    ("account: -x\n", 2, "account", "letters, digits"),
    ("qos: 'q;rm -rf /'\n", 2, "qos", "letters, digits"),
    ("time_limit: 1h\n", 2, "time_limit", "not a Slurm time limit"),
    ("extra_sbatch: [\"--comment=x\\n#SBATCH --uid=0\"]\n", 2, "extra_sbatch", "one line"),
    ("extra_sbatch: ['--output=/tmp/elsewhere']\n", 2, "extra_sbatch", "raytrain writes --output itself"),
    ("extra_sbatch: ['--comment=a b']\n", 2, "extra_sbatch", "no spaces or quotes"),
    ("extra_sbatch: ['#SBATCH --mem=1G']\n", 2, "extra_sbatch", "give the option only"),
    ("extra_sbatch: ['--no-kill']\n", 2, "extra_sbatch", "raytrain writes --no-kill itself"),
    # sbatch takes an abbreviation or another name for an option: each passed the check of raytrain's own
    ("extra_sbatch: ['--outp=/etc/x']\n", 2, "extra_sbatch", "--outp is an abbreviation, which sbatch takes for "
     "--output: write the whole option name"),
    ("extra_sbatch: ['--sig=KILL@1']\n", 2, "extra_sbatch", "which sbatch takes for --signal"),
    ("extra_sbatch: ['--tasks-per-node=4']\n", 2, "extra_sbatch", "raytrain writes --ntasks-per-node (--tasks-per-node "
     "is sbatch's other name for it) itself"),
    ("extra_sbatch: ['--open-mode=truncate']\n", 2, "extra_sbatch", "raytrain writes --open-mode itself"),
    ("extra_sbatch: ['--export=NONE']\n", 2, "extra_sbatch", "a job with --export cannot run raytrain's batch script"),
    ("extra_sbatch: ['--array=1-100']\n", 2, "extra_sbatch", "an array would start as many drivers"),
    ("extra_sbatch: ['--test-only']\n", 2, "extra_sbatch", "raytrain would record a job that never runs"),
    ("env: {'A-B': x}\n", 2, "env", "variable names"),
    ("env: {RAY_AUTH_MODE: disabled}\n", 2, "env", "set by raytrain itself"),
    # exported after the script's values, each replaced the script's own: AUTH_MODE turned token auth off
    ("env: {AUTH_MODE: disabled}\n", 2, "env", "['AUTH_MODE']: the job's script uses these names itself"),
    ("env: {JOB_DIR: /}\n", 2, "env", "['JOB_DIR']: the job's script uses these names itself"),
    ("env: {IFS: ':'}\n", 2, "env", "['IFS']: the job's script uses these names itself"),
    ("env: {SLURM_JOB_ID: '1'}\n", 2, "env", "['SLURM_JOB_ID']: the job's script uses these names itself"),
    ("env: {BASH_ENV: /tmp/x}\n", 2, "env", "or Slurm or bash sets them: choose other names"),
    # `.inf` made the script give up on the head at once; 1e20 made bash's $(( )) end the script
    ("start_timeout_s: .inf\n", 2, "start_timeout_s", "Input should be a finite number"),
    ("start_timeout_s: 1e20\n", 2, "start_timeout_s", "less than or equal to 604800"),
    ("nodes: 1\ngpus_per_node: .nan\n", 3, "gpus_per_node", "finite number"),
    ("venv: relative/venv\n", 2, "venv", "absolute path"),
    ("python: \"/usr/bin/python\\n3\"\n", 2, "python", "control characters"),
    ("nodez: 3\n", 2, "nodez", "nodes"),
    ("nodes: 0\n", 2, "nodes", "greater than or equal to 1"),
    ("time_limit: '1'\nsignal_grace_s: 120\n", 2, "time_limit", "must be longer than signal_grace_s"),
    ("python: /usr/bin/python3\nvenv: /opt/venv\n", 3, "venv", "not both"),
    ("gpu_type: a100\n", 2, "gpu_type", "needs gpus_per_node"),
    # A legitimate value with a newline after it (a pattern anchored with `$` took it).
    ("partition: \"debug\\n\"\n", 2, "partition", "partition names"),
    ("qos: \"normal\\n\"\n", 2, "qos", "letters, digits"),
    ("job_name: \"pbt\\n\"\n", 2, "job_name", "letters, digits"),
    ("extra_sbatch: [\"--exclusive\\n\"]\n", 2, "extra_sbatch", "one line"),
    ("time_limit: \"30\\n\"\n", 2, "time_limit", "not a Slurm time limit"),
]


@pytest.mark.parametrize(("text", "line", "field", "message"), BAD, ids=[b[2] + ":" + b[3][:20] for b in BAD])
@pytest.mark.parametrize("command", ["tune", "train"])
def test_bad_slurm_file_exits_2_with_file_line_and_writes_nothing(files, text, line, field, message, command):
    sweep, slurm, tmp_path = files
    path = slurm(text)
    target = sweep if command == "tune" else tmp_path / "base.yaml"
    for dry in ([], ["--dry-run"]):
        result = runner.invoke(app, [command, str(target), "--slurm", str(path), *dry])
        assert result.exit_code == 2, result.output
        assert f"{path}:{line}" in result.output and field in result.output and message in result.output, result.output
    assert not (tmp_path / "results").exists()


CPU_SHORT = [
    # (base's `env_runners`/`resources`, its line, Slurm file, command, what the error says)
    ("env_runners: {num_env_runners: 2}", 2, "nodes: 1\ncpus_per_node: 2\n", "tune",
     "each trial's actors (main process and learner, env runners) reserve 3 CPUs, but the job's Ray (1 node of 2 CPUs) has 2"),
    ("env_runners: {num_env_runners: 0}\nresources: {num_cpus_for_main_process: 2}", 3, "nodes: 3\ncpus_per_node: 1\n", "tune",
     "one of each trial's actors (main process and learner, env runners) reserves 2 CPUs, more than one node of the "
     "job's Ray (3 nodes of 1 CPUs) has (1)"),
    ("env_runners: {num_env_runners: 3}", 2, "nodes: 1\ncpus_per_node: 2\n", "train",
     "the config's actors (env runners, learners, evaluation runners) reserve 3 CPUs, but the job's Ray (1 node of 2 CPUs) has 2"),
]


@pytest.mark.parametrize(("setting", "line", "text", "command", "message"), CPU_SHORT)
def test_a_job_whose_ray_cannot_place_a_trial_exits_2_and_submits_nothing(files, setting, line, text, command, message):
    """Ray inside the job would wait for the trial's CPUs until the time limit: refused before sbatch."""
    sweep, slurm, tmp_path = files
    base = tmp_path / "base.yaml"
    base.write_text(base.read_text().replace("env_runners: {num_env_runners: 0}", setting))
    path = slurm(text)
    for dry in ([], ["--dry-run"]):
        result = runner.invoke(app, [command, str(sweep if command == "tune" else base), "--slurm", str(path), *dry])
        assert result.exit_code == 2, result.output
        assert f"{base}:{line}: " in result.output and message in result.output, result.output
        assert f"or raise nodes or cpus_per_node in {path}" in result.output
    assert not (tmp_path / "results").exists()


def test_slurm_with_address_or_cluster_is_refused(files):
    sweep, slurm, _ = files
    path = slurm("nodes: 2\n")
    result = runner.invoke(app, ["tune", str(sweep), "--slurm", str(path), "--address", "10.0.0.1:6379"])
    assert result.exit_code == 2 and "--slurm starts its own Ray" in result.output


def test_dry_run_prints_the_script_and_the_sbatch_line_and_writes_nothing(files):
    sweep, slurm, tmp_path = files
    path = slurm("nodes: 3\ncpus_per_node: 2\ngpus_per_node: 1\ngpu_type: a100\ntime_limit: '1-02:00:00'\n"
                 "partition: gpu,debug\naccount: lab\nqos: high\nextra_sbatch: ['--mem=16G', '--exclusive']\n"
                 "venv: /opt/venvs/rt\nsignal_grace_s: 300\n")
    result = runner.invoke(app, ["tune", str(sweep), "--slurm", str(path), "--dry-run"])
    assert result.exit_code == 0, result.output
    exp = tmp_path / "results" / "s"
    sbatch = [line.removeprefix("#SBATCH ") for line in result.stdout.splitlines() if line.startswith("#SBATCH ")]
    assert sbatch == ["--job-name=raytrain-s", "--nodes=3", "--ntasks-per-node=1", "--cpus-per-task=2",
                      "--gres=gpu:a100:1", "--time=1-02:00:00",
                      "--partition=gpu,debug", "--account=lab", "--qos=high", "--requeue", "--no-kill",
                      "--signal=B:TERM@300",
                      "--open-mode=append", "--mem=16G", "--exclusive"]
    assert f"# would write {exp}/slurm_job.sh and run: sbatch --parsable --output={exp}/slurm-%j.out --chdir={exp} {exp}/slurm_job.sh" in result.stdout
    assert "PYTHON=/opt/venvs/rt/bin/python" in result.stdout and "RAY=/opt/venvs/rt/bin/ray" in result.stdout
    assert "override: checkpoint.storage_path" in result.output
    assert not (tmp_path / "results").exists()


HOSTILE = "/tmp/x/$(touch CANARY) `touch CANARY` 'q\" ; touch CANARY"


def test_every_value_reaches_bash_literally(tmp_path):
    """The values section of the script, run by bash: each variable holds the exact string, nothing runs."""
    cfg = SlurmConfig(venv=HOSTILE[:-14], workdir=HOSTILE, env={"X": HOSTILE, "Y": "$HOME\\n"})
    job = Job(kind="tune", name="n", folder=HOSTILE, start=["sweep", HOSTILE, "--set", f"a={HOSTILE}"],
              resume=["resume", HOSTILE], state_file=HOSTILE + "/tuner.pkl", command=["raytrain", "tune", "a\nb"])
    script = batch_script(cfg, job)
    assert subprocess.run(["bash", "-n"], input=script, text=True).returncode == 0
    values = script.split("(each quoted once, here) ----\n", 1)[1].split("\nsay()", 1)[0]
    probe = values + '\nprintf "%s\\0" "$JOB_DIR" "$WORKDIR" "$PYTHON" "$X" "$Y" "${START[@]}" "${RESUME[@]}" "$STATE_FILE"\n'
    res = subprocess.run(["bash", "-c", probe], capture_output=True, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stdout.decode().split("\0")[:-1] == [
        HOSTILE, HOSTILE, HOSTILE[:-14] + "/bin/python", HOSTILE, "$HOME\\n", "sweep", HOSTILE, "--set", f"a={HOSTILE}",
        "resume", HOSTILE, HOSTILE + "/tuner.pkl"]
    assert not list(tmp_path.iterdir()), "a value ran as code"
    # The command line is one comment line however it was typed.
    assert "# made by: raytrain tune 'a\\nb'" in script


def test_sbatch_argv_is_a_list_with_the_log_in_the_folder():
    job = Job(kind="tune", name="n", folder="/shared/a b", start=[])
    assert sbatch_argv(job, "/shared/a b/slurm_job.sh") == [
        "sbatch", "--parsable", "--output=/shared/a b/slurm-%j.out", "--chdir=/shared/a b", "/shared/a b/slurm_job.sh"]
    assert "--no-requeue" in sbatch_options(SlurmConfig(requeue=False), job)


def test_a_failed_worker_node_ends_only_its_own_step(files):
    """The job is --no-kill and each worker node's Ray is its own srun step, so losing one node leaves the others'."""
    sweep, slurm, _ = files
    result = runner.invoke(app, ["tune", str(sweep), "--slurm", str(slurm("nodes: 3\n")), "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "#SBATCH --no-kill" in result.stdout
    steps = [line.strip() for line in result.stdout.splitlines() if line.strip().startswith("srun ")]
    # The first step checks that every node shares the job's folder (it ends before Ray starts).
    assert steps == ['srun --nodes="${#OTHERS[@]}" --ntasks="${#OTHERS[@]}" --ntasks-per-node=1 --kill-on-bad-exit=0 \\',
                     'srun --nodes=1 --ntasks=1 --nodelist="$HEAD" \\',
                     'srun --nodes=1 --ntasks=1 --nodelist="$node" \\'], steps
    assert 'for node in "${WORKERS[@]}"; do' in result.stdout
    # Without retries a trial on a lost node would end in error: the submission says so.
    assert "failure.max_failures is 0" in result.output
    sweep.write_text(sweep.read_text() + "failure: {max_failures: 2}\n")
    result = runner.invoke(app, ["tune", str(sweep), "--slurm", str(slurm("nodes: 3\n")), "--dry-run"])
    assert result.exit_code == 0 and "max_failures is 0" not in result.output, result.output


@pytest.mark.parametrize("command", ["tune", "train"])
def test_gpus_the_job_does_not_ask_slurm_for_are_refused(files, command):
    """A config whose actors ask for GPUs, in a job of nodes without them: the job's Ray would wait forever."""
    sweep, slurm, tmp_path = files
    base = tmp_path / "base.yaml"
    base.write_text(base.read_text().replace("num_env_runners: 0}", "num_env_runners: 1, num_gpus_per_env_runner: 1}"))
    target = sweep if command == "tune" else base
    result = runner.invoke(app, [command, str(target), "--slurm", str(slurm("nodes: 2\ncpus_per_node: 2\n")), "--dry-run"])
    assert result.exit_code == 2, result.output
    assert (f"{base}:2: env_runners.num_gpus_per_env_runner: ") in result.output
    assert (f"reserve 1 GPU, but the job's Ray (2 nodes of 2 CPUs) has 0: lower env_runners.num_gpus_per_env_runner "
            f"(0 trains on CPUs), or raise gpus_per_node in {tmp_path / 'slurm.yaml'}") in " ".join(result.output.split())
    ok = runner.invoke(app, [command, str(target), "--slurm", str(slurm("nodes: 2\ncpus_per_node: 2\ngpus_per_node: 1\n")),
                             "--dry-run"])
    assert ok.exit_code == 0, ok.output


@pytest.mark.parametrize("command", ["tune", "train"])
def test_custom_resources_a_slurm_job_cannot_have_are_refused(files, command):
    """The job's Ray starts with no custom resources: an env runner that asks for one would wait forever."""
    sweep, slurm, tmp_path = files
    base = tmp_path / "base.yaml"
    base.write_text(base.read_text().replace(
        "num_env_runners: 0}", "num_env_runners: 1, custom_resources_per_env_runner: {lab_sensor: 1}}"))
    target = sweep if command == "tune" else base
    result = runner.invoke(app, [command, str(target), "--slurm", str(slurm("nodes: 2\ncpus_per_node: 2\n")), "--dry-run"])
    assert result.exit_code == 2, result.output
    assert (f"{base}:2: env_runners.custom_resources_per_env_runner.lab_sensor: ") in result.output
    assert ("reserve 1 of the resource 'lab_sensor', but the job's Ray (2 nodes of 2 CPUs) has 0: remove or lower it, "
            "or run it on a cluster whose nodes have it (a Slurm job's Ray has no custom resources)") in \
        " ".join(result.output.split())


@pytest.mark.parametrize("command", ["tune", "train"])
def test_gpus_asked_of_slurm_that_no_actor_uses_are_warned_about(files, command):
    sweep, slurm, tmp_path = files
    target = sweep if command == "tune" else tmp_path / "base.yaml"
    path = slurm("nodes: 2\ncpus_per_node: 2\ngpus_per_node: 2\n")
    result = runner.invoke(app, [command, str(target), "--slurm", str(path), "--dry-run"])
    assert result.exit_code == 0, result.output
    assert (f"warning: {path} asks for 2 GPUs per node (gpus_per_node), but no actor of the config uses one: set "
            "learners.num_gpus_per_learner (or env_runners.num_gpus_per_env_runner), or gpus_per_node: 0"
            ) in " ".join(result.output.split())
    used = runner.invoke(app, [command, str(target), "--slurm", str(path), "--dry-run", "--set",
                               f"{'set.' if command == 'tune' else ''}learners.num_gpus_per_learner=1"])
    assert used.exit_code == 0 and "no actor of the config uses one" not in used.output, used.output


def test_a_percent_in_the_folder_is_refused_where_it_was_written(files):
    """sbatch reads `%` in the log path as a pattern: refused at the storage path that put it there, with its
    file and line (it named only the folder)."""
    sweep, slurm, tmp_path = files
    path = slurm("nodes: 1\n")
    said = "Slurm reads `%` in the job's log path"
    result = runner.invoke(app, ["tune", str(sweep), "--slurm", str(path), "--dry-run", "--set",
                                 f"checkpoint.storage_path={tmp_path / 'r%j'}"])
    assert result.exit_code == 2, result.output
    assert f"error: --set checkpoint.storage_path={tmp_path / 'r%j'}: checkpoint.storage_path: {said}" in result.output
    sweep.write_text(sweep.read_text() + f"checkpoint: {{storage_path: {tmp_path / 'c%x'}}}\n")
    plain = tmp_path / "plain.yaml"
    plain.write_text("nodes: 1\n")
    result = runner.invoke(app, ["tune", str(sweep), "--slurm", str(plain), "--dry-run"])
    assert result.exit_code == 2 and f"error: {sweep}:4: checkpoint.storage_path: {said}" in result.output, result.output
    base = tmp_path / "base.yaml"
    base.write_text(base.read_text() + f"experiment: {{storage_path: {tmp_path / 'e%u'}}}\n")
    result = runner.invoke(app, ["train", str(base), "--slurm", str(plain), "--dry-run"])
    assert result.exit_code == 2 and f"error: {base}:5: experiment.storage_path: {said}" in result.output, result.output
    for command, target in (("tune", sweep), ("train", base)):
        path.write_text(f"storage_path: {tmp_path / 'r%j'}\nnodes: 1\n")
        result = runner.invoke(app, [command, str(target), "--slurm", str(path), "--dry-run"])
        assert result.exit_code == 2, result.output
        assert f"error: {path}:1: storage_path: holds `%`, which Slurm reads as a pattern" in result.output
    assert not any(p.name.startswith(("r", "c", "e")) and "%" in p.name for p in tmp_path.iterdir())


@pytest.mark.parametrize("command", ["tune", "train"])
def test_an_unwritable_storage_path_of_the_slurm_file_is_said_at_its_line(files, command):
    """It was said of `--set checkpoint.storage_path=...`, which the user never typed; and `train --slurm` did not
    say what to do, as `train` does."""
    sweep, slurm, tmp_path = files
    path = tmp_path / "unwritable.yaml"
    path.write_text("nodes: 1\nstorage_path: /proc/nowhere\n")
    target = sweep if command == "tune" else tmp_path / "base.yaml"
    result = runner.invoke(app, [command, str(target), "--slurm", str(path), "--dry-run"])
    assert result.exit_code == 2, result.output
    said = " ".join(result.output.split())
    folder = "; run folders go to /proc/nowhere/ppo_CartPole-v1/: choose a folder you can write to" \
        if command == "train" else "; choose a directory you can write to"
    assert f"error: {path}:2: storage_path: not writable: cannot create a file in /proc (No such file or directory)" \
        f"{folder}" in said, said
    typed = runner.invoke(app, [command, str(target), "--slurm", str(slurm("nodes: 1\n")), "--dry-run", "--set",
                                f"{'checkpoint' if command == 'tune' else 'experiment'}.storage_path=/proc/typed"])
    assert typed.exit_code == 2 and "error: --set " in typed.output, typed.output


def test_every_abbreviation_of_an_option_raytrain_writes_is_refused():
    """sbatch reads `--outp` as --output (getopt_long takes any prefix of one option): each is refused, and the
    options raytrain does not write pass, whole."""
    from raytrain.config.slurm import OWNED_OPTIONS, SBATCH_OPTIONS

    for option in OWNED_OPTIONS:
        for end in range(2, len(option) + 1):
            with pytest.raises(ValueError):
                SlurmConfig.model_validate({"extra_sbatch": [f"--{option[:end]}=1"]}, context={"fields_only": True})
    free = SBATCH_OPTIONS - set(OWNED_OPTIONS) - {"export", "array", "test-only", "wrap", "wait", "cpus-per-gpu", "uid",
                                                  "gid"}
    cfg = SlurmConfig.model_validate({"extra_sbatch": [f"--{o}" for o in sorted(free)]}, context={"fields_only": True})
    assert len(cfg.extra_sbatch) == len(free) > 70


def test_a_start_timeout_reaches_the_script_as_whole_seconds(files):
    """`0.5` gave a deadline of now (bash's $(( )) took `${START_TIMEOUT_S%.*}`, 0): the job gave up on the head."""
    _, slurm, _ = files
    cfg = load_slurm(slurm("nodes: 1\nstart_timeout_s: 0.5\n"))
    text = batch_script(cfg, Job(kind="tune", name="x", folder="/tmp/x", start=["tune"]))
    assert "\nSTART_TIMEOUT_S=1\n" in text and "deadline=$((SECONDS + START_TIMEOUT_S))" in text


def test_every_variable_of_the_batch_script_is_refused_in_env(files):
    """The script's values and its body's own variables: an `env:` of any of them replaced the script's (the names
    are read from the script itself, so a variable added to it later is covered too)."""
    from raytrain.slurm.script import BODY, script_names

    names = script_names()
    assert {"AUTH_MODE", "JOB_DIR", "PYTHON", "RAY", "HEAD_PORT", "START", "RESUME", "STATE_FILE", "TOKEN", "NODES",
            "DRIVER", "SLURM_JOB_ID"} <= names
    import re

    assert set(re.findall(r"\$\{?([A-Z][A-Z0-9_]*)", BODY)) <= names
    _, slurm, _ = files
    for name in sorted(names):
        with pytest.raises(ConfigError, match="the job's script uses these names itself|set by raytrain itself"):
            load_slurm(slurm(f"nodes: 1\nenv: {{{name}: x}}\n"))
    assert load_slurm(slurm("nodes: 1\nenv: {OMP_NUM_THREADS: '1', PATH: /opt/bin}\n")).env["PATH"] == "/opt/bin"


@pytest.mark.parametrize(("value", "seconds"), [("30", 1800), ("5:30", 330), ("1:00:00", 3600), ("2-0", 172800),
                                                ("1-01:02", 90120), ("1-00:00:05", 86405), ("UNLIMITED", None)])
def test_time_limit_formats(value, seconds):
    assert time_limit_seconds(value) == seconds


@pytest.mark.parametrize("bad", ["1h", "1:2:3:4", "-5", "1-", "", "1 0", "30\n"])
def test_time_limit_refusals(bad):
    with pytest.raises(ValueError):
        time_limit_seconds(bad)


@pytest.mark.parametrize("command", ["status", "logs", "cancel"])
@pytest.mark.parametrize("job", ["12;rm -rf /", "abc", "12 13", "1_", "12\n"])
def test_job_ids_are_checked_before_slurm_is_called(command, job):
    result = runner.invoke(app, ["slurm", command, job])
    assert result.exit_code == 2 and "is not a Slurm job id" in result.output


def test_scontrol_line_parsing():
    from raytrain.slurm.jobs import is_active, parse_scontrol

    line = ("JobId=7 JobName=raytrain-pbt UserId=root(0) JobState=RUNNING Reason=None Dependency=(null) "
            "RunTime=00:01:02 TimeLimit=UNLIMITED NodeList=n[1-3] NumNodes=3 Restarts=0 ExitCode=0:0 "
            "WorkDir=/shared/a b StdOut=/shared/a b/slurm-7.out Power=")
    info = parse_scontrol(line)
    assert info["JobState"] == "RUNNING" and info["NodeList"] == "n[1-3]" and info["StdOut"] == "/shared/a b/slurm-7.out"
    assert info["WorkDir"] == "/shared/a b" and info["Power"] == ""
    assert is_active("RUNNING") and is_active("PENDING") and not is_active("COMPLETED") and not is_active("CANCELLED+")


def test_status_json_without_slurm_says_where_to_run(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    result = runner.invoke(app, ["slurm", "status", "12", "--json"])
    assert result.exit_code == 1 and "`scontrol` is not on PATH" in result.output


def test_sigterm_becomes_one_sigusr1_for_tune():
    """The driver's handler: the first SIGTERM is Tune's graceful stop (SIGUSR1); a second one is ignored."""
    from raytrain.cli.common import TuneStopOnTerm
    from raytrain.slurm.driver import _TERMINATED

    assert isinstance(_TERMINATED, TuneStopOnTerm) and not _TERMINATED.second_ends
    got = []
    old_term = signal.getsignal(signal.SIGTERM)
    old_usr1 = signal.signal(signal.SIGUSR1, lambda *a: got.append("usr1"))
    try:
        t = TuneStopOnTerm(second_ends=False)
        t.install()
        os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGTERM)
        assert t.received and got == ["usr1"]
    finally:
        signal.signal(signal.SIGTERM, old_term)
        signal.signal(signal.SIGUSR1, old_usr1)


def test_outside_slurm_a_second_sigterm_ends_the_process():
    """`raytrain tune`'s handler: the first SIGTERM is Tune's stop, a second one ends the driver at once."""
    code = ("import os, signal, time\n"
            "from raytrain.cli.common import TuneStopOnTerm\n"
            "signal.signal(signal.SIGUSR1, lambda *a: print('usr1', flush=True))\n"
            "TuneStopOnTerm().install()\n"
            "os.kill(os.getpid(), signal.SIGTERM)\n"
            "time.sleep(0.2)\n"
            "print('after the first', flush=True)\n"
            "os.kill(os.getpid(), signal.SIGTERM)\n"
            "time.sleep(5)\n"
            "print('not reached', flush=True)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == -signal.SIGTERM, proc.stderr
    assert proc.stdout.split() == ["usr1", "after", "the", "first"]
    assert "saving Tune's state" in proc.stderr


def test_schema_kind_slurm():
    result = runner.invoke(app, ["config", "schema", "--kind", "slurm"])
    assert result.exit_code == 0
    schema = json.loads(result.stdout)
    assert schema["title"] == "raytrain slurm config" and schema["additionalProperties"] is False
    assert "Nodes of the allocation" in schema["properties"]["nodes"]["description"]


def _values(script: str) -> dict[str, list[str]]:
    """The values section of a script, run by bash: each variable (arrays whole) as bash sees it."""
    values = script.split("(each quoted once, here) ----\n", 1)[1].split("\nsay()", 1)[0]
    probe = values + '\nprintf "%s\\0" "$JOB_DIR" "$WORKDIR"; printf "\\1"; printf "%s\\0" "${START[@]}"\n'
    res = subprocess.run(["bash", "-c", probe], capture_output=True, check=True)
    dirs, start = res.stdout.decode().split("\1")
    return {"dirs": dirs.split("\0")[:-1], "start": start.split("\0")[:-1]}


def test_a_sweep_submitted_again_while_its_job_is_queued_is_refused(files, monkeypatch):
    """The first job was PENDING and had not written tuner.pkl: the second submission went to `s_2` with a new
    job, two sweeps of one file. Once the queued job has ended, the folder is taken as before (`s_2`)."""
    from raytrain.slurm import jobs

    sweep, slurm, tmp_path = files
    exp = tmp_path / "results" / "s"
    exp.mkdir(parents=True)
    (exp / "slurm_job.sh").write_text("#!/bin/bash\n")
    (exp / "slurm_jobs.txt").write_text("4242 2026-12-01T21:00:00\n")
    state = {"state": "PENDING"}
    monkeypatch.setattr(jobs, "status", lambda job_id: dict(state, id=job_id))
    path = slurm("nodes: 1\n")
    result = runner.invoke(app, ["tune", str(sweep), "--slurm", str(path), "--dry-run"])
    assert result.exit_code == 2, result.output
    assert (f"job 4242 is queued or running for the sweep in {exp}, and has not started its trials yet: wait for it, "
            "or `raytrain slurm cancel 4242` first") in " ".join(result.output.split()), result.output
    assert sorted(p.name for p in exp.parent.iterdir()) == ["s"]
    state["state"] = "CANCELLED"
    result = runner.invoke(app, ["tune", str(sweep), "--slurm", str(path), "--dry-run"])
    assert result.exit_code == 0 and "s_2" in result.output, result.output


def test_train_job_gets_its_run_folder_at_submit_time(files):
    """`train --slurm`: the run folder is named when submitting; the script, its log and the driver all use it."""
    _, slurm, tmp_path = files
    base = tmp_path / "base.yaml"
    result = runner.invoke(app, ["train", str(base), "--slurm", str(slurm("nodes: 1\n")), "--dry-run"])
    assert result.exit_code == 0, result.output
    exp = tmp_path / "results" / "ppo_CartPole-v1"
    got = _values(result.stdout)
    run_dir = got["dirs"][0]
    assert Path(run_dir).parent == exp and got["dirs"] == [run_dir, run_dir]
    assert got["start"] == ["train", str(base), "--run-dir", run_dir, "--set", f"experiment.storage_path={tmp_path / 'results'}"]
    assert f"run: sbatch --parsable --output={run_dir}/slurm-%j.out --chdir={run_dir} {run_dir}/slurm_job.sh" in result.stdout
    assert not (tmp_path / "results").exists()


def _run_folder(root: Path, checkpoints: dict[str, str | None], status: str | None = None) -> Path:
    """A run folder with config.yaml and checkpoint folders (name -> raytrain_state.json text, None: no file)."""
    run = root / "results" / "ppo_CartPole-v1" / "2025-01-01_00-00-00"
    run.mkdir(parents=True)
    (run / "config.yaml").write_text((root / "base.yaml").read_text())
    for name, state in checkpoints.items():
        (run / "checkpoints" / name).mkdir(parents=True)
        for part in RLLIB_PARTS:  # the folders RLlib writes (empty: nothing here loads them)
            (run / "checkpoints" / name / part).mkdir(parents=True)
        if state is not None:
            (run / "checkpoints" / name / "raytrain_state.json").write_text(state)
    if status:
        (run / "run.json").write_text(json.dumps({"status": status}))
    return run


def test_the_train_driver_continues_from_the_latest_complete_checkpoint(files):
    from raytrain.slurm.driver import plan_train

    _, _, tmp_path = files
    run = _run_folder(tmp_path, {"checkpoint_000002": '{"iteration": 2}', "checkpoint_000004": '{"iteration": 4}',
                                 "checkpoint_000006.partial": '{"iteration": 6}', "checkpoint_000005": None})
    step = plan_train("/cfg/t.yaml", str(run), ["a.b=1"])
    assert step.resume == run and step.run_dir == run and step.file == Path("/cfg/t.yaml") and step.overrides == ["a.b=1"]
    assert step.words == ["train", "--resume", str(run), "/cfg/t.yaml", "--set", "a.b=1"]
    assert "checkpoint_000004" in step.note
    # `train --resume RUN_DIR --slurm` without a file: the run's own config.yaml.
    step = plan_train(None, str(run), [])
    assert step.words == ["train", "--resume", str(run)] and step.file is None


def test_the_train_driver_starts_a_new_run_when_there_is_no_complete_checkpoint(files):
    from raytrain.errors import UsageError
    from raytrain.slurm.driver import plan_train

    _, _, tmp_path = files
    empty = tmp_path / "results" / "ppo_CartPole-v1" / "new"
    empty.mkdir(parents=True)
    step = plan_train("/cfg/t.yaml", str(empty), ["a.b=1"])
    assert step.resume is None and step.run_dir == empty and step.words == ["train", "/cfg/t.yaml", "--set", "a.b=1"]
    # Cut short before its first checkpoint (or only a partial one): a new run in the same folder.
    run = _run_folder(tmp_path, {"checkpoint_000001.partial": '{"iteration": 1}', "checkpoint_000002": "not json"})
    step = plan_train("/cfg/t.yaml", str(run), [])
    assert step.resume is None and step.run_dir == run
    with pytest.raises(UsageError, match="no complete checkpoint"):
        plan_train(None, str(run), [])


def test_a_requeued_train_job_whose_run_finished_does_nothing(files):
    from raytrain.slurm.driver import plan_train

    _, _, tmp_path = files
    run = _run_folder(tmp_path, {"checkpoint_000003": '{"iteration": 3}'}, status="finished")
    assert plan_train("/cfg/t.yaml", str(run), [], restarts=1) is None
    # The first start of a job (`train --resume RUN_DIR --slurm` of a finished run) continues it, as train --resume does.
    assert plan_train("/cfg/t.yaml", str(run), [], restarts=0).resume == run


def test_train_resume_slurm_continues_that_run_folder(files):
    _, slurm, tmp_path = files
    run = _run_folder(tmp_path, {"checkpoint_000002": '{"iteration": 2}'})
    path = slurm("nodes: 1\n")
    result = runner.invoke(app, ["train", "--resume", str(run), "--slurm", str(path), "--dry-run"])
    assert result.exit_code == 0, result.output
    got = _values(result.stdout)
    assert got["dirs"] == [str(run), str(run)] and got["start"] == ["train", "--run-dir", str(run)]
    assert f"continues the run in {run} from checkpoint_000002" in result.output
    assert sorted(p.name for p in run.iterdir()) == ["checkpoints", "config.yaml"]
    # No checkpoint to continue from: refused, nothing written.
    other = tmp_path / "results" / "ppo_CartPole-v1" / "no_checkpoint"
    other.mkdir()
    (other / "config.yaml").write_text((tmp_path / "base.yaml").read_text())
    for dry in ([], ["--dry-run"]):
        result = runner.invoke(app, ["train", "--resume", str(other), "--slurm", str(path), *dry])
        assert result.exit_code == 2 and "no complete checkpoint" in result.output, result.output
    assert [p.name for p in other.iterdir()] == ["config.yaml"]
    result = runner.invoke(app, ["train", "--resume", str(run), "--slurm", str(path), "--address", "10.0.0.1:6379"])
    assert result.exit_code == 2 and "leave out --address and --cluster" in result.output
    # Told to move: refused, as without --slurm (the job would have trained in the run folder anyway).
    result = runner.invoke(app, ["train", "--resume", str(run), "--slurm", str(path), "--set", "experiment.name=x"])
    assert result.exit_code == 2 and "a resumed run stays in its folder" in result.output, result.output
    assert sorted(p.name for p in run.iterdir()) == ["checkpoints", "config.yaml"]


def test_a_new_run_folder_that_exists_by_now_is_refused_before_sbatch(files, monkeypatch):
    from raytrain.errors import UsageError
    from raytrain.slurm import submit as slurm_submit

    _, slurm, tmp_path = files
    sub = slurm_submit.prepare_train(tmp_path / "base.yaml", [], slurm("nodes: 1\n"))
    assert sub.new_folder
    Path(sub.job.folder).mkdir(parents=True)
    monkeypatch.setenv("PATH", "/nonexistent")  # sbatch would fail differently: it must not be reached
    with pytest.raises(UsageError, match="made meanwhile"):
        slurm_submit.submit(sub)
    assert list(Path(sub.job.folder).iterdir()) == []


def test_a_second_sigterm_during_the_checkpoint_is_ignored_in_a_slurm_job():
    """The driver of a train job: the first SIGTERM stops training (a checkpoint is saved), a second one does not
    end the process; plain `raytrain train` keeps ending at a second one."""
    from raytrain.cli.common import interrupt_on_signals

    old_term, old_int = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    try:
        for second_term_ends, after in ((False, signal.SIG_IGN), (True, signal.SIG_DFL)):
            interrupt_on_signals(second_term_ends=second_term_ends)
            with pytest.raises(KeyboardInterrupt):
                os.kill(os.getpid(), signal.SIGTERM)
            assert signal.getsignal(signal.SIGTERM) == after
        # Ignored means ignored: this process goes on.
        interrupt_on_signals(second_term_ends=False)
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGTERM)
    finally:
        signal.signal(signal.SIGTERM, old_term)
        signal.signal(signal.SIGINT, old_int)


def test_the_script_traps_the_cancel_signal_raytrain_sends():
    """`raytrain slurm cancel` signals the batch shell alone with CANCEL_SIGNAL: the script must trap that one
    (untrapped, it would end the shell at once and leave the driver unsaved)."""
    from raytrain.config.slurm import SlurmConfig
    from raytrain.slurm.script import CANCEL_SIGNAL, Job, batch_script

    text = batch_script(SlurmConfig(nodes=2), Job(kind="tune", name="x", folder="/shared/x", start=["sweep"]))
    assert f"trap on_cancel {CANCEL_SIGNAL}\n" in text
    assert 'scancel "$SLURM_JOB_ID"' in text



@pytest.mark.parametrize("command", ["tune", "train"])
def test_an_env_module_only_here_needs_workdir_here(files, command, monkeypatch):
    """The job's driver runs in workdir (default: the job's folder): an env module that only the current
    directory holds would fail the job when it starts, so it is refused before sbatch, with the fix."""
    sweep, slurm, tmp_path = files
    here = tmp_path / "project"
    here.mkdir()
    (here / "lab_walk_env.py").write_text("from gymnasium.envs.classic_control import CartPoleEnv as Walk\n")
    base = tmp_path / "base.yaml"
    base.write_text(base.read_text().replace("env: CartPole-v1", "env: 'lab_walk_env:Walk'"))
    monkeypatch.chdir(here)
    monkeypatch.setattr("sys.path", [p for p in __import__("sys").path if p != ""])
    target = str(sweep if command == "tune" else base)
    refused = slurm("nodes: 1\n")
    for dry in ([], ["--dry-run"]):
        result = runner.invoke(app, [command, target, "--slurm", str(refused), *dry])
        assert result.exit_code == 2, result.output
        assert f"{refused}: workdir: lab_walk_env:Walk is imported from the current directory {here}" in result.output
        assert f"set `workdir: {here}` in {refused}" in result.output
    assert not (tmp_path / "results").exists()
    result = runner.invoke(app, [command, target, "--slurm", str(slurm(f"nodes: 1\nworkdir: {here}\n")), "--dry-run"])
    assert result.exit_code == 0, result.output
    assert f"WORKDIR={here}" in result.stdout


def test_the_shared_folder_check_of_a_node_says_what_it_saw(tmp_path, capsys):
    """Run on every other node of a job before Ray starts: the batch shell's marker must be there, with its token."""
    from raytrain.slurm.wait import main

    marker = tmp_path / ".raytrain_shared_check"
    marker.write_text("41.0.123")
    assert main(["--shared", str(marker), "41.0.123"]) == 0
    assert main(["--shared", str(marker), "42.0.9"]) == 1
    assert "a marker it wrote there holds another job's token" in capsys.readouterr().err
    marker.unlink()
    assert main(["--shared", str(marker), "41.0.123"]) == 1
    said = capsys.readouterr().err
    assert f"the job's folder {tmp_path} is not the one the batch script runs in (a marker it wrote there is not there)" in said
    assert "storage_path must be on a file system every node mounts at the same path" in said


def test_the_script_checks_the_folder_is_shared_before_ray_starts(files):
    from raytrain.slurm.script import BODY

    check = BODY.index('"$PYTHON" -m raytrain.slurm.wait --shared "$MARKER" "$TOKEN"')
    assert check < BODY.index('"$RAY" start --head')
    assert BODY.index('rm -f "$MARKER"') > check


@pytest.mark.parametrize("command", ["tune", "train"])
def test_a_submission_that_sbatch_refuses_leaves_nothing_behind(files, monkeypatch, command):
    """sbatch failing (no Slurm controller reachable, or no sbatch) left the experiment folder with its script, and
    the storage folders made for it: the next submission then went to `s_2`, calling the first an experiment to
    `tune resume`."""
    sweep, slurm, tmp_path = files
    path = slurm("nodes: 1\ncpus_per_node: 2\n")
    monkeypatch.setenv("PATH", "/nonexistent")
    target = sweep if command == "tune" else tmp_path / "base.yaml"
    for _ in range(2):
        result = runner.invoke(app, [command, str(target), "--slurm", str(path)])
        assert result.exit_code == 1, result.output
        assert "`sbatch` is not on PATH" in result.output, result.output
        assert "already holds" not in result.output and "_2" not in result.output, result.output
        assert not (tmp_path / "results").exists()


@pytest.mark.parametrize("command", ["tune", "train"])
def test_a_venv_or_python_that_is_not_on_this_machine_is_warned_about(files, command):
    """The job runs it on every node after its wait in the queue; a wrong path failed there, with nothing said at
    submit time on a machine that shares the file system (a login node)."""
    sweep, slurm, tmp_path = files
    target = sweep if command == "tune" else tmp_path / "base.yaml"
    venv = tmp_path / "venvs" / "rt"
    for setting, python in ((f"venv: {venv}\n", f"{venv}/bin/python"), ("python: /opt/nowhere/python3\n",
                                                                         "/opt/nowhere/python3")):
        result = runner.invoke(app, [command, str(target), "--slurm", str(slurm("nodes: 1\n" + setting)), "--dry-run"])
        assert result.exit_code == 0, result.output
        key = setting.split(":")[0]
        assert (f"warning: {tmp_path / 'slurm.yaml'}: {key}: {python} is not on this machine: every node of the job "
                "runs it, so it must be there at this path (a venv on the shared file system, or one made at this "
                "path on each node)") in " ".join(result.output.split()), result.output
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").symlink_to(sys.executable)
    result = runner.invoke(app, [command, str(target), "--slurm", str(slurm(f"nodes: 1\nvenv: {venv}\n")), "--dry-run"])
    assert result.exit_code == 0 and "is not on this machine" not in result.output, result.output


def test_a_sweep_submitted_again_after_its_job_started_it_resumes(files):
    """The job's driver records the sweep in the experiment folder (sweep.yaml, its base config embedded); the same
    file submitted again is compared with that record: it resumes, and another sweep of that name is refused."""
    from raytrain.config.source import override_text
    from raytrain.config.sweep_load import load_sweep
    from raytrain.slurm.submit import prepare_sweep
    from raytrain.tune.build import plan
    from raytrain.tune.run import _write_meta

    sweep, slurm, tmp_path = files
    path = slurm("nodes: 1\n")
    # What the job's driver writes when the sweep starts (`raytrain tune sweep FILE --set ...` on the node).
    loaded = load_sweep(sweep, [override_text("checkpoint.storage_path", str(tmp_path / "results"))])
    exp = _write_meta(loaded, plan(loaded), ["raytrain", "tune", "sweep", str(sweep)])
    (exp / "tuner.pkl").write_bytes(b"")
    assert prepare_sweep(sweep, [], path).resumes
    # Its record in the form of earlier versions (the sweep as written, its base by path) resumes too.
    (exp / "sweep.yaml").write_text(yaml.safe_dump(loaded.sweep.model_dump(mode="json", exclude_none=True)))
    assert prepare_sweep(sweep, [], path).resumes
    sweep.write_text(sweep.read_text().replace("num_samples: 1", "num_samples: 2"))
    result = runner.invoke(app, ["tune", str(sweep), "--slurm", str(path), "--dry-run"])
    assert result.exit_code == 2 and "holds a different sweep of the same name" in result.output, result.output

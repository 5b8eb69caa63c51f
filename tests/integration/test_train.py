"""`raytrain train` on a real local Ray: run folder, checkpoints, resume, eval, Ctrl-C."""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from ..mounts import needs_mount_namespace, run_with_mounts, tmpfs
from .conftest import alive, descendants, invoke, process_name

pytestmark = pytest.mark.integration

SMALL = """
experiment: {{name: small, seed: 1, storage_path: {storage}, checkpoint_frequency: 2}}
environment: {{env: CartPole-v1}}
env_runners: {{num_env_runners: 0, num_envs_per_env_runner: 2}}
training: {{train_batch_size: 200, minibatch_size: 100, num_epochs: 1}}
model: {{fcnet_hiddens: [16]}}
stop: {{training_iteration: 2}}
"""


@pytest.fixture
def small_config(tmp_path):
    storage = tmp_path / "results"
    path = tmp_path / "small.yaml"
    path.write_text(SMALL.format(storage=storage))
    return path, storage


def _run_dir(output: str) -> Path:
    return Path(output.strip().splitlines()[-1])


def test_train_writes_complete_run_folder_then_resume_and_eval(ray_session, small_config, monkeypatch, ray_results):
    path, storage = small_config
    import torch

    dry = invoke(["train", str(path), "--set", "training.gamma=0.95", "--dry-run"])
    assert dry.exit_code == 0, dry.output
    shown = [line for line in dry.stdout.splitlines() if line.startswith("# run folder: ")]
    torch.set_num_threads(2)
    result = invoke(["train", str(path), "--set", "training.gamma=0.95"])
    assert result.exit_code == 0, result.output
    # Sampling and learning ran in this process with as many torch threads as it reserves (RLlib's 1 CPU).
    assert torch.get_num_threads() == 1
    run = _run_dir(result.stdout)
    assert run.parent == storage / "small"
    assert shown == [f"# run folder: {run.parent}/<YYYY-MM-DD_HH-MM-SS>"]  # what the dry run said
    assert re.fullmatch(r"\d{4}-\d\d-\d\d_\d\d-\d\d-\d\d", run.name)
    first_config = (run / "config.yaml").read_bytes()
    first_calls = (run / "rllib_config.json").read_bytes()

    for name in ("config.yaml", "rllib_config.json", "command.txt", "versions.json", "metrics.jsonl", "metrics.csv", "run.json"):
        assert (run / name).is_file(), name
    resolved = yaml.safe_load((run / "config.yaml").read_text())
    assert resolved["training"]["gamma"] == 0.95  # the override is in the resolved config
    assert json.loads((run / "rllib_config.json").read_text())["training"]["gamma"] == 0.95
    assert "--set training.gamma=0.95" in (run / "command.txt").read_text()
    versions = json.loads((run / "versions.json").read_text())
    assert versions["ray"].startswith("2.60") and versions["python"] and versions["raytrain"]
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["training_iteration"] for r in rows] == [1, 2]
    assert "raytrain/episode_return_mean_100" in rows[-1]
    assert rows[-1]["raytrain/episodes_total"] > 0
    assert any("perf/ram_util_percent" in row for row in rows)  # Tune's utilisation figures, still recorded
    header = (run / "metrics.csv").read_text().splitlines()[0].split(",")
    assert "raytrain/episode_return_mean_100" in header and "training_iteration" in header
    status = json.loads((run / "run.json").read_text())
    assert status["status"] == "finished" and status["iteration"] == 2
    ckpt = run / "checkpoints" / "checkpoint_000002"
    state = json.loads((ckpt / "raytrain_state.json").read_text())
    assert state["iteration"] == 2 and len(state["callbacks"]["returns"]) == rows[-1]["raytrain/episodes_in_window"]
    before = (ckpt / "raytrain_state.json").stat().st_mtime_ns

    # --resume (a path relative to the working directory) continues from the latest checkpoint, iteration
    # count and running mean included, with its overrides recorded and the earlier config kept.
    monkeypatch.chdir(storage)
    relative = f"small/{run.name}"
    result = invoke(["train", "--resume", relative, "--set", "stop.training_iteration=4", "--set", "training.lr=0.0007"])
    assert result.exit_code == 0, result.output
    assert (run / "config.1.yaml").read_bytes() == first_config
    assert (run / "rllib_config.1.json").read_bytes() == first_calls
    resolved = yaml.safe_load((run / "config.yaml").read_text())
    assert resolved["training"]["lr"] == 0.0007 and resolved["stop"]["training_iteration"] == 4
    assert resolved["training"]["gamma"] == 0.95  # the first run's override is still there
    assert json.loads((run / "rllib_config.json").read_text())["training"]["lr"] == 0.0007
    assert "resuming from checkpoint_000002" in result.output
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["training_iteration"] for r in rows] == [1, 2, 3, 4]
    assert rows[2]["raytrain/episodes_total"] > rows[1]["raytrain/episodes_total"]
    assert rows[3]["num_env_steps_sampled_lifetime"] > rows[1]["num_env_steps_sampled_lifetime"]
    assert rows[3]["time_total_s"] > rows[1]["time_total_s"]
    assert (run / "checkpoints" / "checkpoint_000004" / "raytrain_state.json").is_file()
    assert (ckpt / "raytrain_state.json").stat().st_mtime_ns == before  # nothing overwritten
    assert (run / "command.txt").read_text().count("raytrain train") == 2

    # eval (a relative path too) loads the latest checkpoint and runs fresh episodes.
    result = invoke(["eval", relative, "--episodes", "3", "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["episodes"] == 3 and len(summary["returns"]) == 3
    assert summary["checkpoint"].endswith("checkpoint_000004")
    assert summary["return_min"] <= summary["return_mean"] <= summary["return_max"]
    # Train, resume and eval each built an Algorithm outside Tune: none left a folder in ~/ray_results (nor it).
    assert not ray_results.exists()


@pytest.mark.parametrize("env_runners", [0, 1])
def test_failed_build_writes_nothing(ray_session, tmp_path, monkeypatch, env_runners, ray_results):
    """An Algorithm whose build fails (an env that cannot be made, which RLlib's validation does not
    catch): exit 1, no run folder, and nothing left in ~/ray_results. In an env runner actor, RLlib goes on
    without it and then fails on something else (IndexError): the error says the env runners could not start,
    and why."""
    monkeypatch.syspath_prepend(str(Path(__file__).parent))
    storage = tmp_path / "results"
    path = tmp_path / "broken.yaml"
    # As the env runner actors import it: from the folder the Ray was started in (the repository's root).
    env = "tests.integration.flaky_env:BrokenCartPole"
    path.write_text(SMALL.format(storage=storage).replace("{env: CartPole-v1}", f'{{env: "{env}"}}')
                    .replace("num_env_runners: 0", f"num_env_runners: {env_runners}"))
    result = invoke(["train", str(path)])
    assert result.exit_code == 1, result.output
    assert "broken env: cannot be made" in result.output
    if env_runners:
        # RLlib's own ERROR lines carry the actor's traceback (and, in this test process, where an earlier
        # CliRunner closed the stream Ray's log handler holds, logging's complaint about it): raytrain's last
        # line says what failed, and RLlib's IndexError is gone.
        last = " ".join(result.output.strip().splitlines()[-1].split())
        assert last == ("error: the env runners could not start, so RLlib could not build the algorithm: RuntimeError: "
                        "broken env: cannot be made (the env's traceback is printed with the prefix "
                        "`(SingleAgentEnvRunner pid=...)`)")
        assert "IndexError" not in result.output
    else:
        assert "Traceback" not in result.output
        # Where in the user's code: it said only `error: RuntimeError: broken env: cannot be made`.
        assert ("error: RuntimeError: broken env: cannot be made (tests/integration/flaky_env.py:27: raise "
                'RuntimeError("broken env: cannot be made"))') in result.output, result.output
    assert not storage.exists()
    assert not ray_results.exists()


def test_failed_resume_after_ray_started_changes_nothing(ray_session, small_config):
    """A resume whose checkpoint cannot be restored fails after Ray is up: run.json, command.txt and the
    config files stay byte for byte as they were."""
    path, _ = small_config
    result = invoke(["train", str(path)])
    assert result.exit_code == 0, result.output
    run = _run_dir(result.stdout)
    latest = run / "checkpoints" / "checkpoint_000002"
    (latest / "algorithm_state.pkl").write_bytes(b"not a pickle")  # RLlib's part broken, raytrain's state fine
    before = {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()}
    result = invoke(["train", "--resume", str(run), "--set", "training.lr=0.0007", "--set", "stop.training_iteration=3"])
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    assert {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()} == before


def test_a_resume_whose_network_does_not_fit_the_checkpoint_is_refused_before_ray(ray_session, small_config, monkeypatch):
    """`--resume RUN --set model.fcnet_hiddens=[8]` (or another env's spaces) started Ray, built the algorithm, and
    failed in torch's `load_state_dict` with a page of size mismatches (exit 1). It is exit 2 before Ray, at the
    override, with nothing changed; another env with the checkpoint's spaces still resumes."""
    path, _ = small_config
    result = invoke(["train", str(path)])
    assert result.exit_code == 0, result.output
    run = _run_dir(result.stdout)
    before = {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()}
    import raytrain.ray_session

    def no_ray(*args, **kwargs):
        raise AssertionError("Ray was started")

    with monkeypatch.context() as m:
        m.setattr(raytrain.ray_session, "init_ray", no_ray)
        for override, key in (("model.fcnet_hiddens=[8]", "model.fcnet_hiddens"), ("environment.env=Acrobot-v1", "environment.env")):
            refused = invoke(["train", "--resume", str(run), "--set", override, "--set", "stop.training_iteration=3"])
            assert refused.exit_code == 2, refused.output
            assert f"error: --set {override}: {key}: the checkpoint's network does not fit" in refused.output
            assert "checkpoint_000002" in refused.output and "start a new run" in refused.output
            assert {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()} == before
        # A config file with a network setting and another changed: the network's is blamed (it was the first
        # changed in schema order, environment.normalize_actions, at a line that did not write it).
        other = path.with_name("other.yaml")
        other.write_text(path.read_text().replace("{env: CartPole-v1}", "{env: CartPole-v1, normalize_actions: false}")
                         .replace("fcnet_hiddens: [16]", "fcnet_hiddens: [8]"))
        refused = invoke(["train", str(other), "--resume", str(run), "--set", "stop.training_iteration=3"])
        assert refused.exit_code == 2, refused.output
        said = " ".join(refused.output.split())
        assert f"error: {other}:" in said and ": model.fcnet_hiddens: the checkpoint's network does not fit" in said, said
        assert "also changed: environment.normalize_actions" in said, said
    same_spaces = invoke(["train", "--resume", str(run), "--set", "environment.env=CartPole-v0", "--set", "stop.training_iteration=3"])
    assert same_spaces.exit_code == 0, same_spaces.output


def test_num_to_keep_prunes_oldest(ray_session, small_config):
    path, _ = small_config
    result = invoke(
        ["train", str(path), "--set", "experiment.checkpoint_frequency=1", "--set", "experiment.num_to_keep=2", "--set", "stop.training_iteration=3"]
    )
    assert result.exit_code == 0, result.output
    run = _run_dir(result.stdout)
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == ["checkpoint_000002", "checkpoint_000003"]


def test_a_resume_past_an_unreadable_newest_checkpoint_saves_that_iteration_again(ray_session, small_config):
    """checkpoint_000003 without its state file is passed over: the run resumed from checkpoint_000002, trained
    iteration 3 again, found checkpoint_000003 taken, saved nothing, and said `finished`."""
    path, _ = small_config
    result = invoke(["train", str(path), "--set", "experiment.checkpoint_frequency=1", "--set", "stop.training_iteration=3"])
    assert result.exit_code == 0, result.output
    run = _run_dir(result.stdout)
    broken = run / "checkpoints" / "checkpoint_000003"
    (broken / "raytrain_state.json").unlink()
    kept = sorted(str(p.relative_to(broken)) for p in broken.rglob("*"))
    result = invoke(["train", "--resume", str(run)])
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert "resuming from checkpoint_000002" in said
    aside = [p for p in (run / "not_resumed").iterdir()]
    assert len(aside) == 1 and sorted(str(p.relative_to(aside[0] / "checkpoint_000003"))
                                      for p in (aside[0] / "checkpoint_000003").rglob("*")) == kept
    assert (f"note: 1 checkpoint(s) after checkpoint_000002 that cannot be resumed from (checkpoint_000003) moved to "
            f"{aside[0]}: the run writes those iterations again") in said
    assert json.loads((broken / "raytrain_state.json").read_text())["iteration"] == 3  # saved again, complete
    assert "exists already" not in said


@needs_mount_namespace
def test_a_full_disk_is_said_with_the_run_folder_and_its_resume(tmp_path):
    """It was Python's `OSError: [Errno 28] No space left on device`, exit 1, no run folder named, run.json left
    `running` and an empty run.tmp beside it."""
    storage = tmp_path / "full"
    storage.mkdir()
    config = tmp_path / "small.yaml"
    config.write_text(SMALL.format(storage=storage).replace("checkpoint_frequency: 2", "checkpoint_frequency: 1")
                      .replace("stop: {training_iteration: 2}", "stop: {training_iteration: 200}"))
    done = run_with_mounts(tmpfs(storage), [sys.executable, "-m", "raytrain", "train", str(config)],
                           copy=(storage, tmp_path / "copy"), timeout=600, env={**os.environ, "RAY_ADDRESS": ""})
    assert done.returncode == 1, done.stderr[-3000:]
    (run,) = (tmp_path / "copy" / "small").iterdir()
    said = " ".join(done.stderr.split())
    latest = max(p.name for p in (run / "checkpoints").glob("checkpoint_*") if p.name[-1].isdigit())
    assert re.search(rf"error: No space left on device in {storage}/small/{run.name}, at iteration \d+ \(its last "
                     rf"complete checkpoint is {latest}\): free space there \(or keep fewer checkpoints, "
                     rf"experiment.num_to_keep\), then `raytrain train --resume {storage}/small/{run.name}`", said), said[-2000:]
    assert not (run / "run.tmp").exists()


def test_eval_of_a_run_whose_checkpoint_is_pruned_meanwhile_takes_the_newest(ray_session, small_config):
    """eval chooses the checkpoint before Ray starts; a run training there with num_to_keep deleted it meanwhile, and
    eval failed with FileNotFoundError, exit 1."""
    from raytrain.errors import TrainError
    from raytrain.evaluate import evaluate, plan_eval

    path, _ = small_config
    result = invoke(["train", str(path), "--set", "experiment.checkpoint_frequency=1"])
    assert result.exit_code == 0, result.output
    run = _run_dir(result.stdout)
    plan = plan_eval(run)
    exact = plan_eval(run / "checkpoints" / "checkpoint_000002")
    assert plan.checkpoint.name == "checkpoint_000002"
    newer = run / "checkpoints" / "checkpoint_000003"
    shutil.copytree(plan.checkpoint, newer)  # as the training run's next checkpoint
    state = json.loads((newer / "raytrain_state.json").read_text())
    (newer / "raytrain_state.json").write_text(json.dumps({**state, "iteration": 3}))
    shutil.rmtree(plan.checkpoint)  # as its num_to_keep prunes it
    got = evaluate(plan, episodes=1)
    assert got.checkpoint == str(newer) and got.episodes == 1
    with pytest.raises(TrainError, match="checkpoint_000002 was deleted while eval loaded it"):
        evaluate(exact, episodes=1)


def test_a_checkpoint_whose_weights_are_cut_short_is_said_by_name(ray_session, small_config):
    """Resume and eval failed with Python's `UnpicklingError: pickle data was truncated`, naming no checkpoint."""
    path, _ = small_config
    result = invoke(["train", str(path), "--set", "experiment.checkpoint_frequency=1"])
    assert result.exit_code == 0, result.output
    run = _run_dir(result.stdout)
    checkpoint = run / "checkpoints" / "checkpoint_000002"
    weights = checkpoint / "learner_group" / "learner" / "rl_module" / "default_policy" / "module_state.pkl"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    for args, instead in ((["train", "--resume", str(run), "--set", "stop.training_iteration=3"],
                           "move it out of checkpoints/ to resume from the one before it"),
                          (["eval", str(run), "--episodes", "1"], "evaluate another checkpoint")):
        result = invoke(args)
        assert result.exit_code == 1, result.output
        said = " ".join(result.output.split())
        assert f"error: cannot restore {checkpoint}: " in said and f"a file of it may be damaged (cut short by a full " \
            f"disk or a copy): {instead}" in said, said


def test_metrics_list_matches_a_live_result(ray_session, tmp_path):
    """The stop-key check relies on raytrain.metrics; a Ray upgrade that renames metrics must fail here."""
    from raytrain.config.load import load_source
    from raytrain.config.source import parse_yaml
    from raytrain.metrics import EVALUATION_METRICS, TRAIN_METRICS
    from raytrain.rllib.translate import build_ppo_config
    from raytrain.runs import flatten

    text = (
        "environment: {env: CartPole-v1}\nenv_runners: {num_env_runners: 1}\n"
        "training: {train_batch_size: 200, minibatch_size: 100, num_epochs: 1}\n"
        "evaluation: {evaluation_interval: 1, evaluation_duration: 1}\n"
    )
    cfg = load_source(parse_yaml(text, "inline.yaml")).config
    algo = build_ppo_config(cfg).build_algo()
    try:
        result = flatten(algo.train())
    finally:
        algo.stop()
    missing = sorted((TRAIN_METRICS | EVALUATION_METRICS) - set(result))
    assert not missing, f"metrics no longer reported by RLlib: {missing}"
    assert "raytrain/episode_return_mean_100" in result
    assert "env_runners/raytrain_episode_returns" not in result  # our raw list never leaks into results


def _signal_and_wait(proc: subprocess.Popen, signum: int, timeout: float) -> str:
    """Send `signum` (if it still runs), wait at most `timeout` s for it to end (killed after that); its stderr."""
    if proc.poll() is None:
        proc.send_signal(signum)
    try:
        return proc.communicate(timeout=timeout)[1]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_ctrl_c_saves_a_checkpoint(tmp_path, signum):
    """A real `raytrain train` process (its own local Ray) interrupted with SIGINT (Ctrl-C) or SIGTERM."""
    storage = tmp_path / "results"
    path = tmp_path / "long.yaml"
    path.write_text(SMALL.format(storage=storage).replace("stop: {training_iteration: 2}", "stop: {training_iteration: 100000}").replace("checkpoint_frequency: 2", "checkpoint_frequency: 0"))
    # SIGINT ignored, as in a process a non-interactive shell starts in the background: raytrain must still stop.
    proc = subprocess.Popen(
        [sys.executable, "-m", "raytrain", "train", str(path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "RAY_ADDRESS": ""}, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    try:
        deadline = time.time() + 180
        metrics = None
        while time.time() < deadline:
            found = list(storage.glob("small/*/metrics.jsonl"))
            if found and len(found[0].read_text().splitlines()) >= 2:
                metrics = found[0]
                break
            time.sleep(0.5)
        assert metrics is not None, "training did not start"
        # A second run in the same folder meanwhile is refused: both would write checkpoint_<n> and metrics rows.
        run = metrics.parent
        twice = invoke(["train", "--resume", str(run)])
        assert twice.exit_code == 2, twice.output
        assert (f"{run} is being trained right now, by process {proc.pid} (since "
                in " ".join(twice.output.split())), twice.output
        assert not (run / "config.1.yaml").exists() and (run / "command.txt").read_text().count("raytrain") == 1
    finally:
        err = _signal_and_wait(proc, signum, 120)
    assert proc.returncode == 130, err[-2000:]
    run = metrics.parent
    status = json.loads((run / "run.json").read_text())
    assert status["status"] == "interrupted"
    ckpts = list((run / "checkpoints").glob("checkpoint_*/raytrain_state.json"))
    assert len(ckpts) == 1
    assert f"raytrain train --resume {run}" in err
    assert invoke(["train", "--resume", str(run), "--dry-run"]).exit_code == 0  # its process has ended


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_eval_stops_on_ctrl_c_or_sigterm(ray_session, small_config, signum):
    """SIGTERM too: `ray.init` installs Ray's own SIGTERM handler, which ended eval with a native stack dump."""
    import ray

    path, storage = small_config
    trained = invoke(["train", str(path)])
    assert trained.exit_code == 0, trained.output
    proc = subprocess.Popen(
        [sys.executable, "-m", "raytrain", "eval", str(_run_dir(trained.stdout)), "--episodes", "1000000"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
        env={**os.environ, "RAY_ADDRESS": ray.get_runtime_context().gcs_address},
    )
    try:
        deadline = time.time() + 120
        while time.time() < deadline and not any(j.get("DriverPid") == proc.pid and not j.get("IsDead")
                                                 for j in ray._private.state.jobs()):
            time.sleep(0.2)
        time.sleep(1.0)  # past connecting: the handlers come right after
        assert proc.poll() is None, proc.communicate()
    finally:
        err = _signal_and_wait(proc, signum, 60)
    assert proc.returncode == 130, err[-2000:]
    assert err.strip().endswith("interrupted") and "SIGTERM received" not in err, err[-2000:]


LAB_IDS = '''
import gymnasium

# What a package of envs does when imported (ale_py, minigrid, ...): register its ids.
gymnasium.register("Lab/ShortPole-v0", entry_point="gymnasium.envs.classic_control:CartPoleEnv", max_episode_steps=20)
'''


def test_an_id_a_module_registers_trains_by_gymnasiums_module_id_form(ray_session, tmp_path, monkeypatch):
    """`env: lab_ids:Lab/ShortPole-v0`, as gymnasium.make and RLlib take it (RLlib's Atari examples:
    `ale_py:ALE/Pong-v5`). raytrain read it as an import path and refused it ("module 'lab_ids' has no
    attribute 'Lab/ShortPole-v0'"); the bare id, whose package was not imported, named an unrelated id."""
    (tmp_path / "lab_ids.py").write_text(LAB_IDS)
    monkeypatch.chdir(tmp_path)
    config = tmp_path / "ids.yaml"
    config.write_text(SMALL.format(storage=tmp_path / "results").replace("CartPole-v1", "lab_ids:Lab/ShortPole-v0"))
    bare = invoke(["train", str(config), "--set", "environment.env=Lab/ShortPole-v0"])
    assert bare.exit_code == 2, bare.output
    assert "'PACKAGE:Lab/ShortPole-v0'" in bare.output
    result = invoke(["train", str(config)])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in (_run_dir(result.stdout) / "metrics.jsonl").read_text().splitlines()]
    assert max(r["env_runners/episode_return_max"] for r in rows) <= 20  # the id's own 20-step limit: its env ran


def test_eval_plays_the_checkpoints_observation_filter_as_saved(ray_session, small_config):
    """A MeanStdFilter's running mean and std are part of the policy: eval normalizes with them as they were
    saved, and its own episodes do not move them (RLlib's filter updates by default)."""
    from raytrain.evaluate import evaluation_algorithm, plan_eval

    path, storage = small_config
    path.write_text(path.read_text().replace("num_envs_per_env_runner: 2}", "num_envs_per_env_runner: 2, observation_filter: MeanStdFilter}"))
    result = invoke(["train", str(path)])
    assert result.exit_code == 0, result.output
    plan = plan_eval(_run_dir(result.stdout))

    def filter_state(algo):
        (state,) = [s for name, s in algo.env_runner.get_state()["env_to_module_connector"].items() if "MeanStdFilter" in name]
        return json.dumps(state, default=repr, sort_keys=True)

    with evaluation_algorithm(plan) as algo:
        saved = filter_state(algo)
        algo.env_runner.sample(num_episodes=3, explore=False, random_actions=False)
        assert filter_state(algo) == saved


def test_discrete_observations_train_and_play_with_flatten_observations(ray_session, small_config):
    """FrozenLake's Discrete(16) observations had no network of PPO's; `env_runners.flatten_observations: true`
    makes them one-hot (RLlib's FlattenObservations) in the env runners, here a remote one, before the filter;
    eval plays the checkpoint the same way, its filter frozen as saved."""
    from raytrain.evaluate import evaluation_algorithm, plan_eval

    path, storage = small_config
    text = path.read_text().replace("{env: CartPole-v1}", "{env: FrozenLake-v1, env_config: {is_slippery: false}}")
    path.write_text(text.replace("num_env_runners: 0, num_envs_per_env_runner: 2}",
                                 "num_env_runners: 1, num_envs_per_env_runner: 2, flatten_observations: true, "
                                 "observation_filter: MeanStdFilter}"))
    result = invoke(["train", str(path)])
    assert result.exit_code == 0, result.output
    run = _run_dir(result.stdout)
    played = invoke(["eval", str(run), "--episodes", "2", "--json"])
    assert played.exit_code == 0, played.output
    assert json.loads(played.stdout)["episodes"] == 2
    plan = plan_eval(run)
    with evaluation_algorithm(plan) as algo:
        names = [type(piece).__name__ for piece in algo.env_runner._env_to_module.connectors]
        assert names[:2] == ["FlattenObservations", "MeanStdFilter"], names
        assert algo.env_runner._env_to_module.observation_space.shape == (16,)
        saved = json.dumps(algo.env_runner.get_state()["env_to_module_connector"], default=repr, sort_keys=True)
        algo.env_runner.sample(num_episodes=2, explore=False, random_actions=False)
        assert json.dumps(algo.env_runner.get_state()["env_to_module_connector"], default=repr, sort_keys=True) == saved


SHIPPED = sorted(p for p in (Path(__file__).parents[2] / "configs").glob("*.yaml") if "\nenvironment:" in p.read_text())


@pytest.mark.parametrize("config", SHIPPED, ids=lambda p: p.name)
def test_every_shipped_train_config_trains_and_its_checkpoint_plays(ray_session, tmp_path, config):
    """Validating a shipped config does not show that it runs: the shipped Optuna sweep validated and failed at
    its start. One iteration of each, then eval of its checkpoint."""
    result = invoke(["train", str(config), "--set", f"experiment.storage_path={tmp_path}",
                     "--set", "stop={training_iteration: 1}"])
    assert result.exit_code == 0, result.output
    played = invoke(["eval", str(_run_dir(result.output)), "--episodes", "1", "--json"])
    assert played.exit_code == 0, played.output


DRIVER_WITH_A_STOPPABLE_LOCAL_RAY = """
import os, signal, subprocess, sys, time
import numpy as np
import ray
from raytrain.config.load import load_source
from raytrain.config.source import parse_yaml
from raytrain.rllib.algorithm import algorithm, remove_scratch_folders
from raytrain.rllib.translate import build_ppo_config

def stop_the_node():
    node = ray._private.worker._global_node
    for kind in sorted(node.all_processes, key=lambda kind: kind != "raylet"):  # the raylet first: it tells the GCS
        for info in node.all_processes[kind]:                                  # it stops, and the GCS the driver
            os.kill(info.process.pid, signal.SIGTERM)
            time.sleep(0.01)
    return node

ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR")
"""
"""The start of a driver script (run in a subprocess): a local Ray, and `stop_the_node()`, which SIGTERMs every
process of it, the raylet first."""

DRIVER_OF_A_STOPPED_NODE = DRIVER_WITH_A_STOPPABLE_LOCAL_RAY + """
text = ("environment: {env: CartPole-v1}\\nenv_runners: {num_env_runners: 1}\\n"
        "training: {train_batch_size: 200, minibatch_size: 100, num_epochs: 1}\\n"
        "evaluation: {evaluation_interval: 1, evaluation_duration: 1}\\n")
with algorithm(build_ppo_config(load_source(parse_yaml(text, "inline.yaml")).config)) as algo:
    algo.train()
    node = stop_the_node()
    time.sleep(3)
    print("the driver outlived its node", flush=True)
    node.kill_all_processes(check_alive=False, allow_graceful=False)
    remove_scratch_folders()  # Tune's, in ~/ray_results: the algorithm is not left in order
    os._exit(0)
"""


def test_a_driver_whose_local_ray_is_stopped_under_it_is_not_ended_by_ray():
    """A SIGTERM to every process of `train` (systemd, Slurm) stops the local raylet with the driver. Ray's core
    worker ends a driver that owns an object in the store of a node that dies (exit 1, no word: it tries to recover
    the object over a connection to that store that is gone), and RLlib's env runner groups (training and
    evaluation) each kept their config put there for the algorithm's life: `train` saved its checkpoint, or not,
    and ended with exit 1 in 4 of 16 runs of the every-process test (`test_tune.py`). Built by raytrain, the
    algorithm holds no such object, and the driver outlives the node by 3 s here (before: exit 1 at once, "Attempting
    to recover 2 lost objects")."""
    done = subprocess.run([sys.executable, "-c", DRIVER_OF_A_STOPPED_NODE], capture_output=True, text=True,
                          timeout=180, env={**os.environ, "RAY_ADDRESS": ""}, start_new_session=True)
    assert done.returncode == 0 and "the driver outlived its node" in done.stdout, done.stderr[-3000:]


DRIVER_TRAINING_ON_WITHOUT_ITS_NODE = DRIVER_WITH_A_STOPPABLE_LOCAL_RAY + """
text = ("environment: {env: CartPole-v1}\\nenv_runners: {num_env_runners: 0, num_envs_per_env_runner: 2}\\n"
        "training: {train_batch_size: 200, minibatch_size: 100, num_epochs: 1}\\nmodel: {fcnet_hiddens: [16]}\\n"
        "evaluation: {evaluation_interval: 1, evaluation_duration: 1}\\n")
with algorithm(build_ppo_config(load_source(parse_yaml(text, "inline.yaml")).config)) as algo:
    algo.train()
    node = stop_the_node()
    for info in node.all_processes.get("raylet", []):  # the node's object store is gone: a raylet that lingers in
        try:                                             # its shutdown (it can for a minute, its GCS stopped too)
            info.process.wait(timeout=5)                 # is killed, or Ray's 60 s without a GCS would end the
        except subprocess.TimeoutExpired:                # driver before it trained on
            info.process.kill()
            info.process.wait(timeout=30)
    time.sleep(1)
    sys.excepthook = sys.__excepthook__  # Ray's asks the GCS, which is gone, about a failure here
    for _ in range(2):  # each iteration gives the new weights to the training and the evaluation env runner
        algo.train()
    learned = algo.learner_group.get_weights()["default_policy"]
    for group in (algo.env_runner_group, algo.eval_env_runner_group):
        held = group.local_env_runner.get_state(components="rl_module")["rl_module"]
        assert held and all(np.array_equal(held[name], learned[name]) for name in held), "stale weights"
    algo.save_to_path(sys.argv[1])
    print(f"trained to iteration {algo.iteration} and saved after its node stopped", flush=True)
    node.kill_all_processes(check_alive=False, allow_graceful=False)
    remove_scratch_folders()  # Tune's, in ~/ray_results: the algorithm is not left in order
    os._exit(0)
"""


def test_a_driver_with_no_remote_env_runner_trains_on_and_saves_after_its_local_ray_stopped(tmp_path):
    """A SIGTERM to every process of `train` (systemd, Slurm) can stop the local raylet a moment before the
    driver's own SIGTERM handler runs. RLlib puts the weights in the node's object store at every iteration's sync,
    even with no remote env runner to read them, and Ray's core worker ends a driver whose put finds that store gone
    (exit 1, no word: "The connection to the plasma store is failed"): the run lost its SIGTERM checkpoint, and a
    requeued Slurm job went on from the periodic one. Built by raytrain, an algorithm whose env runners are all the
    driver's own gives them the weights directly: the driver trains on (the weights reach its env runners) and
    saves a checkpoint with its node gone (before: exit 1 in the first iteration after it)."""
    done = subprocess.run([sys.executable, "-c", DRIVER_TRAINING_ON_WITHOUT_ITS_NODE, str(tmp_path / "checkpoint")],
                          capture_output=True, text=True, timeout=180, env={**os.environ, "RAY_ADDRESS": ""},
                          start_new_session=True)
    assert done.returncode == 0 and "trained to iteration 3 and saved after its node stopped" in done.stdout, (
        done.returncode, done.stdout[-2000:], done.stderr[-3000:])
    assert (tmp_path / "checkpoint" / "rllib_checkpoint.json").is_file()


@pytest.mark.parametrize("stopped", ["raylet", "every process"])
def test_a_run_whose_local_ray_is_stopped_under_it_saves_and_ends_saying_so(ray_session, tmp_path, stopped):
    """`ray stop` on the machine (which SIGTERMs the raylet), or a SIGTERM to every process of the run's local Ray
    but the driver's: the run trained on without its Ray until Ray's core worker ended it 60 s later ("Failed to
    connect to GCS within 60 seconds", exit 1), with what came after the last periodic checkpoint lost and run.json
    saying `running`. Now it saves a checkpoint at the end of the iteration it notices it in and ends (exit 1),
    saying what ended and how to resume; the resume trains on from that checkpoint."""
    storage = tmp_path / "results"
    path = tmp_path / "long.yaml"
    path.write_text(SMALL.format(storage=storage).replace("stop: {training_iteration: 2}",
                                                          "stop: {training_iteration: 100000}")
                    .replace("checkpoint_frequency: 2", "checkpoint_frequency: 1000"))
    proc = subprocess.Popen([sys.executable, "-m", "raytrain", "train", str(path)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "RAY_ADDRESS": ""})
    ray = {}
    try:
        deadline = time.time() + 180
        while time.time() < deadline and not list(storage.glob("small/*/metrics.jsonl")):
            time.sleep(0.5)
        rows = list(storage.glob("small/*/metrics.jsonl"))
        assert rows and proc.poll() is None, "training did not start"
        ray = {pid: process_name(pid) for pid in descendants(proc.pid)}
        assert "raylet" in ray.values() and "gcs_server" in ray.values(), ray
        for pid, name in ray.items():
            if stopped == "every process" or name == "raylet":
                os.kill(pid, signal.SIGTERM)
        # Noticed at the end of an iteration (GCS_PROBE_TIMEOUT_S where only its GCS tells): seconds, not 60.
        out, err = proc.communicate(timeout=40)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
        for pid in ray:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
    assert proc.returncode == 1, err[-3000:]
    said = " ".join(err.split())
    run = rows[0].parent
    status = json.loads((run / "run.json").read_text())
    assert status["status"] == "failed" and status["reason"] == "local Ray stopped", status
    assert status["error"].startswith("local Ray stopped under the run: "), status
    # The raylet's end, or its GCS asked (every 10 s, or once a process of that Ray ended) in the moment between
    # the raylet's signal and its end (the node is dead to the GCS at once), or while the GCS is stopping too.
    told = ["raylet ended (", "its raylet is stopping ("] + (["its GCS does not answer"] if stopped != "raylet" else [])
    assert any(words in status["error"] for words in told), status
    done = status["iteration"]
    assert status["last_checkpoint"] == str(run / "checkpoints" / f"checkpoint_{done:06d}")
    assert (run / "checkpoints" / f"checkpoint_{done:06d}" / "raytrain_state.json").is_file()
    assert [json.loads(line)["training_iteration"] for line in rows[0].read_text().splitlines()] == list(range(1, done + 1))
    assert f"local Ray stopped after {done} iterations" in said and f"resume with: raytrain train --resume {run}" in said
    assert "the local Ray this run started stopped under it (" in said and "Failed to connect to GCS" not in said
    assert out.strip().splitlines()[-1] == str(run)
    assert not [pid for pid in ray if alive(pid)], "a process of that Ray outlived the run"
    if stopped == "raylet":  # nothing lost: the resume (here, on the test session's Ray) goes on from that checkpoint
        resumed = invoke(["train", "--resume", str(run), "--set", f"stop.training_iteration={done + 1}"])
        assert resumed.exit_code == 0, resumed.output[-3000:]
        status = json.loads((run / "run.json").read_text())
        assert status["status"] == "finished" and status["iteration"] == done + 1 and "error" not in status, status

"""`raytrain config import-rllib`: old tuned examples become raytrain configs."""

import json

import pytest
import yaml
from typer.testing import CliRunner

from raytrain.cli import app
from raytrain.config.load import load_config


def test_import_converts_and_lists_untranslated(data_dir, tmp_path):
    out = tmp_path / "new.yaml"
    result = CliRunner().invoke(app, ["config", "import-rllib", str(data_dir / "rllib_cartpole_ppo.yaml"), "-o", str(out)])
    assert result.exit_code == 0, result.output
    text = out.read_text()
    data = yaml.safe_load(text)
    assert data["experiment"]["name"] == "cartpole-ppo"
    assert data["experiment"]["checkpoint_frequency"] == 5
    assert data["environment"]["env"] == "CartPole-v1"
    assert data["env_runners"] == {"num_env_runners": 1, "num_envs_per_env_runner": 2, "observation_filter": "MeanStdFilter"}
    assert data["training"] == {
        "lr": 0.0003,
        "gamma": 0.99,
        "vf_loss_coeff": 0.01,
        "train_batch_size": 4000,
        "minibatch_size": 128,
        "num_epochs": 6,
    }
    assert data["model"] == {"fcnet_hiddens": [32], "fcnet_activation": "linear", "vf_share_layers": True}
    assert data["stop"] == {"env_runners/episode_return_mean": 150, "num_env_steps_sampled_lifetime": 100000}
    # Untranslated keys are listed, in the output file and on the terminal.
    for key in ("config.exploration_config", "config.simple_optimizer", "config.model.custom_model_config"):
        assert key in text
        assert key in result.output
    assert "enable_connectors" in result.output
    # The result is a valid raytrain config as is.
    load_config(out)


def test_import_writes_only_what_the_old_file_set(data_dir, tmp_path, monkeypatch):
    """Defaults stay defaults: the converted file is portable (no `/root/raytrain_results` of the machine that
    converted it) and short, and a count reads as one (100000, not 100000.0)."""
    monkeypatch.setenv("HOME", str(tmp_path / "converter"))
    out = tmp_path / "new.yaml"
    result = CliRunner().invoke(app, ["config", "import-rllib", str(data_dir / "rllib_cartpole_ppo.yaml"), "-o", str(out)])
    assert result.exit_code == 0, result.output
    text = out.read_text()
    data = yaml.safe_load(text)
    assert set(data) == {"experiment", "environment", "env_runners", "training", "model", "stop"}
    assert data["experiment"] == {"name": "cartpole-ppo", "checkpoint_frequency": 5}
    assert data["environment"] == {"env": "CartPole-v1"}
    assert "converter" not in text and "  num_env_steps_sampled_lifetime: 100000\n" in text
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    assert load_config(out).config.experiment.storage_path == str(tmp_path / "user" / "raytrain_results")


def test_import_refuses_other_algorithms(write_yaml):
    path = write_yaml("x:\n  env: CartPole-v1\n  run: DQN\n  config: {}\n")
    result = CliRunner().invoke(app, ["config", "import-rllib", str(path)])
    assert result.exit_code == 2
    assert "raytrain trains PPO" in result.output


def test_import_does_not_overwrite(data_dir, tmp_path):
    out = tmp_path / "new.yaml"
    out.write_text("keep me")
    result = CliRunner().invoke(app, ["config", "import-rllib", str(data_dir / "rllib_cartpole_ppo.yaml"), "-o", str(out)])
    assert result.exit_code == 2
    assert out.read_text() == "keep me"


def _import(path, *args):
    return CliRunner().invoke(app, ["config", "import-rllib", str(path), *args])


def test_an_invalid_value_is_reported_at_its_line_in_the_old_file(write_yaml):
    """The errors named the file only (`old.yaml: training.gamma: ...`): the converted data had no origins."""
    path = write_yaml("x:\n  env: CartPole-v1\n  config:\n    lr: 0.001\n    gamma: 1.5\n    num_workers: many\n")
    result = _import(path)
    assert result.exit_code == 2
    assert f"{path}:5: training.gamma: Input should be less than or equal to 1" in result.output
    assert f"{path}:6: env_runners.num_env_runners: Input should be a valid integer" in result.output


def test_a_renamed_key_is_noticed_at_its_line_without_asking_to_rename_it(write_yaml):
    """The import writes the new name itself: `Rename it to silence this` asked for what was already done."""
    path = write_yaml("x:\n  env: CartPole-v1\n  stop: {timesteps_total: 1000}\n  config:\n    num_workers: 1\n"
                      "    enable_connectors: true\n")
    result = _import(path)
    assert result.exit_code == 0, result.output
    assert f"notice: {path}:6: config.enable_connectors: dropped" in result.output
    assert f"notice: {path}:5: num_workers is an old RLlib name; using env_runners.num_env_runners.\n" in result.output
    assert f"notice: {path}:3: stop.timesteps_total is an old RLlib name; using stop.num_env_steps_sampled_lifetime.\n" in result.output
    assert "Rename it" not in result.output


@pytest.mark.parametrize(
    ("text", "args", "said"),
    [
        ("x:\n  env: CartPole-v1\n  config: [1, 2]\n", [], ":3: x.config: must be a mapping of RLlib settings (got a list)"),
        ("x:\n  env: CartPole-v1\n  stop: 5\n", [], ":3: x.stop: must be a mapping of stop criteria (got an int)"),
        ("x:\n  env: CartPole-v1\n  config: {model: 5}\n", [], ":3: x.config.model: must be a mapping of model settings (got an int)"),
        ("x:\n  env: CartPole-v1\ny: 3\n", ["--experiment", "y"], ":3: y: is not an experiment (a mapping with env, run and config); the file has x"),
    ],
)
def test_a_malformed_old_file_is_an_error_not_a_crash(write_yaml, text, args, said):
    """A `config:` list or a scalar `stop:` was exit 1 with a TypeError."""
    path = write_yaml(text)
    result = _import(path, *args)
    assert result.exit_code == 2, result.output
    assert f"error: {path}{said}" in result.output


@pytest.mark.parametrize("command", [["config", "import-rllib", "OLD"], ["config", "schema"]])
@pytest.mark.parametrize("target", ["missing/new.yaml", "folder"])
def test_an_output_that_cannot_be_written_is_exit_2_naming_it(data_dir, tmp_path, command, target):
    """`-o` into a folder that does not exist, or onto a folder (with --force), was exit 1 with a
    FileNotFoundError or IsADirectoryError."""
    (tmp_path / "folder").mkdir()
    output = tmp_path / target
    args = [str(data_dir / "rllib_cartpole_ppo.yaml") if a == "OLD" else a for a in command]
    result = CliRunner().invoke(app, [*args, "-o", str(output), *(["--force"] if "import-rllib" in args else [])])
    assert result.exit_code == 2, result.output
    said = "is a folder" if target == "folder" else f"the folder {output.parent} does not exist"
    assert f"error: -o {output}: {said}" in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["folder"] and not any((tmp_path / "folder").iterdir())


@pytest.mark.parametrize("command", [["train"], ["tune"], ["config", "validate"], ["cluster", "check"]])
def test_an_old_rllib_file_given_to_a_command_says_to_import_it(data_dir, command):
    """`raytrain train old.yaml` said `cartpole-ppo: unknown section` and `environment: is required`."""
    old = data_dir / "rllib_cartpole_ppo.yaml"
    result = CliRunner().invoke(app, [*command, str(old)])
    assert result.exit_code == 2, result.output
    assert (f"error: {old}: RLlib's former tuned-example format (NAME: {{env, run, config}}), not a raytrain file: "
            f"convert it with `raytrain config import-rllib {old} -o NEW.yaml`") in result.output
    assert "unknown section" not in result.output and "is required" not in result.output
    assert "--kind" not in result.output


def test_schema_does_not_overwrite_a_file_without_force(tmp_path):
    """`config schema -o` replaced any existing file (a config given by mistake) where `import-rllib -o` refused
    without --force."""
    target = tmp_path / "ppo_pbt.yaml"
    target.write_text("name: mine\n")
    result = CliRunner().invoke(app, ["config", "schema", "-o", str(target)])
    assert result.exit_code == 2, result.output
    assert f"error: {target} exists; pass --force to overwrite it" in result.output
    assert target.read_text() == "name: mine\n"
    forced = CliRunner().invoke(app, ["config", "schema", "-o", str(target), "--force"])
    assert forced.exit_code == 0, forced.output
    assert json.loads(target.read_text())["title"]


GRID_EXAMPLE = """\
cartpole-ppo:
    env: CartPole-v1
    run: PPO
    num_samples: 2
    checkpoint_freq: 5
    stop:
        timesteps_total: 100000
    config:
        gamma: 0.99
        lr:
            grid_search: [0.001, 0.0003]
        num_sgd_iter: {grid_search: [6, 10]}
        model:
            fcnet_hiddens: {grid_search: [[32], [64, 64]]}
        env_config: {render_mode: null}
"""


def test_grid_search_values_become_a_grid_sweep(write_yaml, tmp_path, monkeypatch):
    """Old tuned examples swept with `{grid_search: [...]}`: the import said `training.num_epochs: Input should be
    a valid integer` (exit 2), where raytrain sweeps a grid itself (`raytrain tune`, search.algorithm grid)."""
    from raytrain.config.sweep_load import load_sweep

    monkeypatch.setenv("HOME", str(tmp_path / "converter"))
    path = write_yaml(GRID_EXAMPLE, "old.yaml")
    out = tmp_path / "sweep.yaml"
    result = _import(path, "-o", str(out))
    assert result.exit_code == 0, result.output
    text = out.read_text()
    data = yaml.safe_load(text)
    assert set(data) == {"train", "search", "space"}
    assert data["search"] == {"algorithm": "grid", "num_samples": 2}
    assert data["space"] == {
        "training.lr": {"distribution": "grid", "values": [0.001, 0.0003]},
        "training.num_epochs": {"distribution": "grid", "values": [6, 10]},
        "model.fcnet_hiddens": {"distribution": "grid", "values": [[32], [64, 64]]},
    }
    # The searched settings are the space's alone; the rest is the train config every trial starts from.
    assert data["train"] == {
        "experiment": {"name": "cartpole-ppo", "checkpoint_frequency": 5},
        "environment": {"env": "CartPole-v1", "env_config": {"render_mode": None}},
        "training": {"gamma": 0.99},
        "stop": {"num_env_steps_sampled_lifetime": 100000},
    }
    assert "num_samples" not in text.partition("\ntrain:")[0]  # not listed as untranslated
    assert "raytrain tune" in text.splitlines()[0] + text.splitlines()[1]
    assert f"notice: {path}: its grid_search values (training.lr, training.num_epochs, model.fcnet_hiddens) became " \
           "a grid sweep" in result.output
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    loaded = load_sweep(out, storage="skip")
    assert loaded.sweep.search.algorithm == "grid" and loaded.name == "cartpole-ppo_grid"
    assert loaded.sweep.checkpoint.frequency == 5


def test_the_seed_of_a_grid_becomes_the_sweeps_search_seed(write_yaml, tmp_path, monkeypatch):
    """`config.seed: 3` went into the embedded train config, where every trial drew its own seed instead, from a
    search.seed left unset: the seed written was dropped and the trials' seeds could not be repeated."""
    from raytrain.config.sweep_load import load_sweep

    monkeypatch.setenv("HOME", str(tmp_path / "converter"))
    path = write_yaml(GRID_EXAMPLE.replace("        gamma: 0.99\n", "        gamma: 0.99\n        seed: 3\n"), "old.yaml")
    out = tmp_path / "sweep.yaml"
    result = _import(path, "-o", str(out))
    assert result.exit_code == 0, result.output
    data = yaml.safe_load(out.read_text())
    assert data["search"] == {"algorithm": "grid", "num_samples": 2, "seed": 3}
    assert "seed" not in data["train"]["experiment"]
    assert (f"notice: {path}:10: config.seed: 3 became search.seed: 3: each trial draws its own seed from it (RLlib "
            "gave every trial seed 3)") in " ".join(result.output.split()), result.output
    loaded = load_sweep(out, storage="skip")
    assert loaded.sweep.search.seed == 3 and [n for n in loaded.notices if "experiment.seed" in n] == []


@pytest.mark.parametrize(
    ("config", "line", "said"),
    [
        # A grid over what a sweep cannot vary: refused at the old file's line.
        ("    env: {grid_search: [CartPole-v1, Acrobot-v1]}\n", 4,
         "config.env: a grid_search over the env cannot be converted: a raytrain sweep trains one env"),
        ("    lr: {grid_search: []}\n", 4, "config.lr: a grid_search needs a list of at least one value"),
        ("    lr: {grid_search: 0.1}\n", 4, "config.lr: a grid_search needs a list of at least one value"),
        ("    lr: {grid_search: [0.1], extra: 1}\n", 4, "config.lr: a grid_search needs a list of at least one value"),
        ("    lr: {grid_search: [0.1, -1.0]}\n", 4, "training.lr"),
        ("    env_config:\n      a: {b: {grid_search: [1, 2]}}\n", 5,
         "config.env_config.a.b: this grid_search cannot be converted"),
        ("    model: {fcnet_hiddens: [{grid_search: [1, 2]}]}\n", 4,
         "config.model.fcnet_hiddens.0: this grid_search cannot be converted"),
    ],
)
def test_a_grid_search_that_cannot_be_a_sweep_is_exit_2_at_its_line(write_yaml, tmp_path, config, line, said):
    head = "x:\n  run: PPO\n" if "env:" in config else "x:\n  env: CartPole-v1\n"
    path = write_yaml(head + "  config:\n" + config, "old.yaml")
    out = tmp_path / "sweep.yaml"
    result = _import(path, "-o", str(out))
    assert result.exit_code == 2, result.output
    assert f"error: {path}:{line}: " in result.output and said in result.output
    assert not out.exists()


@pytest.mark.parametrize("key", ["local_dir", "storage_path"])
def test_the_old_results_folder_becomes_the_storage_path_as_written(write_yaml, tmp_path, monkeypatch, key):
    """Tune's `local_dir` (`storage_path` since Ray 2.7) was listed as untranslated, so the converted run wrote to
    ~/raytrain_results instead of where the old one did. It is written as the old file wrote it (`~` kept)."""
    monkeypatch.setenv("HOME", str(tmp_path / "converter"))
    path = write_yaml(f"x:\n  env: CartPole-v1\n  {key}: ~/ray_results\n", "old.yaml")
    out = tmp_path / "new.yaml"
    result = _import(path, "-o", str(out))
    assert result.exit_code == 0, result.output
    assert yaml.safe_load(out.read_text())["experiment"] == {"name": "x", "storage_path": "~/ray_results"}
    assert "not translated" not in result.output
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    assert load_config(out).config.experiment.storage_path == str(tmp_path / "user" / "ray_results")


def test_an_env_in_both_places_keeps_the_experiments_and_says_so(write_yaml):
    """`env:` beside `config: {env: ...}`: the config's was dropped without a word (RLlib's runner took the
    experiment's too)."""
    path = write_yaml("x:\n  env: CartPole-v1\n  config:\n    env: Acrobot-v1\n", "old.yaml")
    result = _import(path)
    assert result.exit_code == 0, result.output
    assert "env: CartPole-v1" in result.output and "env: Acrobot-v1" not in result.output.partition("notice")[0]
    assert (f"notice: {path}:4: config.env: dropped: the experiment's env (CartPole-v1, {path}:2) replaces it, as "
            "RLlib's `rllib train -f` did") in result.output


def test_the_old_heads_after_the_encoder_become_the_new_head_settings(write_yaml):
    """`post_fcnet_hiddens` (the old stack's policy and value heads, in its Atari examples) was listed as untranslated:
    the converted network lost its 256-unit heads."""
    path = write_yaml("x:\n  env: CartPole-v1\n  config:\n    model:\n      post_fcnet_hiddens: [256]\n"
                      "      post_fcnet_activation: relu\n      dim: 84\n", "old.yaml")
    result = _import(path)
    assert result.exit_code == 0, result.output
    data = yaml.safe_load(result.stdout)
    assert data["model"] == {"head_fcnet_hiddens": [256], "head_fcnet_activation": "relu"}
    assert f"notice: {path}:5: config.model.post_fcnet_hiddens: is model.head_fcnet_hiddens on RLlib's new API stack" \
        in result.output
    assert "not translated: config.model.dim:" in result.output


def test_an_atari_id_is_written_in_the_form_that_imports_its_package(write_yaml, tmp_path, monkeypatch):
    """RLlib's Atari examples name `ALE/Breakout-v5`, which Gymnasium before 1.0 found through ale-py's plugin; now
    the conversion failed with 'no Gymnasium id of the namespace ALE is registered' whether ale-py was installed or
    not. A stand-in ale_py module registers the id as the real one does."""
    (tmp_path / "ale_py.py").write_text(
        "import gymnasium\n"
        "gymnasium.register(id='ALE/Breakout-v5', entry_point='gymnasium.envs.classic_control.cartpole:CartPoleEnv')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    path = write_yaml("atari-ppo:\n  env: ALE/Breakout-v5\n  run: PPO\n  config: {clip_param: 0.1}\n", "old.yaml")
    import sys

    import gymnasium

    try:
        result = _import(path)
    finally:  # the stand-in leaves no ALE namespace to the tests after it
        gymnasium.envs.registry.pop("ALE/Breakout-v5", None)
        sys.modules.pop("ale_py", None)
    assert result.exit_code == 0, result.output
    assert yaml.safe_load(result.stdout)["environment"] == {"env": "ale_py:ALE/Breakout-v5"}
    assert (f"notice: {path}:2: env: written 'ale_py:ALE/Breakout-v5', Gymnasium's form that imports ale_py (which "
            "registers the id) before making the env") in result.output


FLAT = ("env: CartPole-v1\nrun: PPO\nstop: {episode_reward_mean: 150}\ncheckpoint_freq: 5\n"
        "config:\n  num_workers: 1\n  lr: 0.001\n  model: {fcnet_hiddens: [32]}\n  exploration_config: {}\n")


def test_an_experiment_written_at_the_top_level_is_converted(write_yaml, tmp_path, monkeypatch):
    """One experiment's spec with no name above it (`env:, run:, config:` at the top level, as `tune.run(**spec)`
    and `rllib train --run/--env/--config` take it) said "holds 4 experiments (stop, config); pick one"."""
    monkeypatch.setenv("HOME", str(tmp_path))
    old = write_yaml(FLAT, "cartpole_flat.yaml")
    out = tmp_path / "new.yaml"
    result = CliRunner().invoke(app, ["config", "import-rllib", str(old), "-o", str(out)])
    assert result.exit_code == 0, result.output
    data = yaml.safe_load(out.read_text())
    assert data["experiment"] == {"name": "cartpole_flat", "checkpoint_frequency": 5}
    assert data["environment"] == {"env": "CartPole-v1"}
    assert data["env_runners"] == {"num_env_runners": 1}
    assert data["training"] == {"lr": 0.001}
    assert data["model"] == {"fcnet_hiddens": [32]}
    assert data["stop"] == {"env_runners/episode_return_mean": 150}
    assert "config.exploration_config" in result.output
    # Notices are placed at the lines of the old file, named by its own paths.
    assert f"{old}:6: num_workers is an old RLlib name" in " ".join(result.output.split()), result.output
    named = CliRunner().invoke(app, ["config", "import-rllib", str(old), "--experiment", "mine"])
    assert named.exit_code == 0, named.output
    assert "  name: mine\n" in named.stdout, named.stdout


def test_an_experiment_at_the_top_level_is_refused_at_its_own_paths(write_yaml):
    old = write_yaml(FLAT.replace("run: PPO", "run: DQN"), "flat.yaml")
    result = CliRunner().invoke(app, ["config", "import-rllib", str(old)])
    assert result.exit_code == 2, result.output
    assert f"error: {old}:2: run: raytrain trains PPO; 'DQN' cannot be imported" in result.output


@pytest.mark.parametrize("command", [["train"], ["tune"], ["config", "validate"]])
def test_an_experiment_at_the_top_level_given_to_a_command_says_to_import_it(write_yaml, command):
    """It said `env: unknown section; it belongs in the 'environment' section`, `run: unknown section`, `config:
    unknown section` and `environment: is required`."""
    old = write_yaml(FLAT, "flat.yaml")
    result = CliRunner().invoke(app, [*command, str(old)])
    output = " ".join(result.output.split())
    assert result.exit_code == 2, result.output
    assert (f"error: {old}: an RLlib experiment (env, run, config at the top level), not a raytrain file: convert it "
            f"with `raytrain config import-rllib {old} -o NEW.yaml`") in output, output
    assert "unknown section" not in output and "is required" not in output


def test_an_experiment_at_the_top_level_is_named_after_its_file_as_a_folder_may_be(write_yaml):
    old = write_yaml(FLAT, "-my flat.yaml")
    result = CliRunner().invoke(app, ["config", "import-rllib", str(old)])
    assert result.exit_code == 0, result.output
    assert "  name: my_flat\n" in result.stdout, result.stdout


def test_an_evaluation_config_of_explore_becomes_evaluation_explore(write_yaml):
    """`evaluation_config: {explore: false}` (greedy evaluation, in many RLlib examples) was listed as "unknown on
    RLlib's new API stack", which does take it."""
    path = write_yaml("x:\n  env: CartPole-v1\n  config:\n    evaluation_interval: 2\n"
                      "    evaluation_config: {explore: false}\n", "old.yaml")
    result = _import(path)
    assert result.exit_code == 0, result.output
    assert yaml.safe_load(result.stdout)["evaluation"] == {"evaluation_interval": 2, "evaluation_explore": False}
    other = write_yaml("x:\n  env: CartPole-v1\n  config:\n    evaluation_interval: 2\n"
                       "    evaluation_config: {explore: false, env_config: {hard: true}}\n", "other.yaml")
    result = _import(other)
    assert result.exit_code == 0, result.output
    assert yaml.safe_load(result.stdout)["evaluation"] == {"evaluation_interval": 2, "evaluation_explore": False}
    assert ("not translated: config.evaluation_config.env_config: raytrain takes only explore of evaluation_config "
            "(evaluation.evaluation_explore)") in " ".join(result.output.split())


@pytest.mark.parametrize(("text", "what", "command"), [
    ("experiment: {name: t}\nenvironment: {env: CartPole-v1}\ntraining: {lr: 0.001}\nstop: {training_iteration: 2}\n",
     "a train config", "train it with `raytrain train {path}`"),
    ("base: b.yaml\nsearch: {algorithm: random}\nspace: {training.lr: {distribution: uniform, low: 0.1, high: 0.2}}\n",
     "a sweep file", "run it with `raytrain tune {path}`"),
])
def test_a_raytrain_file_given_to_import_is_told_what_it_is(write_yaml, text, what, command):
    """It said the file "holds 4 experiments (experiment, environment, training, stop); pick one with --experiment"."""
    path = write_yaml(text, "mine.yaml")
    result = _import(path)
    assert result.exit_code == 2, result.output
    assert (f"{path}: already {what}, not RLlib's tuned-example format: nothing to convert; "
            + command.format(path=path)) in " ".join(result.output.split()), result.output

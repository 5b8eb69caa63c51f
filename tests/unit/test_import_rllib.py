"""`raytrain config import-rllib`: old tuned examples become raytrain configs."""

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

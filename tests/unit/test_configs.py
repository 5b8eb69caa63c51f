"""Every file in configs/ validates, including RLlib's own validation of the built PPOConfig."""

from pathlib import Path

import pytest

from raytrain.config.load import load_config
from raytrain.rllib.translate import build_ppo_config

CONFIGS = sorted((Path(__file__).resolve().parents[2] / "configs").glob("*.yaml"))
TRAIN_CONFIGS = [p for p in CONFIGS if "environment:" in p.read_text()]
SWEEP_CONFIGS = [p for p in CONFIGS if "search:" in p.read_text()]
CLUSTER_CONFIGS = [p for p in CONFIGS if "\nhead:" in p.read_text()]
SLURM_CONFIGS = [p for p in CONFIGS if "\nnodes:" in p.read_text()]


def test_there_are_example_configs():
    names = {p.name for p in CONFIGS}
    assert {"ppo_cartpole.yaml", "ppo_pendulum.yaml", "ppo_legacy_names.yaml"} <= names


@pytest.mark.parametrize("path", TRAIN_CONFIGS, ids=lambda p: p.name)
def test_train_config_validates(path):
    loaded = load_config(path)
    assert not loaded.warnings, loaded.warnings
    build_ppo_config(loaded.config).validate()


def test_legacy_example_uses_old_names():
    loaded = load_config(Path(CONFIGS[0]).parent / "ppo_legacy_names.yaml")
    assert len(loaded.notices) >= 10


def test_old_name_notices_come_in_the_order_of_the_file():
    """They came by kind: the renamed section (line 9), then `framework` (line 8), then the section's own keys
    (lines 10-12) after training's (14-23)."""
    import re

    loaded = load_config(Path(CONFIGS[0]).parent / "ppo_legacy_names.yaml")
    lines = [int(re.match(r"notice: [^:]+:(\d+): ", n).group(1)) for n in loaded.notices]
    assert lines == sorted(lines) and len(lines) == len(set(lines)) >= 10, loaded.notices


def test_every_config_is_a_train_or_a_sweep_config():
    assert set(CONFIGS) == set(TRAIN_CONFIGS) | set(SWEEP_CONFIGS) | set(CLUSTER_CONFIGS) | set(SLURM_CONFIGS)
    assert {p.name for p in SWEEP_CONFIGS} >= {"ppo_pbt.yaml", "ppo_optuna.yaml"}


@pytest.mark.parametrize("path", SWEEP_CONFIGS, ids=lambda p: p.name)
def test_sweep_config_validates(path, tmp_path):
    from raytrain.config.sweep_load import load_sweep
    from raytrain.tune.build import plan

    loaded = load_sweep(path, [f"checkpoint.storage_path={tmp_path}"])
    assert not loaded.warnings, loaded.warnings
    plan(loaded)


@pytest.mark.parametrize("path", CLUSTER_CONFIGS, ids=lambda p: p.name)
def test_cluster_config_validates(path):
    from raytrain.config.cluster import load_cluster

    cfg = load_cluster(path)
    assert cfg.auth.mode == "token"


def test_config_validate_takes_every_shipped_file_and_writes_nothing(tmp_path, monkeypatch):
    """`raytrain config validate configs/*.yaml`: each file checked as its kind; no token, no results folder."""
    from typer.testing import CliRunner

    from raytrain.cli import app

    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))  # where a token (~/.raytrain) or a sweep's results would go
    result = CliRunner().invoke(app, ["config", "validate", *map(str, CONFIGS)])
    assert result.exit_code == 0, result.output
    kinds = {p: "cluster" if p in CLUSTER_CONFIGS else "slurm" if p in SLURM_CONFIGS else "sweep" if p in SWEEP_CONFIGS
             else "train" for p in CONFIGS}
    for path, kind in kinds.items():
        assert f"ok: {path} ({kind}: " in result.output
    assert "error" not in result.output
    assert list(home.iterdir()) == []


def test_whole_stop_thresholds_are_written_as_written():
    """Every stop threshold became a float: the run folder's config.yaml, `best.yaml` and `config show` (of a
    train config or a sweep) wrote `training_iteration: 3.0` and `raytrain/episode_return_mean_100: 450.0` for
    a file that says 3 and 450."""
    import yaml

    from raytrain.config.load import load_source
    from raytrain.config.source import Source
    from raytrain.config.sweep import SweepConfig

    stop = {"training_iteration": 3, "raytrain/episode_return_mean_100": 450, "time_total_s": 90.5}
    cfg = load_source(Source({"environment": {"env": "CartPole-v1"}, "stop": stop}, {}, "c.yaml")).config
    written = yaml.safe_dump(cfg.to_yaml_dict())
    assert "training_iteration: 3\n" in written and "raytrain/episode_return_mean_100: 450\n" in written
    assert "time_total_s: 90.5\n" in written
    assert yaml.safe_load(written)["stop"] == stop
    sweep = SweepConfig.model_validate({"base": "b.yaml", "stop": stop})
    assert yaml.safe_load(yaml.safe_dump(sweep.model_dump(mode="json")))["stop"] == stop
    assert "training_iteration: 3\n" in yaml.safe_dump(sweep.model_dump(mode="json"))

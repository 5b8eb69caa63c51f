"""YAML lines and --set overrides."""

import pytest

from raytrain.config.load import load_config
from raytrain.config.source import apply_overrides, parse_override, parse_yaml
from raytrain.errors import ConfigError


def test_lines_recorded_for_nested_keys():
    src = parse_yaml("a:\n  b:\n    c: 1\n  d: [1, 2]\n", "f.yaml")
    assert src.where(("a", "b", "c")) == "f.yaml:3"
    assert src.where(("a", "d", "1")) == "f.yaml:4"
    assert src.where(("a", "zzz")) == "f.yaml:1"


@pytest.mark.parametrize(
    "text,path,value",
    [
        ("training.lr=0.001", ("training", "lr"), 0.001),
        ("model.fcnet_hiddens=[32, 32]", ("model", "fcnet_hiddens"), [32, 32]),
        ("experiment.name=my run", ("experiment", "name"), "my run"),
        ("training.use_gae=false", ("training", "use_gae"), False),
        ("stop={training_iteration: 2}", ("stop",), {"training_iteration": 2}),
    ],
)
def test_parse_override(text, path, value):
    assert parse_override(text) == (path, value)


@pytest.mark.parametrize("text", ["training.lr", "=3", "a..b=1"])
def test_bad_override(text):
    with pytest.raises(ConfigError):
        parse_override(text)


def test_override_wins_and_is_reported(write_yaml):
    path = write_yaml("environment: {env: CartPole-v1}\ntraining: {lr: 0.01}\n")
    loaded = load_config(path, ["training.lr=0.0005", "training.gamma=0.9"])
    assert loaded.config.training.lr == 0.0005
    assert loaded.config.training.gamma == 0.9
    assert "override: training.lr = 0.0005 (was 0.01)" in loaded.notices
    assert "override: training.gamma = 0.9 (was unset)" in loaded.notices


def test_override_errors_name_the_flag(write_yaml):
    path = write_yaml("environment: {env: CartPole-v1}\n")
    with pytest.raises(ConfigError) as info:
        load_config(path, ["training.num_epochz=3"])
    assert str(info.value).startswith("--set training.num_epochz=3: training.num_epochz: unknown key; did you mean 'num_epochs'")


def test_override_through_old_name(write_yaml):
    loaded = load_config(write_yaml("environment: {env: CartPole-v1}\n"), ["training.num_sgd_iter=4"])
    assert loaded.config.training.num_epochs == 4


def test_override_into_a_scalar_is_an_error():
    src = parse_yaml("a: 1\n", "f.yaml")
    with pytest.raises(ConfigError) as info:
        apply_overrides(src, ["a.b=2"])
    assert "is not a section" in str(info.value)

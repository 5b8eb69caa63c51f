"""Old RLlib names work, each with a one-line notice naming the new key; meaningless ones are errors."""

import pytest

from raytrain.config.aliases import KEY_ALIASES, RLLIB_SPELLINGS
from raytrain.config.load import load_config
from raytrain.errors import ConfigError

CARTPOLE = "environment: {env: CartPole-v1}\n"


@pytest.mark.parametrize(
    "section,old,value,new_section,new_key,expected",
    [
        ("rollouts", "num_rollout_workers", 2, "env_runners", "num_env_runners", 2),
        ("env_runners", "num_workers", 3, "env_runners", "num_env_runners", 3),
        ("env_runners", "num_envs_per_worker", 4, "env_runners", "num_envs_per_env_runner", 4),
        ("training", "sgd_minibatch_size", 64, "training", "minibatch_size", 64),
        ("training", "num_sgd_iter", 7, "training", "num_epochs", 7),
        ("training", "shuffle_sequences", False, "training", "shuffle_batch_per_epoch", False),
        ("training", "lambda_", 0.9, "training", "lambda_", 0.9),
        ("resources", "num_learner_workers", 1, "learners", "num_learners", 1),
        ("resources", "num_cpus_per_worker", 2, "env_runners", "num_cpus_per_env_runner", 2),
        ("resources", "num_gpus_per_worker", 0.5, "env_runners", "num_gpus_per_env_runner", 0.5),
        ("resources", "custom_resources_per_worker", {"a": 1}, "env_runners", "custom_resources_per_env_runner", {"a": 1}),
        ("resources", "num_cpus_per_learner_worker", 2, "learners", "num_cpus_per_learner", 2),
        ("resources", "num_gpus_per_learner_worker", 1, "learners", "num_gpus_per_learner", 1),
        ("resources", "num_cpus_for_local_worker", 2, "resources", "num_cpus_for_main_process", 2),
        ("resources", "num_gpus", 1, "learners", "num_gpus_per_learner", 1),
    ],
)
def test_old_name_moves_with_notice(write_yaml, section, old, value, new_section, new_key, expected):
    import yaml

    text = CARTPOLE + yaml.safe_dump({section: {old: value}})
    loaded = load_config(write_yaml(text))
    assert getattr(getattr(loaded.config, new_section), new_key) == expected
    (notice,) = [n for n in loaded.notices if f".{old} " in n]
    yaml_key = "lambda" if new_key == "lambda_" else new_key
    # lambda_ is RLlib's current spelling, not an old name (issue 11): the notice says so.
    verb = "raytrain calls it" if old in RLLIB_SPELLINGS else "using"
    assert f"{verb} {new_section}.{yaml_key}" in notice
    assert ":" in notice.split(" ")[1]  # file:line


def test_old_names_at_top_level_like_flat_rllib_configs(write_yaml):
    loaded = load_config(write_yaml(CARTPOLE + "num_workers: 2\nnum_sgd_iter: 5\n"))
    assert loaded.config.env_runners.num_env_runners == 2
    assert loaded.config.training.num_epochs == 5


def test_schedules_become_piecewise(write_yaml):
    text = CARTPOLE + "training:\n  lr_schedule: [[0, 0.001], [1000, 0.0001]]\n  entropy_coeff_schedule: [[0, 0.01], [500, 0.0]]\n"
    cfg = load_config(write_yaml(text)).config
    assert cfg.training.lr.to_rllib() == [[0, 0.001], [1000, 0.0001]]
    assert cfg.training.entropy_coeff.to_rllib() == [[0, 0.01], [500, 0.0]]


def test_lr_schedule_replaces_lr_and_says_so(write_yaml):
    loaded = load_config(write_yaml(CARTPOLE + "training:\n  lr: 0.5\n  lr_schedule: [[0, 0.001], [1000, 0.0001]]\n"))
    assert loaded.config.training.lr.to_rllib()[0] == [0, 0.001]
    assert any("replaces training.lr: 0.5" in n for n in loaded.notices)


def test_model_inside_training(write_yaml):
    loaded = load_config(write_yaml(CARTPOLE + "training:\n  model:\n    fcnet_hiddens: [8, 8]\n"))
    assert loaded.config.model.fcnet_hiddens == [8, 8]
    assert any("training.model.fcnet_hiddens" in n and "model.fcnet_hiddens" in n for n in loaded.notices)


def test_old_and_new_name_both_set_is_an_error(write_yaml):
    path = write_yaml(CARTPOLE + "training:\n  num_epochs: 3\n  num_sgd_iter: 5\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert f"{path}:4: training.num_sgd_iter: is the old name of training.num_epochs, which is also set" in str(info.value)


def test_fake_gpus_is_an_error(write_yaml):
    path = write_yaml(CARTPOLE + "resources:\n  _fake_gpus: true\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert f"{path}:3: resources._fake_gpus:" in str(info.value) and "remove it" in str(info.value)


@pytest.mark.parametrize("framework", ["tf", "tf2"])
def test_tensorflow_is_an_error(write_yaml, framework):
    with pytest.raises(ConfigError) as info:
        load_config(write_yaml(CARTPOLE + f"framework: {framework}\n"))
    assert "PyTorch only" in str(info.value)


def test_framework_torch_is_accepted_with_notice(write_yaml):
    loaded = load_config(write_yaml(CARTPOLE + "framework: torch\n"))
    assert any("torch is the only framework" in n for n in loaded.notices)


@pytest.mark.parametrize(
    "old,new",
    [
        ("episode_reward_mean", "env_runners/episode_return_mean"),
        ("sampler_results/episode_reward_mean", "env_runners/episode_return_mean"),
        ("timesteps_total", "num_env_steps_sampled_lifetime"),
    ],
)
def test_legacy_stop_metrics(write_yaml, old, new):
    loaded = load_config(write_yaml(CARTPOLE + f"stop:\n  {old}: 100\n"))
    assert loaded.config.stop == {new: 100}
    assert any(f"stop.{new}" in n for n in loaded.notices)


def test_every_alias_targets_a_real_field():
    from raytrain.config.schema import section_keys

    for old, (section, new, _) in KEY_ALIASES.items():
        assert new in section_keys(section), f"{old} -> {section}.{new}"


# --- the table is true to RLlib: an "old name" is gone from today's PPOConfig, an RLlib spelling is current ---


@pytest.fixture(scope="module")
def rllib_status():
    """name -> "absent", "deprecated", "old API stack" or "current", read from the installed RLlib."""
    import inspect
    import re

    from ray.rllib.algorithms.algorithm_config import AlgorithmConfig
    from ray.rllib.algorithms.ppo import PPOConfig

    config = PPOConfig()
    init_source = inspect.getsource(AlgorithmConfig.__init__) + inspect.getsource(PPOConfig.__init__)

    def status(name: str) -> str:
        if name not in vars(config) and inspect.getattr_static(config, name, None) is None:
            return "absent"
        try:
            value = getattr(config, name)
        except ValueError as exc:  # RLlib's @Deprecated(error=True) properties
            assert "deprecated" in str(exc)
            return "deprecated"
        del value
        if re.search(rf"self\.{re.escape(name)} = DEPRECATED_VALUE", init_source):
            return "deprecated"
        if re.search(rf"self\.{re.escape(name)} = .*# @OldAPIStack", init_source):
            return "old API stack"
        return "current"

    return status


def test_every_old_name_is_gone_from_rllibs_ppo_config(rllib_status):
    old_names = [name for name in KEY_ALIASES if name not in RLLIB_SPELLINGS]
    assert {name: rllib_status(name) for name in old_names if rllib_status(name) == "current"} == {}
    # The test can tell: the names raytrain calls current are current in RLlib.
    assert {name: rllib_status(name) for name in RLLIB_SPELLINGS} == {name: "current" for name in RLLIB_SPELLINGS}


def test_rllib_spellings_are_the_fields_rllib_names_differently():
    """Read from the schema's field metadata; the expectation is written out here."""
    assert RLLIB_SPELLINGS == {
        "lambda_": ("training", "lambda", None),
        "train_batch_size_per_learner": ("training", "train_batch_size", None),
    }
    assert set(RLLIB_SPELLINGS) <= set(KEY_ALIASES)


def test_every_rllib_spelling_targets_a_raytrain_field():
    from raytrain.config.aliases import RLLIB_SPELLINGS
    from raytrain.config.schema import section_keys

    for name in RLLIB_SPELLINGS:
        section, new, _ = KEY_ALIASES[name]
        assert new in section_keys(section), f"{name} -> {section}.{new}"


def test_rllibs_current_name_is_not_called_old(write_yaml):
    path = write_yaml(CARTPOLE + "training:\n  train_batch_size_per_learner: 400\n")
    loaded = load_config(path)
    assert loaded.config.training.train_batch_size == 400
    (notice,) = loaded.notices
    assert notice == (
        f"notice: {path}:3: training.train_batch_size_per_learner is RLlib's name for this setting; raytrain calls it "
        "training.train_batch_size. Rename it to silence this."
    )
    assert "old" not in notice
    path = write_yaml(CARTPOLE + "training:\n  train_batch_size: 400\n  train_batch_size_per_learner: 400\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert "train_batch_size_per_learner: is RLlib's name of training.train_batch_size, which is also set" in str(info.value)


def test_an_old_name_in_an_override_of_a_key_the_file_sets_is_told_the_override_that_works(write_yaml):
    """`--set rollouts.num_rollout_workers=1` where the file sets env_runners.num_env_runners was told "keep only
    env_runners.num_env_runners", as if both were written in the file."""
    path = write_yaml("environment: {env: CartPole-v1}\nenv_runners: {num_env_runners: 2}\n")
    with pytest.raises(ConfigError) as info:
        load_config(path, ["rollouts.num_rollout_workers=1"])
    assert str(info.value) == ("--set rollouts.num_rollout_workers=1: env_runners.num_rollout_workers: is the old name "
                               f"of env_runners.num_env_runners, which {path}:2 sets; override it under its own name: "
                               "--set env_runners.num_env_runners=1")

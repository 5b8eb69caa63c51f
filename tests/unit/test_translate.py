"""No value in the YAML is ever dropped on the way to RLlib: every field, new names and old names."""

import json

import pytest

from raytrain.config.load import load_config
from raytrain.config.schema import SECTIONS
from raytrain.rllib.connectors import flat_mean_std_filter, flatten_observations, mean_std_filter
from raytrain.rllib.translate import build_ppo_config, rllib_calls

# raytrain field -> (PPOConfig attribute, expected value) for every field in all_fields.yaml.
# `model` fields are checked on config.model_config; experiment fields on the raytrain side.
EXPECTED = {
    "environment.env": ("env", "CartPole-v1"),
    "environment.env_config": ("env_config", {"max_episode_steps": 200}),
    "environment.clip_rewards": ("clip_rewards", 5.0),
    "environment.normalize_actions": ("normalize_actions", False),
    "environment.clip_actions": ("clip_actions", True),
    "env_runners.num_env_runners": ("num_env_runners", 3),
    "env_runners.num_envs_per_env_runner": ("num_envs_per_env_runner", 5),
    "env_runners.rollout_fragment_length": ("rollout_fragment_length", 40),
    "env_runners.batch_mode": ("batch_mode", "complete_episodes"),
    # Both env-to-module connectors, flattening first.
    "env_runners.observation_filter": ("_env_to_module_connector", flat_mean_std_filter),
    "env_runners.flatten_observations": ("_env_to_module_connector", flat_mean_std_filter),
    "env_runners.num_cpus_per_env_runner": ("num_cpus_per_env_runner", 2),
    "env_runners.num_gpus_per_env_runner": ("num_gpus_per_env_runner", 0.25),
    "env_runners.custom_resources_per_env_runner": ("custom_resources_per_env_runner", {"node_m8": 0.01}),
    "env_runners.explore": ("explore", False),
    "env_runners.sample_timeout_s": ("sample_timeout_s", 123.0),
    "training.lr": ("lr", [[0, 0.001], [50000, 0.0001]]),
    "training.gamma": ("gamma", 0.97),
    "training.lambda_": ("lambda_", 0.85),
    "training.clip_param": ("clip_param", 0.15),
    "training.vf_clip_param": ("vf_clip_param", 7.0),
    "training.vf_loss_coeff": ("vf_loss_coeff", 0.3),
    "training.entropy_coeff": ("entropy_coeff", [[0, 0.02], [10000, 0.005], [20000, 0.0]]),
    "training.use_critic": ("use_critic", True),
    "training.use_gae": ("use_gae", True),
    "training.use_kl_loss": ("use_kl_loss", False),
    "training.kl_coeff": ("kl_coeff", 0.4),
    "training.kl_target": ("kl_target", 0.02),
    "training.grad_clip": ("grad_clip", 0.7),
    "training.grad_clip_by": ("grad_clip_by", "norm"),
    "training.train_batch_size": ("train_batch_size_per_learner", 1200),
    "training.minibatch_size": ("minibatch_size", 200),
    "training.num_epochs": ("num_epochs", 9),
    "training.shuffle_batch_per_epoch": ("shuffle_batch_per_epoch", False),
    "learners.num_learners": ("num_learners", 2),
    "learners.num_cpus_per_learner": ("num_cpus_per_learner", 3),
    "learners.num_gpus_per_learner": ("num_gpus_per_learner", 0.5),
    "learners.local_gpu_idx": ("local_gpu_idx", 1),
    "learners.custom_resources_per_learner": ("custom_resources_per_learner", {"learner_slot": 1}),
    "resources.num_cpus_for_main_process": ("num_cpus_for_main_process", 2),
    "resources.placement_strategy": ("placement_strategy", "SPREAD"),
    "evaluation.evaluation_interval": ("evaluation_interval", 4),
    "evaluation.evaluation_duration": ("evaluation_duration", 6),
    "evaluation.evaluation_duration_unit": ("evaluation_duration_unit", "timesteps"),
    "evaluation.evaluation_num_env_runners": ("evaluation_num_env_runners", 2),
    "evaluation.evaluation_parallel_to_training": ("evaluation_parallel_to_training", True),
    "evaluation.evaluation_explore": ("evaluation_config", {"explore": False}),
    "experiment.seed": ("seed", 7),
    "experiment.return_window": ("metrics_num_episodes_for_smoothing", 50),
}

MODEL_EXPECTED = {
    "fcnet_hiddens": [48, 24],
    "fcnet_activation": "relu",
    "fcnet_kernel_initializer": "orthogonal_",
    "fcnet_kernel_initializer_kwargs": {"gain": 1.4},
    "fcnet_bias_initializer": "constant_",
    "fcnet_bias_initializer_kwargs": {"val": 0.1},
    "fcnet_use_layernorm": True,
    "conv_filters": [[16, 4, 2], [32, [3, 3], 1]],
    "conv_activation": "elu",
    "conv_kernel_initializer": "xavier_uniform_",
    "conv_kernel_initializer_kwargs": {"gain": 0.5},
    "conv_bias_initializer": "zeros_",
    "conv_bias_initializer_kwargs": {},
    "head_fcnet_hiddens": [16],
    "head_fcnet_activation": "tanh",
    "head_fcnet_kernel_initializer": "xavier_normal_",
    "head_fcnet_kernel_initializer_kwargs": {"gain": 0.3},
    "head_fcnet_bias_initializer": "ones_",
    "head_fcnet_bias_initializer_kwargs": {},
    "head_fcnet_use_layernorm": True,
    "free_log_std": True,
    "log_std_clip_param": 5.0,
    "vf_share_layers": False,
    "use_lstm": True,
    "max_seq_len": 15,
    "lstm_cell_size": 64,
    "lstm_use_prev_action": True,
    "lstm_use_prev_reward": True,
    "lstm_kernel_initializer": "orthogonal_",
    "lstm_kernel_initializer_kwargs": {"gain": 2.0},
    "lstm_bias_initializer": "zeros_",
    "lstm_bias_initializer_kwargs": {},
    "fusionnet_hiddens": [12],
    "fusionnet_activation": "swish",
    "fusionnet_kernel_initializer": "kaiming_uniform_",
    "fusionnet_kernel_initializer_kwargs": {"a": 0.1},
    "fusionnet_bias_initializer": "constant_",
    "fusionnet_bias_initializer_kwargs": {"val": 0.2},
}

EXPERIMENT_EXPECTED = {
    "name": "all_fields",
    "storage_path": "/tmp/raytrain_all_fields",
    "checkpoint_frequency": 3,
    "num_to_keep": 4,
    "checkpoint_at_end": False,
}

STOP_EXPECTED = {
    "raytrain/episode_return_mean_50": 190,
    "num_env_steps_sampled_lifetime": 100000,
    "training_iteration": 77,
    "time_total_s": 600,
}


def _listify(value):
    return json.loads(json.dumps(value))


def test_expectations_cover_every_schema_field():
    """Adding a schema field without checking it here must fail."""
    covered = set(EXPECTED) | {f"model.{k}" for k in MODEL_EXPECTED} | {f"experiment.{k}" for k in EXPERIMENT_EXPECTED}
    for section, model in SECTIONS.items():
        for name in model.model_fields:
            assert f"{section}.{name}" in covered, f"{section}.{name} is not checked by the no-drop test"


@pytest.mark.parametrize("filename", ["all_fields.yaml", "all_fields_aliases.yaml"])
def test_every_value_reaches_ppo_config(data_dir, filename):
    loaded = load_config(data_dir / filename)
    cfg = loaded.config
    ppo = build_ppo_config(cfg)
    for field, (attr, expected) in EXPECTED.items():
        actual = getattr(ppo, attr)
        if callable(expected):
            assert actual is expected, field
        else:
            assert _listify(actual) == _listify(expected), f"{field} -> PPOConfig.{attr}: {actual!r} != {expected!r}"
    model = ppo.model_config
    for key, expected in MODEL_EXPECTED.items():
        assert _listify(model[key]) == _listify(expected), f"model.{key}: {model[key]!r} != {expected!r}"
    for key, expected in EXPERIMENT_EXPECTED.items():
        assert getattr(cfg.experiment, key) == expected, f"experiment.{key}"
    assert cfg.stop == STOP_EXPECTED


def test_alias_file_gives_the_same_config_as_new_names(data_dir):
    new = load_config(data_dir / "all_fields.yaml")
    old = load_config(data_dir / "all_fields_aliases.yaml")
    # The lr schedule is written linear in one and piecewise in the other: same RLlib value.
    assert old.config.experiment == new.config.experiment
    assert old.config.stop == new.config.stop
    assert rllib_calls(old.config) == rllib_calls(new.config)
    assert not new.notices
    # One notice per old name used, each naming the new key.
    assert len(old.notices) >= 20
    assert any("training.num_sgd_iter" in n and "training.num_epochs" in n for n in old.notices)


def test_golden_rllib_calls(data_dir):
    """YAML in, exact RLlib builder calls out."""
    loaded = load_config(data_dir / "golden_cartpole.yaml")
    expected = json.loads((data_dir / "golden_cartpole.json").read_text())
    assert _listify(rllib_calls(loaded.config)) == expected


def test_unset_fields_are_left_to_rllib(write_yaml):
    cfg = load_config(write_yaml("environment: {env: CartPole-v1}\n")).config
    calls = rllib_calls(cfg)
    assert calls["training"] == {}
    assert calls["env_runners"] == {}
    assert calls["rl_module"] == {"model_config": {}}
    ppo = build_ppo_config(cfg)
    from ray.rllib.algorithms.ppo import PPOConfig

    defaults = PPOConfig()
    assert ppo.lr == defaults.lr
    assert ppo.num_epochs == defaults.num_epochs


def test_every_rllib_name_the_schema_gives_is_a_keyword_rllib_takes():
    """A field's RLlib name (its Python name, or its `RLlib(name=...)` marker) is a parameter of the builder
    call it goes to, or a field of DefaultModelConfig: a misspelt marker fails here, not in a run."""
    import dataclasses
    import inspect

    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.rl_module.default_model_config import DefaultModelConfig

    from raytrain.config.schema import rllib_fields

    model_fields = {f.name for f in dataclasses.fields(DefaultModelConfig)}

    def parameters(call: str) -> set[str]:
        # PPOConfig.training passes **kwargs on to AlgorithmConfig.training: collect both.
        return {p for cls in PPOConfig.__mro__ if call in vars(cls) for p in inspect.signature(vars(cls)[call]).parameters}

    wrong = [
        f"{f.section}.{f.name} -> {f.call}({f.within or f.keyword})"
        for f in rllib_fields()
        if (f.keyword not in model_fields if f.within == "model_config" else f.keyword not in parameters(f.call))
    ]
    assert wrong == []
    fields = {f"{f.section}.{f.name}" for f in rllib_fields()}
    assert {"experiment.seed", "experiment.return_window", "training.lambda_", "model.fcnet_hiddens"} <= fields
    assert not {"experiment.name", "experiment.storage_path", "experiment.checkpoint_frequency"} & fields


def test_env_import_path_is_imported_when_built(write_yaml):
    from gymnasium.envs.classic_control.cartpole import CartPoleEnv

    path = "gymnasium.envs.classic_control.cartpole:CartPoleEnv"
    cfg = load_config(write_yaml(f"environment: {{env: '{path}'}}\n")).config
    assert rllib_calls(cfg)["environment"] == {"env": path, "env_config": {}}
    assert build_ppo_config(cfg).env is CartPoleEnv


@pytest.mark.parametrize(("env_runners", "connector"), [
    ("{flatten_observations: true}", flatten_observations),
    ("{flatten_observations: true, observation_filter: NoFilter}", flatten_observations),
    ("{flatten_observations: false, observation_filter: MeanStdFilter}", mean_std_filter),
    ("{observation_filter: MeanStdFilter}", mean_std_filter),
    ("{flatten_observations: false}", None),
])
def test_flatten_observations_and_the_filter_make_one_connector_list(write_yaml, env_runners, connector):
    cfg = load_config(write_yaml(f"environment: {{env: CartPole-v1}}\nenv_runners: {env_runners}\n")).config
    assert build_ppo_config(cfg)._env_to_module_connector is connector


def test_flattened_filtered_observations_are_one_hot_then_normalized():
    import gymnasium as gym

    pieces = flat_mean_std_filter()
    assert [type(p).__name__ for p in pieces] == ["FlattenObservations", "MeanStdFilter"]
    pieces[0].input_observation_space, pieces[0].input_action_space = gym.spaces.Discrete(5), gym.spaces.Discrete(2)
    assert pieces[0].observation_space.shape == (5,)


def test_observation_filter_no_filter_is_left_to_rllib(write_yaml):
    cfg = load_config(write_yaml("environment: {env: CartPole-v1}\nenv_runners: {observation_filter: NoFilter}\n")).config
    assert rllib_calls(cfg)["env_runners"] == {}


@pytest.mark.parametrize("explore", [False, True])
def test_evaluation_explore_reaches_rllibs_evaluation_config(write_yaml, explore):
    """Greedy evaluation, RLlib's `evaluation_config={"explore": False}`: an RLlib user's evaluation_config was
    refused as an unknown key with "did you mean 'evaluation_duration'?"."""
    text = f"environment: {{env: CartPole-v1}}\nevaluation: {{evaluation_interval: 1, evaluation_explore: {str(explore).lower()}}}\n"
    cfg = load_config(write_yaml(text)).config
    assert rllib_calls(cfg)["evaluation"] == {"evaluation_interval": 1, "evaluation_config": {"explore": explore}}
    ppo = build_ppo_config(cfg)
    ppo.validate()
    assert ppo.get_evaluation_config_object().explore is explore and ppo.explore is True

"""Every bad input: file:line, dotted path, what is wrong, what to do."""

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from raytrain.config.load import load_config
from raytrain.errors import ConfigError

from .ray_starts import refuse_ray_starts


def errors_of(path, overrides=None) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_config(path, overrides or [])
    return [str(i) for i in info.value.issues]


def test_unknown_key_names_line_path_and_nearest(write_yaml):
    path = write_yaml("environment:\n  env: CartPole-v1\ntraining:\n  gamma: 0.9\n  minibatch_sise: 64\n")
    (msg,) = errors_of(path)
    assert msg == f"{path}:5: training.minibatch_sise: unknown key; did you mean 'minibatch_size'?"


def test_key_in_wrong_section_says_where_it_belongs(write_yaml):
    path = write_yaml("environment:\n  env: CartPole-v1\ntraining:\n  num_env_runners: 2\n")
    (msg,) = errors_of(path)
    assert "training.num_env_runners" in msg and "belongs in the 'env_runners' section" in msg
    assert msg.startswith(f"{path}:4:")


def test_unknown_section(write_yaml):
    path = write_yaml("environment: {env: CartPole-v1}\ntrainig:\n  lr: 0.1\n")
    (msg,) = errors_of(path)
    assert msg.startswith(f"{path}:2: trainig: unknown section; did you mean 'training'?")


@pytest.mark.parametrize(
    ("override", "path"),
    [("trainig.lr=0.1", "trainig"), ("env.id.x=1", "env"), ("training.lr_sched.start=1", "training.lr_sched")],
)
def test_an_unknown_section_or_key_made_by_set_is_blamed_on_the_flag_not_the_file(write_yaml, override, path):
    """`--set env.id=x` was reported at the file (`cfg.yaml: env: unknown section`), which has no `env`: the
    override made the section, and only its last key had an origin."""
    file = write_yaml("environment: {env: CartPole-v1}\ntraining:\n  lr: 0.1\n")
    (msg,) = errors_of(file, [override])
    assert msg.startswith(f"--set {override}: {path}: unknown ")


def test_wrong_type_and_range(write_yaml):
    path = write_yaml("environment: {env: CartPole-v1}\ntraining:\n  gamma: 1.5\n  num_epochs: many\n")
    msgs = errors_of(path)
    assert any(m.startswith(f"{path}:3: training.gamma:") and "1.5" in m for m in msgs)
    assert any(m.startswith(f"{path}:4: training.num_epochs:") and "many" in m for m in msgs)


def test_all_problems_reported_at_once(write_yaml):
    path = write_yaml("environment: {env: CartPole-v1}\ntraining: {lr: x, gama: 1}\nmodel: {fcnet_hidden: [3]}\n")
    assert len(errors_of(path)) == 3


def test_problems_are_reported_in_the_order_of_their_lines(write_yaml):
    """They came in the schema's order of sections: a config's line 5 before its line 4, line 7 before 6."""
    path = write_yaml(
        "experiment: {name: x, seed: -5}\nenvironment: {env: CartPole-v1}\n\ntraining: {lr: -1, gamma: 2}\n"
        "env_runners: {num_env_runners: -1}\nbogus_section: 1\nmodel: {fcnet_hiddens: [0]}\n"
    )
    lines = [int(m.removeprefix(f"{path}:").split(":")[0]) for m in errors_of(path)]
    assert lines == [1, 4, 4, 5, 6, 7]


@pytest.mark.parametrize(
    "text,expected",
    [
        ("experiment: {storage_path: relative}\n", "experiment.storage_path: must be an absolute path (or start with ~), got 'relative'"),
        ("training: {lr: {schedule: piecewise, points: [[0, 0.001], [5, 0.0005], [3, 0.0001]]}}\n",
         "training.lr.points: timesteps must increase strictly, got [0, 5, 3]"),
    ],
)
def test_what_a_check_found_is_shown_once(write_yaml, text, expected):
    """It was shown twice: "..., got 'relative' (got 'relative')"."""
    (msg,) = errors_of(write_yaml("environment: {env: CartPole-v1}\n" + text))
    assert msg.endswith(expected), msg


def test_missing_environment(write_yaml):
    (msg,) = errors_of(write_yaml("training: {lr: 0.001}\n"))
    assert "environment: is required" in msg and "CartPole-v1" in msg


def test_unknown_env_names_nearest_registered_ids(write_yaml):
    path = write_yaml("environment:\n  env: CartPol-v1\n")
    (msg,) = errors_of(path)
    assert msg.startswith(f"{path}:2: environment.env:")
    assert "'CartPole-v1'" in msg


def test_custom_env_import_path_checked(write_yaml):
    (msg,) = errors_of(write_yaml("environment: {env: 'no_such_pkg.envs:MyEnv'}\n"))
    assert "cannot import module 'no_such_pkg.envs'" in msg
    (msg,) = errors_of(write_yaml("environment: {env: 'gymnasium.envs.classic_control:NoSuchEnv'}\n"))
    assert "has no attribute 'NoSuchEnv'" in msg


@pytest.mark.parametrize(("source", "shown"), [
    ("import gymnasium\nclass Walk(gymnasium.Env):\n    def __init__(self):\n        pass\n", "Walk() cannot be called as Walk(env_config)"),
    ("import gymnasium\nclass Walk(gymnasium.Env):\n    def __init__(self, size, render_mode):\n        pass\n",
     "Walk(size, render_mode) cannot be called as Walk(env_config)"),
])
def test_an_env_that_cannot_take_rllibs_env_config_is_refused_before_ray(write_yaml, tmp_path, monkeypatch, source, shown):
    """RLlib makes the env as Class(env_config) in every env runner; one that takes no such argument failed
    there, after Ray started, with a traceback per env runner and an IndexError."""
    name = f"walk_envs_{abs(hash(source))}"
    (tmp_path / f"{name}.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    path = write_yaml(f"environment:\n  env: '{name}:Walk'\n")
    (msg,) = errors_of(path)
    assert msg.startswith(f"{path}:2: environment.env: {shown}, which is how RLlib creates the env in every env runner: ")
    assert "one parameter for it, the others with defaults (e.g. `config=None`" in msg


def test_an_env_config_key_a_registered_env_does_not_take_is_refused_at_its_line(write_yaml, tmp_path, monkeypatch):
    """RLlib makes a registered env as gymnasium.make(id, **env_config): a misspelt key (`sutton_barto` for
    `sutton_barto_reward`) passed every check, then every env runner failed with a TypeError once Ray had
    started (~170 lines, exit 1)."""
    path = write_yaml("environment:\n  env: CartPole-v1\n  env_config:\n    render_mode: rgb_array\n"
                      "    sutton_barto: true\n    max_episode_steps: 100\n")
    (msg,) = errors_of(path)
    assert msg == (f"{path}:5: environment.env_config.sutton_barto: CartPole-v1 takes no keyword 'sutton_barto' "
                   "(gymnasium.make('CartPole-v1', sutton_barto=...) would fail in every env runner); did you mean "
                   "'sutton_barto_reward'? It takes: sutton_barto_reward, render_mode, and gymnasium.make's "
                   "max_episode_steps, disable_env_checker")
    assert load_config(write_yaml("environment:\n  env: CartPole-v1\n  env_config: {sutton_barto_reward: true, "
                                  "max_episode_steps: 100}\n", "ok.yaml")).config.environment.env_config
    # An id another package registers ('module:EnvId') is checked the same way; one whose constructor takes
    # **kwargs, or a custom class (it gets env_config as one dict), is not.
    (tmp_path / "reg_walks.py").write_text(
        "import gymnasium\nclass Walk(gymnasium.Env):\n    def __init__(self, size=3):\n        pass\n"
        "class Open(gymnasium.Env):\n    def __init__(self, **kwargs):\n        pass\n"
        "gymnasium.register('RegWalk-v0', entry_point=Walk)\ngymnasium.register('RegOpen-v0', entry_point=Open)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    (msg,) = errors_of(write_yaml("environment: {env: 'reg_walks:RegWalk-v0', env_config: {colour: red}}\n", "w.yaml"))
    assert msg.endswith("w.yaml:1: environment.env_config.colour: reg_walks:RegWalk-v0 takes no keyword 'colour' "
                        "(gymnasium.make('RegWalk-v0', colour=...) would fail in every env runner). It takes: size, and "
                        "gymnasium.make's max_episode_steps, disable_env_checker")
    load_config(write_yaml("environment: {env: 'reg_walks:RegOpen-v0', env_config: {colour: red}}\n", "o.yaml"))


@pytest.mark.parametrize("source", ["def walk(config=None):\n    return None\n", "def walk():\n    return None\n",
                                    "class _W:\n    def __call__(self, config=None):\n        return None\nwalk = _W()\n"])
def test_an_env_factory_that_is_no_class_is_refused_before_ray(write_yaml, tmp_path, monkeypatch, source):
    """RLlib makes a custom env from a class only: `env: 'walk_envs:walk'` (a function) passed the checks and
    RLlib refused it once Ray had started ("is an invalid env specifier"), exit 1."""
    name = f"walk_factories_{abs(hash(source))}"
    (tmp_path / f"{name}.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path))
    path = write_yaml(f"environment:\n  env: '{name}:walk'\n")
    (msg,) = errors_of(path)
    what = "a function" if source.startswith("def") else "a _W object"
    assert msg == (f"{path}:2: environment.env: {name}:walk is {what}, not a class: RLlib makes a custom env from a "
                   "class only (a function it refuses once Ray has started). Name a class, e.g. one that wraps what walk "
                   "makes: `class WalkEnv(gymnasium.Wrapper):` with `def __init__(self, config=None): super().__init__(walk(config))`")


@pytest.mark.parametrize("env, said", [
    ("os:system", "os:system is a built-in function, not a gymnasium.Env class: name the env's class"),
    ("collections:OrderedDict", "collections:OrderedDict is a class that is not a gymnasium.Env"),
])
def test_an_env_import_path_to_something_that_is_no_env_is_an_error(write_yaml, env, said):
    """Found at check time, not in every env runner after Ray has started."""
    path = write_yaml(f"environment:\n  env: '{env}'\n")
    (msg,) = errors_of(path)
    assert msg.startswith(f"{path}:2: environment.env: {said}")


@pytest.mark.parametrize("written, shown", [("2024", "a number (2024)"), ("yes", "true/false (True)"), ("1.5", "a number (1.5)")])
def test_a_text_field_given_what_yaml_reads_as_a_number_says_to_quote_what_was_written(write_yaml, written, shown):
    path = write_yaml(f"experiment:\n  name: {written}\nenvironment: {{env: CartPole-v1}}\n")
    (msg,) = errors_of(path)
    assert msg == f"{path}:2: experiment.name: must be text, but YAML reads {written} as {shown}: put it in quotes: '{written}'"
    load_config(write_yaml(f"experiment:\n  name: '{written}'\nenvironment: {{env: CartPole-v1}}\n", "ok.yaml"))


def test_a_slurm_time_written_without_quotes_shows_what_yaml_made_of_it(write_yaml):
    """`4:00:00` is 14400 to YAML 1.1 (base 60), which said only `YAML reads the value as a number (14400)`."""
    from raytrain.config.slurm import load_slurm

    path = write_yaml("nodes: 2\ncpus_per_node: 4\nstorage_path: /shared/r\ntime_limit: 4:00:00\n", "slurm.yaml")
    with pytest.raises(ConfigError) as info:
        load_slurm(path)
    assert [str(i) for i in info.value.issues] == [
        f"{path}:4: time_limit: must be text, but YAML reads 4:00:00 as a number (14400): put it in quotes: '4:00:00'"]
    assert load_slurm(write_yaml("nodes: 2\ncpus_per_node: 4\nstorage_path: /shared/r\ntime_limit: '4:00:00'\n")).time_limit == "4:00:00"


def test_a_text_value_given_by_set_that_yaml_reads_as_a_number_shows_what_was_written(write_yaml):
    path = write_yaml("environment: {env: CartPole-v1}\n")
    assert errors_of(path, ["experiment.name=off"]) == [
        "--set experiment.name=off: experiment.name: must be text, but YAML reads off as true/false (False): put it in quotes: 'off'"]


def test_custom_env_class_accepted(write_yaml):
    cfg = load_config(write_yaml("environment: {env: 'gymnasium.envs.classic_control:CartPoleEnv'}\n")).config
    assert cfg.experiment.name == "ppo_CartPoleEnv"


def test_stop_metric_never_reported_is_an_error(write_yaml):
    path = write_yaml("environment: {env: CartPole-v1}\nstop:\n  env_runners/episode_return_meen: 450\n")
    (msg,) = errors_of(path)
    assert msg.startswith(f"{path}:3: stop.env_runners/episode_return_meen:")
    assert "never reports" in msg and "did you mean 'env_runners/episode_return_mean'" in msg


@pytest.mark.parametrize("key, value", [
    ("training_iteration", 0), ("time_total_s", -5), ("num_env_steps_sampled_lifetime", 0),
    ("raytrain/episodes_total", -1),
])
def test_a_counter_stop_threshold_that_every_run_passes_at_once_is_an_error(write_yaml, key, value):
    """A counter starts at 0 and only grows: a threshold <= 0 stops after the first iteration whatever it
    reached, which no one means (a return's threshold may be anything: Pendulum's is negative)."""
    path = write_yaml(f"environment: {{env: CartPole-v1}}\nstop:\n  {key}: {value}\n")
    (msg,) = errors_of(path)
    assert msg.startswith(f"{path}:3: stop.{key}: {value} is passed by the first iteration")
    assert "give a threshold > 0" in msg
    load_config(write_yaml("environment: {env: Pendulum-v1}\nstop: {env_runners/episode_return_mean: -300}\n", "ok.yaml"))


def test_evaluation_metric_needs_evaluation(write_yaml):
    (msg,) = errors_of(write_yaml("environment: {env: CartPole-v1}\nstop: {evaluation/env_runners/episode_return_mean: 1}\n"))
    assert "evaluation.evaluation_interval" in msg
    ok = "environment: {env: CartPole-v1}\nevaluation: {evaluation_interval: 2}\nstop: {evaluation/env_runners/episode_return_mean: 1}\n"
    load_config(write_yaml(ok, "ok.yaml"))


def test_running_mean_metric_follows_window(write_yaml):
    (msg,) = errors_of(write_yaml("environment: {env: CartPole-v1}\nexperiment: {return_window: 20}\nstop: {raytrain/episode_return_mean_100: 1}\n"))
    assert "raytrain/episode_return_mean_20" in msg


def test_minibatch_larger_than_batch_is_an_error(write_yaml):
    path = write_yaml("environment: {env: CartPole-v1}\ntraining:\n  train_batch_size: 256\n  minibatch_size: 512\n")
    (msg,) = errors_of(path)
    assert msg.startswith(f"{path}:4: training.minibatch_size: 512 is larger than training.train_batch_size 256")


def test_fragment_larger_than_batch_is_an_error(write_yaml):
    text = "environment: {env: CartPole-v1}\nenv_runners: {num_env_runners: 2, rollout_fragment_length: 200}\ntraining: {train_batch_size: 256}\n"
    (msg,) = errors_of(write_yaml(text))
    assert "env_runners.rollout_fragment_length" in msg and "400" in msg


def test_suspicious_settings_warn_with_numbers(write_yaml):
    path = write_yaml("environment: {env: CartPole-v1}\ntraining:\n  train_batch_size: 1000\n  minibatch_size: 128\n  lr: 0.05\n")
    loaded = load_config(path)
    text = "\n".join(loaded.warnings)
    assert f"{path}:4: training.minibatch_size: 128 does not divide train_batch_size 1000" in text
    assert "such as 125" in text
    assert f"{path}:5: training.lr: 0.05 is unusually high" in text


def test_relative_storage_path_is_an_error(write_yaml):
    (msg,) = errors_of(write_yaml("environment: {env: CartPole-v1}\nexperiment: {storage_path: results}\n"))
    assert "experiment.storage_path" in msg and "absolute" in msg


def test_storage_path_expands_home(write_yaml, monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path))
    cfg = load_config(write_yaml("environment: {env: CartPole-v1}\n")).config
    assert cfg.experiment.storage_path == f"{tmp_path}/raytrain_results"


def test_schedule_errors(write_yaml):
    (msg,) = errors_of(write_yaml("environment: {env: CartPole-v1}\ntraining:\n  lr: {schedule: linear, start: 0.1, end: 0}\n"))
    assert msg.endswith("training.lr.timesteps: is required")
    (msg,) = errors_of(write_yaml("environment: {env: CartPole-v1}\ntraining:\n  lr: {schedule: cosine}\n"))
    assert "schedule: linear" in msg and "piecewise" in msg
    (msg,) = errors_of(write_yaml("environment: {env: CartPole-v1}\ntraining:\n  lr: {schedule: piecewise, points: [[5, 0.1]]}\n"))
    assert "timestep 0" in msg


def test_invalid_yaml_names_the_line(write_yaml):
    path = write_yaml("environment:\n  env: CartPole-v1\ntraining:\n  lr: [0.1\n")
    (msg,) = errors_of(path)
    assert msg.startswith(f"{path}:") and "invalid YAML" in msg


def test_not_a_mapping(write_yaml):
    (msg,) = errors_of(write_yaml("- a\n- b\n"))
    assert "mapping of sections" in msg


def test_missing_file(tmp_path):
    (msg,) = errors_of(tmp_path / "nope.yaml")
    assert msg == f"{tmp_path / 'nope.yaml'}: no such file"


def test_a_misspelt_file_names_the_file_meant(tmp_path):
    (tmp_path / "ppo_cartpole.yaml").write_text("environment: {env: CartPole-v1}\n")
    (msg,) = errors_of(tmp_path / "ppo_cartpol.yaml")
    assert msg == f"{tmp_path / 'ppo_cartpol.yaml'}: no such file; did you mean {tmp_path / 'ppo_cartpole.yaml'}?"


def test_a_folder_or_a_device_given_as_the_file_says_what_it_is(tmp_path):
    """Both said `no such file`, of a folder or /dev/null that exists."""
    for name in ("b.yaml", "a.yaml", "c.yml", "d.yaml", "notes.txt"):
        (tmp_path / name).write_text("x: 1\n")
    (msg,) = errors_of(tmp_path)
    assert msg == f"{tmp_path}: is a folder: give one of its YAML files (a.yaml, b.yaml, c.yml, ...)"
    empty = tmp_path / "empty"
    empty.mkdir()
    (msg,) = errors_of(empty)
    assert msg == f"{empty}: is a folder, and holds no YAML file: give a YAML file"
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text("x: 1\n")
    (run / "run.json").write_text("{}")
    (msg,) = errors_of(run)
    assert msg == f"{run}: is a folder: give one of its YAML files (config.yaml)"
    (msg,) = errors_of(Path("/dev/null"))
    assert msg == "/dev/null: is not a regular file: give a YAML file"


def test_main_process_cpus_alone_warns_that_rllib_ignores_them(write_yaml):
    path = write_yaml("environment: {env: CartPole-v1}\nresources:\n  num_cpus_for_main_process: 0.5\n")
    (warning,) = load_config(path).warnings
    assert warning.startswith(f"warning: {path}:3: resources.num_cpus_for_main_process: 0.5 has no effect")
    assert "learners.num_cpus_per_learner: 0.5" in warning
    fixed = write_yaml("environment: {env: CartPole-v1}\nresources: {num_cpus_for_main_process: 0.5}\nlearners: {num_cpus_per_learner: 0.5}\n", "ok.yaml")
    assert not load_config(fixed).warnings


def test_evaluation_settings_without_an_interval_warn_that_nothing_evaluates(write_yaml):
    """`evaluation: {evaluation_duration: 5}` ran no evaluation, silently: RLlib evaluates only with an interval,
    and the warning RLlib logs for idle evaluation runners went to ray.log, while they reserved a CPU each."""
    path = write_yaml("environment: {env: CartPole-v1}\nevaluation:\n  evaluation_num_env_runners: 1\n"
                      "  evaluation_duration: 5\n")
    (warning,) = load_config(path).warnings
    assert warning == (
        f"warning: {path}:3: evaluation.evaluation_num_env_runners: no evaluation runs without "
        "evaluation.evaluation_interval, so this does nothing (nor does evaluation_duration); its evaluation env "
        "runners would reserve CPUs and never run; set evaluation_interval: N to evaluate every N iterations")
    fixed = write_yaml("environment: {env: CartPole-v1}\nevaluation: {evaluation_interval: 2, evaluation_duration: 5}\n",
                       "ok.yaml")
    assert not load_config(fixed).warnings


HOSTILE_YAML = {
    "duplicate_section": (b"environment: {env: CartPole-v1}\ntraining: {lr: 0.001}\ntraining: {gamma: 0.9}\n", 3, "duplicate key"),
    "alias_bomb": (None, 5, "expands to 66,430 YAML nodes"),
    "undecodable": (b"environment: {env: CartPole-v1}\nexperiment: {name: \xff}\n", 2, "is not UTF-8"),
    "nul": (b"environment: {env: CartPole-v1}\n\x00\n", 2, "NUL byte"),
    "nested_20000": (b"environment: {env: CartPole-v1}\nstop: " + b"[" * 20_000 + b"]" * 20_000 + b"\n", 2, "nested more than"),
    # A tab where YAML wants spaces: PyYAML says only that '\t' "cannot start any token".
    "tab_indent": (b"environment:\n\tenv: CartPole-v1\n", 2, "YAML indents with spaces only; replace the tab with spaces"),
    # Line 100: rich once printed `:100:` as an emoji.
    "nested_block": (b"".join(b"  " * i + b"k%d:\n" % i for i in range(120)) + b"  " * 120 + b"v\n", 100, "nested more than"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE_YAML))
def test_hostile_yaml_exits_2_at_validate_with_file_and_line(name, tmp_path, data_dir):
    from typer.testing import CliRunner

    from raytrain.cli import app

    content, line, expected = HOSTILE_YAML[name]
    path = tmp_path / f"{name}.yaml"
    path.write_bytes(content if content is not None else (data_dir / "alias_bomb.yaml").read_bytes())
    result = CliRunner().invoke(app, ["config", "validate", str(path)])
    assert result.exit_code == 2, result.output
    assert f"error: {path}:{line}: " in result.output and expected in result.output
    assert "Traceback" not in result.output


# --- values: every float finite, real lower bounds --------------------------------------------------------


@pytest.mark.parametrize("value", [".nan", ".inf", "-.inf", "-1", "0"])
def test_bad_learning_rate_exits_2_at_validate(value, write_yaml):
    # A NaN or negative lr used to pass, crash training at iteration 2 and leave a NaN checkpoint.
    from typer.testing import CliRunner

    from raytrain.cli import app

    path = write_yaml(f"environment: {{env: CartPole-v1}}\ntraining:\n  gamma: 0.99\n  lr: {value}\n")
    result = CliRunner().invoke(app, ["config", "validate", str(path)])
    assert result.exit_code == 2, result.output
    assert f"error: {path}:4: training.lr: Input should be " in result.output
    assert ("finite" in result.output) == ("inf" in value or "nan" in value)


@pytest.mark.parametrize(
    "yaml_text,path,expected",
    [
        ("training: {gamma: 0}", "training.gamma", "greater than 0"),
        ("training: {gamma: 1.01}", "training.gamma", "less than or equal to 1"),
        ("training: {lambda: -0.1}", "training.lambda", "greater than or equal to 0"),
        ("training: {clip_param: 0}", "training.clip_param", "greater than 0"),
        ("training: {vf_clip_param: .inf}", "training.vf_clip_param", "finite"),
        ("training: {vf_loss_coeff: -1}", "training.vf_loss_coeff", "greater than or equal to 0"),
        ("training: {entropy_coeff: -0.01}", "training.entropy_coeff", "greater than or equal to 0"),
        ("training: {entropy_coeff: .nan}", "training.entropy_coeff", "finite"),
        ("training: {kl_coeff: -0.2}", "training.kl_coeff", "greater than or equal to 0"),
        ("training: {kl_target: 0}", "training.kl_target", "greater than 0"),
        ("training: {grad_clip: 0}", "training.grad_clip", "greater than 0"),
        ("training: {train_batch_size: 0}", "training.train_batch_size", "greater than 0"),
        ("training: {minibatch_size: -8}", "training.minibatch_size", "greater than 0"),
        ("training: {num_epochs: 0}", "training.num_epochs", "greater than 0"),
        ("training: {lr: {schedule: linear, start: .nan, end: 0, timesteps: 100}}", "training.lr.start", "finite"),
        ("training: {lr: {schedule: linear, start: 0.001, end: -0.001, timesteps: 100}}", "training.lr", ">= 0"),
        ("training: {lr: {schedule: linear, start: 0, end: 0, timesteps: 100}}", "training.lr", "nothing would be learned"),
        ("training: {lr: {schedule: piecewise, points: [[0, 0.001], [10, .inf]]}}", "training.lr.points.1.1", "finite"),
        ("training: {lr: {schedule: piecewise, points: [[0, 0.001]]}}", "training.lr.points", "at least two points"),
        ("training: {entropy_coeff: {schedule: piecewise, points: [[0, 0.01], [10, -0.01]]}}", "training.entropy_coeff", ">= 0"),
        ("env_runners: {rollout_fragment_length: 0}", "env_runners.rollout_fragment_length", "greater than or equal to 1 or 'auto'"),
        ("env_runners: {num_cpus_per_env_runner: .nan}", "env_runners.num_cpus_per_env_runner", "finite"),
        ("env_runners: {sample_timeout_s: .inf}", "env_runners.sample_timeout_s", "finite"),
        ("env_runners: {custom_resources_per_env_runner: {node_a: -1}}", "env_runners.custom_resources_per_env_runner.node_a", "greater than or equal to 0"),
        ("model: {fcnet_hiddens: [64, 0]}", "model.fcnet_hiddens.1", "greater than or equal to 1"),
        ("model: {conv_filters: [[16, 0, 1]]}", "model.conv_filters.0.1", "greater than or equal to 1"),
        ("model: {log_std_clip_param: .inf}", "model.log_std_clip_param", "finite"),
        ("learners: {num_cpus_per_learner: -1}", "learners.num_cpus_per_learner", "greater than or equal to 0 or 'auto'"),
        ("learners: {num_gpus_per_learner: .nan}", "learners.num_gpus_per_learner", "finite"),
        ("resources: {num_cpus_for_main_process: .inf}", "resources.num_cpus_for_main_process", "finite"),
        ("evaluation: {evaluation_interval: 1, evaluation_duration: 0}", "evaluation.evaluation_duration", "greater than or equal to 1 or 'auto'"),
        ("experiment: {seed: -1}", "experiment.seed", "greater than or equal to 0"),
        ("experiment: {seed: 4294967296}", "experiment.seed", "less than or equal to 2147483647"),
        ("stop: {training_iteration: .nan}", "stop.training_iteration", "finite"),
    ],
)
def test_values_have_real_bounds_and_are_finite(write_yaml, yaml_text, path, expected):
    file = write_yaml(f"environment: {{env: CartPole-v1}}\n{yaml_text}\n")
    msgs = errors_of(file)
    assert any(m.startswith(f"{file}:2: {path}: ") and expected in m for m in msgs), msgs


def test_clip_rewards_is_a_positive_number_or_a_bool(write_yaml):
    (msg,) = errors_of(write_yaml("environment: {env: CartPole-v1, clip_rewards: 0}\n"))
    assert msg.endswith("environment.clip_rewards: Input should be greater than 0 or a valid boolean (got 0)")
    for value, expected in (("true", True), ("false", False), ("5", 5.0)):
        cfg = load_config(write_yaml(f"environment: {{env: CartPole-v1, clip_rewards: {value}}}\n")).config
        assert cfg.environment.clip_rewards == expected and type(cfg.environment.clip_rewards) is type(expected)


def test_learning_rate_warm_up_from_zero_is_allowed(write_yaml):
    text = "environment: {env: CartPole-v1}\ntraining:\n  lr: {schedule: linear, start: 0, end: 0.0003, timesteps: 1000}\n"
    assert load_config(write_yaml(text)).config.training.lr.to_rllib() == [[0, 0.0], [1000, 0.0003]]


# --- experiment.name is one folder name --------------------------------------------------------------------


@pytest.mark.parametrize("name", ["''", ".", "..", "../..", "/tmp/x", "a/b", "'a\\\\b'", "-rf", ".hidden", "'a b'", "'a\\tb'", "x" * 101])
def test_experiment_name_is_a_single_folder_name(write_yaml, name):
    path = write_yaml(f"environment: {{env: CartPole-v1}}\nexperiment:\n  name: {name}\n")
    (msg,) = errors_of(path)
    assert msg.startswith(f"{path}:3: experiment.name: must be a single folder name: letters, digits and `_.-`")


@pytest.mark.parametrize("name", ["ppo_CartPole-v1", "run.2", "_x", "A" * 100])
def test_experiment_name_accepts_folder_names(write_yaml, name):
    assert load_config(write_yaml(f"environment: {{env: CartPole-v1}}\nexperiment: {{name: {name}}}\n")).config.experiment.name == name


def test_default_name_is_a_folder_name():
    from raytrain.config.schema import as_folder_name, folder_name

    assert as_folder_name("ppo_Pong-v5") == "ppo_Pong-v5"
    for text in ("ppo_My Env", "../x", "..", "", "ppo_é"):
        assert folder_name(as_folder_name(text)) == as_folder_name(text)


def test_an_id_of_another_packages_namespace_names_the_module_id_form(write_yaml):
    """Atari's ids exist once ale_py is imported; the nearest registered id ('Ant-v5') was no help."""
    (msg,) = errors_of(write_yaml("environment: {env: ALE/Pong-v5}\n"))
    assert "no Gymnasium id of the namespace 'ALE' is registered" in msg
    assert "'ale_py:ALE/Pong-v5' (pip install ale-py)" in msg and "Ant-v5" not in msg
    (msg,) = errors_of(write_yaml("environment: {env: 'gymnasium.envs:CartPol-v1'}\n"))
    assert "importing 'gymnasium.envs' registered no Gymnasium id 'CartPol-v1'; did you mean 'CartPole-v1'" in msg
    assert load_config(write_yaml("environment: {env: 'gymnasium:CartPole-v1'}\n"), []).config.environment.env


# YAML reads yes/no, on/off and true/false as booleans, and pydantic's lax mode took a boolean for an int or a
# float: `gamma: yes` trained with gamma 1.0 without a word.
_BOOL_SAID = "must be a number, but YAML {read} (yes/no, on/off and true/false are all booleans in YAML), which would count as {n}: write the number you mean"


def _bool_said(value: bool, written: str | None = None) -> str:
    shown = "true" if value else "false"
    read = f"reads {written} as {shown}" if written and written != shown else f"reads the value as {shown}"
    return _BOOL_SAID.format(read=read, n=int(value))


@pytest.mark.parametrize("text, line, path, value, written", [
    ("training:\n  gamma: yes\n", 4, "training.gamma", True, "yes"),
    ("training:\n  lambda: off\n", 4, "training.lambda", False, "off"),
    ("experiment:\n  checkpoint_frequency: on\n", 4, "experiment.checkpoint_frequency", True, "on"),
    ("model:\n  fcnet_hiddens:\n  - 64\n  - false\n", 6, "model.fcnet_hiddens.1", False, None),
    ("model:\n  fcnet_hiddens: [True, 64]\n", 4, "model.fcnet_hiddens.0", True, "True"),
    ("stop:\n  training_iteration: yes\n", 4, "stop.training_iteration", True, "yes"),
    ("training:\n  lr: {schedule: piecewise, points: [[0, 0.1], [true, 0.2]]}\n", 4, "training.lr.points.1.0", True, None),
    ("training:\n  lr: {schedule: linear, start: 0.1, end: yes, timesteps: 10}\n", 4, "training.lr.end", True, "yes"),
])
def test_a_yaml_boolean_where_a_number_is_needed_is_an_error_not_one_or_zero(write_yaml, text, line, path, value, written):
    path_ = write_yaml("environment:\n  env: CartPole-v1\n" + text)
    assert errors_of(path_) == [f"{path_}:{line}: {path}: {_bool_said(value, written)}"]


def test_a_yaml_boolean_for_a_number_by_set_is_blamed_on_the_flag(write_yaml):
    path = write_yaml("environment:\n  env: CartPole-v1\n")
    assert errors_of(path, ["training.lr=on"]) == [f"--set training.lr=on: training.lr: {_bool_said(True, 'on')}"]


def _number_fields():
    """Every field of every train section whose type takes a number and no boolean."""
    from raytrain.config.schema import SECTIONS
    from raytrain.config.yaml_bools import bools_for_numbers

    for section, model in SECTIONS.items():
        for name, field in model.model_fields.items():
            if bools_for_numbers(True, field.annotation) == [()]:
                yield section, field.alias or name


@pytest.mark.parametrize("section, key", list(_number_fields()))
def test_no_number_field_of_a_train_file_takes_a_yaml_boolean(write_yaml, section, key):
    body = f"{section}:\n  {key}: yes\n"
    path = write_yaml(body if section == "environment" else f"environment:\n  env: CartPole-v1\n{body}")
    assert f"{section}.{key}: {_bool_said(True, 'yes')}" in "\n".join(errors_of(path))


def test_the_number_fields_found_are_the_ones_expected():
    """The walk over the types finds the numbers (a check that the parametrized test above checks something)."""
    found = set(_number_fields())
    assert {("training", "gamma"), ("training", "lambda"), ("training", "lr"), ("env_runners", "num_env_runners"),
            ("experiment", "checkpoint_frequency"), ("resources", "num_cpus_for_main_process")} <= found
    assert ("training", "use_kl_loss") not in found and ("environment", "clip_rewards") not in found


def test_boolean_fields_still_take_yaml_booleans(write_yaml):
    path = write_yaml("environment:\n  env: CartPole-v1\n  clip_rewards: yes\n  normalize_actions: off\n"
                      "training:\n  use_kl_loss: no\n")
    cfg = load_config(path).config
    assert cfg.environment.clip_rewards is True and cfg.training.use_kl_loss is False


def test_a_yaml_boolean_for_a_number_in_a_cluster_slurm_or_sweep_file_is_an_error(write_yaml):
    from raytrain.config.cluster import load_cluster
    from raytrain.config.slurm import load_slurm
    from raytrain.config.sweep_load import load_sweep

    cluster = write_yaml("name: lab\nhead:\n  host: 10.0.0.1\n  port: on\n", "cluster.yaml")
    with pytest.raises(ConfigError) as info:
        load_cluster(cluster)
    assert [str(i) for i in info.value.issues] == [f"{cluster}:4: head.port: {_bool_said(True, 'on')}"]
    slurm = write_yaml("nodes: yes\ncpus_per_node: 4\nstorage_path: /shared/r\n", "slurm.yaml")
    with pytest.raises(ConfigError) as info:
        load_slurm(slurm)
    assert [str(i) for i in info.value.issues] == [f"{slurm}:1: nodes: {_bool_said(True, 'yes')}"]
    write_yaml("environment:\n  env: CartPole-v1\n", "base.yaml")
    sweep = write_yaml("base: base.yaml\nspace:\n  training.lr: {distribution: uniform, low: 0.001, high: yes}\n"
                       "stop: {training_iteration: 2}\n", "sweep.yaml")
    with pytest.raises(ConfigError) as info:
        load_sweep(sweep, storage="skip")
    assert f"{sweep}:3: space.training.lr.high: {_bool_said(True, 'yes')}" in [str(i) for i in info.value.issues]


_scalars = st.one_of(st.booleans(), st.integers(-5, 5), st.floats(allow_nan=False), st.text(max_size=3), st.none())


@given(st.lists(st.one_of(st.booleans(), st.integers(-5, 5)), max_size=6))
def test_the_boolean_walk_flags_exactly_the_booleans_of_a_list_of_numbers(items):
    from raytrain.config.yaml_bools import bools_for_numbers

    flagged = [i for i, v in enumerate(items) if isinstance(v, bool)]
    assert bools_for_numbers(items, list[int] | None) == [(i,) for i in flagged]
    assert bools_for_numbers(items, list[int | bool]) == []


@given(st.dictionaries(st.text(max_size=4), _scalars, max_size=5))
def test_the_boolean_walk_never_flags_what_takes_anything_and_names_the_key_where_numbers_are_needed(data):
    from typing import Any

    from raytrain.config.yaml_bools import bools_for_numbers

    assert bools_for_numbers(data, dict[str, Any]) == []
    found = bools_for_numbers(data, dict[str, float])
    if all(isinstance(v, (int, float)) for v in data.values()):
        assert found == [(k,) for k, v in data.items() if isinstance(v, bool)]


OBS_ENVS = '''
import gymnasium
import numpy as np


class _Walk(gymnasium.Env):
    action_space = gymnasium.spaces.Discrete(2)

    def __init__(self, config=None):
        pass

    def reset(self, *, seed=None, options=None):
        return self.observation_space.sample(), {}

    def step(self, action):
        return self.observation_space.sample(), 1.0, True, False, {}


class DictWalk(_Walk):
    observation_space = gymnasium.spaces.Dict({"a": gymnasium.spaces.Box(-1, 1, (2,), np.float32), "b": gymnasium.spaces.Discrete(3)})


class CellWalk(_Walk):
    observation_space = gymnasium.spaces.Discrete(9)


class GridWalk(_Walk):
    observation_space = gymnasium.spaces.Box(0, 1, (4, 4), np.float32)


class ImageWalk(_Walk):
    observation_space = gymnasium.spaces.Box(0.0, 1.0, (42, 42, 3), np.float32)


class AtariWalk(_Walk):
    observation_space = gymnasium.spaces.Box(0.0, 1.0, (210, 160, 3), np.float32)


class PixelWalk(_Walk):
    observation_space = gymnasium.spaces.Box(0, 255, (42, 42, 3), np.uint8)


class CountWalk(_Walk):
    observation_space = gymnasium.spaces.Box(0, 10, (4,), np.int64)


class SwitchWalk(_Walk):
    observation_space = gymnasium.spaces.Box(-1, 1, (3,), np.float32)
    action_space = gymnasium.spaces.MultiBinary(4)


class PadWalk(_Walk):
    observation_space = gymnasium.spaces.Box(-1, 1, (3,), np.float32)
    action_space = gymnasium.spaces.Box(-1, 1, (2, 2), np.float32)


class MixedWalk(_Walk):
    observation_space = gymnasium.spaces.Box(-1, 1, (3,), np.float32)
    action_space = gymnasium.spaces.Tuple([gymnasium.spaces.Discrete(2), gymnasium.spaces.Box(-1, 1, (2,), np.float32)])


class ShapeWalk(_Walk):
    def __init__(self, config=None):
        self.observation_space = gymnasium.spaces.Box(-1, 1, tuple((config or {}).get("shape", [3])), np.float32)


class FlatWalk(gymnasium.wrappers.FlattenObservation):
    def __init__(self, config=None):
        super().__init__(DictWalk(config))


class CountActWalk(_Walk):
    observation_space = gymnasium.spaces.Box(-1, 1, (3,), np.float32)
    action_space = gymnasium.spaces.Box(0, 10, (2,), np.int64)


class ShiftedActWalk(_Walk):
    observation_space = gymnasium.spaces.Box(-1, 1, (3,), np.float32)
    action_space = gymnasium.spaces.Box(np.array([-2, 0]), np.array([2, 5]), (2,), np.int32)


class OldGymWalk(_Walk):
    """The Gym API of before Gymnasium 0.26: reset() takes no seed and returns the observation alone."""
    observation_space = gymnasium.spaces.Box(-1, 1, (3,), np.float32)

    def reset(self):
        return self.observation_space.sample()

    def step(self, action):
        return self.observation_space.sample(), 1.0, True, {}


class FourStepWalk(_Walk):
    observation_space = gymnasium.spaces.Box(-1, 1, (3,), np.float32)

    def step(self, action):
        return self.observation_space.sample(), 1.0, True, {}


class ObsOnlyWalk(_Walk):
    observation_space = gymnasium.spaces.Box(-1, 1, (3,), np.float32)

    def reset(self, *, seed=None, options=None):
        return self.observation_space.sample()


class WideWalk(_Walk):
    observation_space = gymnasium.spaces.Box(-1, 1, (3,), np.float32)

    def reset(self, *, seed=None, options=None):
        return np.zeros(4), {}


class SizedWalk(_Walk):
    def __init__(self, size):
        self.observation_space = gymnasium.spaces.Box(-1, 1, (size,), np.float32)


class KeyedWalk(_Walk):
    def __init__(self, config):
        self.observation_space = gymnasium.spaces.Box(-1, 1, (config["size"], config["depth"]), np.float32)


class BrokenWalk(_Walk):
    """An env whose own code fails: RLlib reports that as it does."""
    observation_space = gymnasium.spaces.Box(-1, 1, (3,), np.float32)

    def reset(self, *, seed=None, options=None):
        raise RuntimeError("the simulator is not running")
'''


@pytest.fixture
def obs_envs(tmp_path, monkeypatch):
    """The envs above, importable; and every attempt to start or join Ray refused and recorded in `starts`
    (see ray_starts.py)."""
    (tmp_path / "obs_walks.py").write_text(OBS_ENVS)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    refuse_ray_starts(monkeypatch, starts)
    return tmp_path


starts: list[str] = []
"""The Ray starts `obs_envs` saw in the current test."""


@pytest.mark.parametrize("env, space", [
    ("DictWalk", "Dict('a': Box(-1.0, 1.0, (2,), float32), 'b': Discrete(3))"),
    ("CellWalk", "Discrete(9)"),
    ("GridWalk", "Box(0.0, 1.0, (4, 4), float32)"),
])
def test_an_env_whose_observations_ppo_has_no_network_for_exits_2_before_ray(obs_envs, write_yaml, env, space):
    """RLlib's encoders take a 1D or a 3D Box: any other space failed in every env runner once Ray had started,
    a page of tracebacks per actor, exit 1. `train` and `config validate` say so at environment.env, with the fix."""
    from typer.testing import CliRunner

    from raytrain.cli import app

    storage = obs_envs / "runs"
    path = write_yaml(f"experiment: {{storage_path: {storage}}}\nenvironment:\n  env: 'obs_walks:{env}'\n")
    said = (f"{path}:3: environment.env: the env's observation space {space} has no network of PPO's: RLlib's encoders "
            "take a Box of one dimension (a vector) or three (an image). Set `env_runners.flatten_observations: true` "
            "to give the network each observation as one vector (RLlib's FlattenObservations: a Discrete becomes "
            "one-hot, a Dict or Tuple one vector)")
    for args in (["train", str(path)], ["config", "validate", str(path)]):
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 2, result.output
        assert said in " ".join(result.output.split()), result.output
    assert starts == [] and not storage.exists()


def test_the_flatten_fix_it_names_passes_and_images_and_vectors_pass(obs_envs, write_yaml):
    from raytrain.rllib.fit import observation_problem

    for env in ("FlatWalk", "ImageWalk"):
        assert observation_problem(load_config(write_yaml(f"environment: {{env: 'obs_walks:{env}'}}\n")).config) is None
    assert observation_problem(load_config(write_yaml("environment: {env: CartPole-v1}\n")).config) is None


@pytest.mark.parametrize("env", ["DictWalk", "CellWalk", "GridWalk", "FlatWalk", "ImageWalk"])
def test_the_flatten_setting_it_names_gives_ppo_a_network(obs_envs, write_yaml, env):
    """The fix it named was a wrapper class in a module of the user's own; RLlib's FlattenObservations connector
    does it, set by one line of the config."""
    from raytrain.rllib.fit import observation_problem

    text = f"environment: {{env: 'obs_walks:{env}'}}\nenv_runners: {{flatten_observations: true}}\n"
    assert observation_problem(load_config(write_yaml(text)).config) is None


@pytest.mark.parametrize("env, space", [("SwitchWalk", "MultiBinary(4)"), ("PadWalk", "Box(-1.0, 1.0, (2, 2), float32)")])
def test_an_env_whose_actions_ppo_has_no_distribution_for_exits_2_before_ray(obs_envs, write_yaml, env, space):
    """RLlib failed at its build in every env runner and learner once Ray had started (UnsupportedSpaceException,
    NotImplementedError)."""
    from raytrain.rllib.fit import observation_issue

    path = write_yaml(f"environment:\n  env: 'obs_walks:{env}'\n")
    loaded = load_config(path)
    issue = observation_issue(loaded.config, loaded.source)
    assert str(issue) == (f"{path}:2: environment.env: the env's action space {space} has no action distribution of "
                          "PPO's: RLlib takes a Discrete, a MultiDiscrete, a Box of one dimension, or a Tuple or Dict of "
                          "these. Change the env's action space (a MultiBinary(n) as MultiDiscrete([2] * n), a Box of "
                          "more dimensions flattened to one)")
    mixed = load_config(write_yaml("environment:\n  env: 'obs_walks:MixedWalk'\n"))
    assert observation_issue(mixed.config, mixed.source) is None


def test_a_yaml_boolean_for_a_number_in_a_sweeps_set_base_or_inline_train_shows_what_was_written(write_yaml):
    from raytrain.config.sweep_load import load_sweep

    write_yaml("environment: {env: CartPole-v1}\ntraining:\n  gamma: yes\n", "base.yaml")
    write_yaml("environment: {env: CartPole-v1}\n", "plain.yaml")
    for text, where, key, written, value in [
        ("base: plain.yaml\nset: {training.gamma: on}\n", "sweep.yaml:2", "training.gamma", "on", True),
        ("base: plain.yaml\nset:\n  training:\n    lambda: no\n", "sweep.yaml:4", "training.lambda", "no", False),
        ("base: base.yaml\n", "base.yaml:3", "training.gamma", "yes", True),
        ("train:\n  environment: {env: CartPole-v1}\n  training: {lambda: off}\n", "sweep.yaml:3", "training.lambda", "off", False),
    ]:
        sweep = write_yaml(text + "search: {algorithm: random, num_samples: 1}\nstop: {training_iteration: 2}\n", "sweep.yaml")
        with pytest.raises(ConfigError) as info:
            load_sweep(sweep, storage="skip")
        assert f"{sweep.parent / where}: {key}: {_bool_said(value, written)}" in [str(i) for i in info.value.issues]


def test_a_sweep_over_an_env_whose_observations_ppo_cannot_take_exits_2_before_ray(obs_envs, write_yaml):
    from typer.testing import CliRunner

    from raytrain.cli import app

    base = write_yaml("environment:\n  env: 'obs_walks:DictWalk'\n", "base.yaml")
    sweep = write_yaml(f"base: base.yaml\ncheckpoint: {{storage_path: {obs_envs / 'runs'}}}\n"
                       "search: {algorithm: random, num_samples: 1}\nstop: {training_iteration: 2}\n", "sweep.yaml")
    for args in (["tune", str(sweep), "--dry-run"], ["tune", str(sweep)], ["config", "validate", str(sweep)]):
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 2, result.output
        assert f"{base}:2: environment.env: the env's observation space Dict(" in " ".join(result.output.split())
    runs = obs_envs / "runs"
    assert starts == [] and not (runs.exists() and any(runs.iterdir()))  # no experiment folder


def test_a_sweep_that_searches_an_env_config_ppo_cannot_take_exits_2_at_the_search_before_ray(obs_envs, write_yaml):
    """Only the base config's env was checked: a searched env_config value that gives the env a 2D observation
    space started the sweep, and that trial failed in every env runner after Ray had started."""
    from typer.testing import CliRunner

    from raytrain.cli import app

    write_yaml("environment:\n  env: 'obs_walks:ShapeWalk'\nenv_runners: {num_env_runners: 1}\n", "base.yaml")
    sweep = write_yaml(f"base: base.yaml\ncheckpoint: {{storage_path: {obs_envs / 'runs'}}}\n"
                       "search: {algorithm: random, num_samples: 1}\nstop: {training_iteration: 2}\nspace:\n"
                       "  environment.env_config.shape: {distribution: choice, values: [[3], [4, 4]]}\n",
                       "sweep.yaml")
    for args in (["tune", str(sweep), "--dry-run"], ["tune", str(sweep)], ["config", "validate", str(sweep)]):
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 2, result.output
        said = " ".join(result.output.split())
        assert (f"{sweep}:6: space.environment.env_config.shape: with environment.env_config.shape = [4, 4] the env's observation space "
                "Box(-1.0, 1.0, (4, 4), float32) has no network of PPO's") in said, said
    runs = obs_envs / "runs"
    assert starts == [] and not (runs.exists() and any(runs.iterdir()))
    fine = write_yaml("base: base.yaml\nsearch: {algorithm: random, num_samples: 1}\nstop: {training_iteration: 2}\n"
                      "space:\n  environment.env_config.shape: {distribution: choice, values: [[3], [5]]}\n", "fine.yaml")
    result = CliRunner().invoke(app, ["config", "validate", str(fine)])
    assert result.exit_code == 0, result.output


NEEDS_PKG = '''
import gymnasium
from gymnasium.error import DependencyNotInstalled


def make(**kwargs):
    raise DependencyNotInstalled('Box9D is not installed, you can install it by run `pip install "walks[box9d]"`')


gymnasium.register("NeedsBox-v0", entry_point=make)
'''


def test_a_registered_env_whose_package_is_missing_exits_2_before_ray(obs_envs, write_yaml):
    """`LunarLander-v3` without Box2D passed every check; then every env runner failed (`DependencyNotInstalled`):
    about 290 lines of tracebacks and exit 1 once Ray had started. It is an install step the user must take."""
    from typer.testing import CliRunner

    from raytrain.cli import app

    (obs_envs / "needs_pkg.py").write_text(NEEDS_PKG)
    storage = obs_envs / "runs"
    path = write_yaml(f"experiment: {{storage_path: {storage}}}\nenvironment:\n  env: 'needs_pkg:NeedsBox-v0'\n")
    said = (f"{path}:3: environment.env: 'needs_pkg:NeedsBox-v0' cannot be made here: a package it needs is not "
            'installed: Box9D is not installed, you can install it by run `pip install "walks[box9d]"` (install it '
            "into the Python that runs raytrain, and on every node of a cluster)")
    for args in (["train", str(path)], ["train", str(path), "--dry-run"], ["config", "validate", str(path)]):
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 2, result.output
        assert said in " ".join(result.output.split()), result.output
    assert starts == [] and not storage.exists()


def test_a_path_written_with_an_environment_variable_says_none_is_expanded(write_yaml):
    """`storage_path: $HOME/runs` was refused as relative with no word on why: YAML and raytrain keep `$HOME`."""
    from raytrain.config.cluster import load_cluster

    path = write_yaml("environment: {env: CartPole-v1}\nexperiment: {storage_path: $HOME/runs}\n")
    (msg,) = errors_of(path)
    assert msg == (f"{path}:2: experiment.storage_path: must be an absolute path (or start with ~), got '$HOME/runs': "
                   "raytrain expands no environment variable in a file (a value is used as written); write ~/runs")
    cluster = write_yaml("name: x\nhead: {host: localhost}\npython: '${VENV}/bin/python'\n", "c.yaml")
    with pytest.raises(ConfigError) as info:
        load_cluster(cluster)
    assert str(info.value).startswith(
        f"{cluster}:3: python: must be an absolute path (starting with /): raytrain expands no environment variable in "
        "a file (a value is used as written); write the path itself")


def test_flatten_observations_counts_as_a_change_of_the_network(obs_envs, write_yaml):
    """It decides the network's input: a resume that turns it on or off, and a sweep that searches it, get the
    network checks that a changed env or model gets."""
    from raytrain.rllib.fit import changed_keys, observation_problem

    plain = load_config(write_yaml("environment: {env: 'obs_walks:CellWalk'}\n", "a.yaml")).config
    flat = load_config(write_yaml("environment: {env: 'obs_walks:CellWalk'}\nenv_runners: {flatten_observations: true}\n",
                                  "b.yaml")).config
    assert changed_keys(flat, plain) == {"env_runners.flatten_observations": (True, None)}
    assert observation_problem(flat) is None and "Set `env_runners.flatten_observations: true`" in observation_problem(plain)


def test_an_image_of_a_size_with_no_default_cnn_is_told_to_set_conv_filters(obs_envs, write_yaml):
    """A 210x160 image (Atari's) was told that RLlib takes an image and, in the same breath, to flatten it; RLlib
    has no default CNN for that size: `model.conv_filters` or a resize is the fix."""
    from raytrain.rllib.fit import observation_problem

    path = write_yaml("environment: {env: 'obs_walks:AtariWalk'}\n")
    assert observation_problem(load_config(path).config) == (
        "the env's observations are images of shape [210, 160, 3], for which RLlib has no default CNN (it has one for "
        "42x42, 64x64, 84x84 and 10x10 images, any number of channels): set model.conv_filters, a [out_channels, "
        "kernel, stride] per layer, or resize the images in the env (Atari's wrappers give 84x84)")
    fixed = write_yaml("environment: {env: 'obs_walks:AtariWalk'}\nmodel: {conv_filters: [[16, 8, 4], [32, 4, 2]]}\n",
                       "fixed.yaml")
    assert observation_problem(load_config(fixed).config) is None


@pytest.mark.parametrize(("env", "said"), [
    ("PixelWalk", "the env's observations are images of uint8, Box(0, 255, (42, 42, 3), uint8), and RLlib's CNN takes "
                  "floats: make them float32 where the env is made (scaled to [0, 1], with a float32 Box: "
                  "gymnasium.wrappers.TransformObservation), or set `env_runners.flatten_observations: true` for a "
                  "vector of floats (an MLP over the pixels)"),
    ("CountWalk", "the env's observations are int64, Box(0, 10, (4,), int64), and PPO's network takes floats: set "
                  "`env_runners.flatten_observations: true` (it gives float32 vectors), or make them float32 where "
                  "the env is made"),
])
def test_integer_observations_are_refused_before_ray_with_the_fix(obs_envs, write_yaml, env, said):
    """They passed every check and failed in the first iteration, once Ray had started and the run folder was
    made: `RuntimeError: mat1 and mat2 must have the same dtype, but got Long and Float` (exit 1)."""
    from raytrain.rllib.fit import observation_problem

    assert observation_problem(load_config(write_yaml(f"environment: {{env: 'obs_walks:{env}'}}\n")).config) == said
    flat = f"environment: {{env: 'obs_walks:{env}'}}\nenv_runners: {{flatten_observations: true}}\n"
    assert observation_problem(load_config(write_yaml(flat, "flat.yaml")).config) is None


@pytest.mark.parametrize(
    "kind,text,expected",
    [
        # A section written as the one value it is usually about. It said "Input should be a valid dictionary or
        # instance of EnvironmentConfig (got 'CartPole-v1')".
        ("train", "environment: CartPole-v1\n", "1: environment: is a section (a mapping of its settings), not one "
         "value: write environment: {env: CartPole-v1}"),
        # A value that a few settings could take: those settings; that many could: the section's first keys.
        ("train", "environment: {env: CartPole-v1}\nexperiment: my-run\nstop: {training_iteration: 2}\n",
         "2: experiment: is a section (a mapping of its settings), not one value: write experiment: {name: my-run}"),
        ("sweep", "base: base.yaml\nsearch: {algorithm: random}\noptuna: tpe\n", "3: optuna: is a section (a "
         "mapping of its settings), not one value: write optuna: {sampler: tpe}"),
        ("train", "environment: {env: CartPole-v1}\nstop: 100\n", "2: stop: is a mapping of metric: threshold "
         "(training stops when any is reached), not one value: e.g. stop: {training_iteration: 100}"),
        ("sweep", "base: base.yaml\nsearch: {algorithm: random}\nstop: 450\n", "3: stop: is a mapping of metric: "
         "threshold (training stops when any is reached), not one value: e.g. stop: {training_iteration: 450}"),
        # One value where a list of them goes: it said "Input should be a valid list (got 64)".
        ("train", "environment: {env: CartPole-v1}\nmodel: {fcnet_hiddens: 64}\n", "2: model.fcnet_hiddens: is a list, "
         "not one value: write fcnet_hiddens: [64]"),
        # A number, a truth value or a list: no setting is guessed (`evaluation: true` fits evaluation_duration
        # as 1, `env_runners: 4` several counts), the section's first keys are listed.
        ("train", "environment: {env: CartPole-v1}\nexperiment: 7\n", "2: experiment: is a section (a mapping of "
         "its settings: name, seed, storage_path, checkpoint_frequency, num_to_keep, checkpoint_at_end, ...; raytrain "
         "config schema lists them), not one value (got 7)"),
        ("train", "environment: {env: CartPole-v1}\nmodel: [64]\n", "2: model: is a section (a mapping of its "
         "settings: fcnet_hiddens, fcnet_activation, "),
        ("train", "environment: {env: CartPole-v1}\nevaluation: true\n", "2: evaluation: is a section (a mapping "
         "of its settings: evaluation_interval, "),
        ("train", "environment: {env: CartPole-v1}\ntraining: 3\n", "2: training: is a section (a mapping of its "
         "settings: lr, gamma, lambda, clip_param, vf_clip_param, vf_loss_coeff, ...; raytrain config schema lists "
         "them), not one value (got 3)"),
        ("sweep", "base: base.yaml\nsearch: random\n", "2: search: is a section (a mapping of its settings), not one "
         "value: write search: {algorithm: random}"),
        ("sweep", "base: base.yaml\nsearch: {algorithm: random}\ncheckpoint: /tmp/x\n", "3: checkpoint: is a section "
         "(a mapping of its settings), not one value: write checkpoint: {storage_path: /tmp/x}"),
        ("cluster", "name: c\nhead: localhost\nauth: {mode: token}\n", "2: head: is a section (a mapping of its "
         "settings), not one value: write head: {host: localhost}"),
        ("cluster", "name: c\nhead: {host: localhost}\nauth: token\n", "3: auth: is a section (a mapping of its "
         "settings), not one value: write auth: {mode: token}"),
        # An item of a list of sections, and the list written as one item.
        ("cluster", "name: c\nhead: {host: m10}\nworkers: [m8, m9]\nauth: {mode: token}\n", "3: workers.1: is a "
         "mapping of its settings, not one value: write {host: m9} for this item of workers"),
        ("cluster", "name: c\nhead: {host: m10}\nworkers: m8\nauth: {mode: token}\n", "3: workers: is a list of "
         "mappings of settings, not one value: write workers: [{host: m8}]"),
    ],
)
def test_a_section_written_as_one_value_says_how_to_write_it(write_yaml, tmp_path, monkeypatch, kind, text, expected):
    from raytrain.config.cluster import load_cluster
    from raytrain.config.sweep_load import load_sweep

    monkeypatch.setenv("HOME", str(tmp_path))
    write_yaml("environment: {env: CartPole-v1}\n", "base.yaml")
    path = write_yaml(text, "file.yaml")
    load = {"train": load_config, "sweep": load_sweep, "cluster": load_cluster}[kind]
    with pytest.raises(ConfigError) as info:
        load(path)
    said = [str(i) for i in info.value.issues]
    assert any(s.startswith(f"{path}:{expected}") for s in said), said
    assert not any("instance of" in s for s in said), said


@pytest.mark.parametrize(
    "setting,expected",
    [
        # RLlib's and Tune's search syntax in a train config. It said "a schedule needs `schedule: linear`", "Input
        # should be a valid number (got [0.99, 0.9])" and "Input should be a valid integer".
        ("lr: {grid_search: [0.001, 0.0001]}", "training.lr: a grid_search, and a train config trains one value of "
         "each setting: search it with raytrain tune, in a sweep file with base: config.yaml and space: {training.lr: "
         "{distribution: grid, values: [0.001, 0.0001]}}"),
        ("num_epochs: {distribution: randint, low: 2, high: 10}", "training.num_epochs: a search distribution, and a "
         "train config trains one value of each setting: search it with raytrain tune, in a sweep file with base: "
         "config.yaml and space: {training.num_epochs: {distribution: randint, low: 2, high: 10}}"),
        ("gamma: [0.99, 0.9]", "training.gamma: a list of values, and a train config trains one value of each "
         "setting: write one, or try each with raytrain tune, in a sweep file with base: config.yaml and space: "
         "{training.gamma: {distribution: grid, values: [0.99, 0.9]}}"),
    ],
)
def test_a_search_written_in_a_train_config_is_sent_to_a_sweep(write_yaml, setting, expected):
    path = write_yaml(f"environment: {{env: CartPole-v1}}\ntraining:\n  {setting}\n")
    assert errors_of(path) == [f"{path}:3: {expected}"]


def test_rllibs_points_of_a_schedule_are_told_how_a_schedule_is_written(write_yaml):
    """RLlib's `lr_schedule` form given as the setting: it said "Input should be a valid number (got [[0, 0.01],
    [1000, 0.001]])"."""
    path = write_yaml("environment: {env: CartPole-v1}\ntraining:\n  lr: [[0, 0.01], [1000, 0.001]]\n")
    assert errors_of(path) == [f"{path}:3: training.lr: [timestep, value] points are a schedule, written "
                               "{schedule: piecewise, points: [[0, 0.01], [1000, 0.001]]}"]


def test_a_list_where_one_value_is_meant_among_choices_is_sent_to_a_sweep(write_yaml):
    path = write_yaml("environment: {env: CartPole-v1}\nmodel: {fcnet_activation: [relu, tanh]}\n")
    (msg,) = errors_of(path)
    assert msg.startswith(f"{path}:2: model.fcnet_activation: a list of values, and a train config trains one value "
                          "of each setting: write one, or try each with raytrain tune"), msg


OLD_GYM = ("uses the Gym API of before Gymnasium 0.26, and RLlib calls Gymnasium's: reset(seed=None, options=None) "
           "returns (observation, info) and step(action) returns (observation, reward, terminated, truncated, info). "
           "Port the env (https://gymnasium.farama.org/introduction/migration_guide), or wrap an old Gym env with "
           "shimmy's GymV21CompatibilityV0")


@pytest.mark.parametrize("env, said", [
    # Each failed in every env runner once Ray had started (`TypeError: OldGymWalk.reset() got an unexpected keyword
    # argument 'seed'`, `ValueError: Output array is the wrong shape`, `Expected all Box shape elements to be
    # integer, actual type=(EnvContext,)`), exit 1, with a run folder and no checkpoint.
    ("OldGymWalk", "the env's reset() takes no seed (TypeError: OldGymWalk.reset() got an unexpected keyword "
     "argument 'seed'): it " + OLD_GYM),
    ("FourStepWalk", "the env's step() returned 4 values, not 5: it " + OLD_GYM),
    ("ObsOnlyWalk", "the env's reset() returned an ndarray, not (observation, info): it " + OLD_GYM),
    ("WideWalk", "the env's reset() returned an observation of shape (4,), and its observation_space is Box(-1.0, "
     "1.0, (3,), float32): RLlib sizes the network by the space, so make the two agree"),
    ("SizedWalk", "RLlib makes a custom env as SizedWalk(env_config), one argument (environment.env_config, a "
     "mapping), and SizedWalk(size) takes that mapping as size: take one argument and read size from it "
     "(environment.env_config: {size: ...})"),
])
def test_an_env_that_does_not_follow_gymnasiums_api_as_rllib_calls_it_exits_2_before_ray(obs_envs, write_yaml, env,
                                                                                        said):
    from typer.testing import CliRunner

    from raytrain.cli import app

    storage = obs_envs / "runs"
    path = write_yaml(f"experiment: {{storage_path: {storage}}}\nenvironment:\n  env: 'obs_walks:{env}'\n")
    for args in (["train", str(path)], ["config", "validate", str(path)]):
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 2, result.output
        assert f"{path}:3: environment.env: {said}" in " ".join(result.output.split()), result.output
    assert starts == [] and not storage.exists()


def test_an_env_that_reads_a_key_env_config_lacks_exits_2_before_ray(obs_envs, write_yaml):
    """It was `error: KeyError: 'size'`, exit 1, once Ray had started (no file, no line, no word of env_config)."""
    from typer.testing import CliRunner

    from raytrain.cli import app

    storage = obs_envs / "runs"
    path = write_yaml(f"experiment: {{storage_path: {storage}}}\nenvironment:\n  env: 'obs_walks:KeyedWalk'\n"
                      "  env_config: {depth: 2, seed: 1}\n")
    for args in (["train", str(path)], ["config", "validate", str(path)]):
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 2, result.output
        said = " ".join(result.output.split())
        # obs_walks.py under the current directory; an earlier test's copy (absolute) when that one was imported first
        assert re.search(rf"{re.escape(str(path))}:3: environment.env: obs_walks:KeyedWalk reads env_config\['size'\] "
                         r"\((\S+/)?obs_walks\.py:\d+: ", said), said
        assert ('self.observation_space = gymnasium.spaces.Box(-1, 1, (config["size"], config["depth"]), np.float32)), '
                "and environment.env_config has no 'size' (it has depth, seed): set it, e.g. environment: {env_config: "
                "{size: ...}}") in " ".join(result.output.split()), result.output
    assert starts == [] and not storage.exists()


def test_a_sweep_that_searches_the_env_config_keys_its_base_lacks_is_not_refused_for_them(obs_envs, write_yaml):
    """Every trial sets them: only a key no trial sets is refused, at the base config's env."""
    from typer.testing import CliRunner

    from raytrain.cli import app

    write_yaml("environment:\n  env: 'obs_walks:KeyedWalk'\n", "base.yaml")
    space = ("space:\n  environment.env_config.size: {distribution: choice, values: [2, 3]}\n"
             "  environment.env_config.depth: {distribution: choice, values: [1, 2]}\n")
    fine = write_yaml("base: base.yaml\nsearch: {algorithm: random, num_samples: 1}\nstop: {training_iteration: 2}\n"
                      + space, "fine.yaml")
    result = CliRunner().invoke(app, ["config", "validate", str(fine)])
    assert result.exit_code == 0, result.output
    lacking = write_yaml("base: base.yaml\nsearch: {algorithm: random, num_samples: 1}\nstop: {training_iteration: 2}\n"
                         + space.split("  environment.env_config.depth")[0], "lacking.yaml")
    result = CliRunner().invoke(app, ["config", "validate", str(lacking)])
    assert result.exit_code == 2, result.output
    assert "KeyedWalk reads env_config['depth']" in " ".join(result.output.split()), result.output


def test_an_env_whose_own_code_fails_is_left_to_rllib(obs_envs, write_yaml):
    from raytrain.rllib.fit import observation_problem

    assert observation_problem(load_config(write_yaml("environment: {env: 'obs_walks:BrokenWalk'}\n")).config) is None


@pytest.mark.parametrize("env, said", [
    # It said "RLlib takes ... a Box of one dimension", which this Box is: its integers were the problem.
    ("CountActWalk", "the env's action space Box(0, 10, (2,), int64) holds integers, and PPO's Box actions are "
     "floats (a Gaussian): for integer actions use MultiDiscrete([11, 11]), whose actions count from 0"),
    ("ShiftedActWalk", "the env's action space Box([-2  0], [2 5], (2,), int32) holds integers, and PPO's Box actions "
     "are floats (a Gaussian): for integer actions use MultiDiscrete([5, 6]), whose actions count from 0 (add the "
     "Box's low, [-2, 0], in the env)"),
])
def test_an_env_with_integer_box_actions_is_told_the_multidiscrete_to_use(obs_envs, write_yaml, env, said):
    from raytrain.rllib.fit import observation_problem

    assert observation_problem(load_config(write_yaml(f"environment: {{env: 'obs_walks:{env}'}}\n")).config) == said


def test_an_id_written_with_the_old_gym_package_is_told_gymnasiums_form(write_yaml):
    """`gym:CartPole-v1` said "cannot import module 'gym' ... run raytrain from the folder that holds gym.py"."""
    path = write_yaml("environment: {env: 'gym:CartPole-v1'}\n")
    (msg,) = errors_of(path)
    assert msg.endswith("; gym is Gymnasium now, and Gymnasium's own ids need no package: write env: CartPole-v1"), msg


def test_an_env_module_with_a_syntax_error_is_a_config_error_at_its_file_and_line(write_yaml, tmp_path, monkeypatch):
    """It was `error: SyntaxError: expected ':' (badenv.py, line 2)`, exit 1, from inside the checks."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "syntax_broken_env.py").write_text("import gymnasium as gym\nclass E(gym.Env)\n    pass\n")
    path = write_yaml("environment: {env: 'syntax_broken_env:E'}\n")
    (msg,) = errors_of(path)
    assert msg == (f"{path}:1: environment.env: cannot import module 'syntax_broken_env': syntax_broken_env.py:2: "
                   "SyntaxError: expected ':' (class E(gym.Env))")


@pytest.mark.parametrize(("model", "said"), [
    # Each passed `config validate` and `--dry-run`, then `raytrain train` ended once Ray had started with
    # `error: ValueError: Not an in-place initializer ...`, `Unknown initializer name`, or `IndexError: list index
    # out of range`, exit 1.
    ("fcnet_kernel_initializer: orthogonal", "model.fcnet_kernel_initializer: torch's in-place initializer is "
     "orthogonal_, with a trailing _ (RLlib takes torch.nn.init's in-place ones): write orthogonal_ (got 'orthogonal')"),
    ("head_fcnet_bias_initializer: zero_", "model.head_fcnet_bias_initializer: not one of torch.nn.init's in-place "
     "initializers (constant_, dirac_, eye_, kaiming_normal_, kaiming_uniform_, normal_, ones_, orthogonal_, sparse_, "
     "trunc_normal_, uniform_, xavier_normal_, xavier_uniform_, zeros_); did you mean zeros_? (got 'zero_')"),
    ("fcnet_hiddens: []", "model.fcnet_hiddens: the encoder needs at least one layer, e.g. [64] (RLlib's own: "
     "[256, 256]) (got [])"),
])
def test_a_model_setting_rllib_refuses_when_it_builds_the_network_exits_2_at_its_line(write_yaml, model, said):
    path = write_yaml(f"environment: {{env: CartPole-v1}}\nmodel:\n  {model}\n")
    (msg,) = errors_of(path)
    assert msg == f"{path}:3: {said}"


def test_the_initializers_raytrain_knows_are_torchs_in_place_ones():
    import torch.nn.init

    from raytrain.config.schema import TORCH_INITIALIZERS

    assert TORCH_INITIALIZERS == tuple(sorted(n for n in dir(torch.nn.init) if n.endswith("_") and not n.startswith("_")
                                              and callable(getattr(torch.nn.init, n))))


@pytest.mark.parametrize(("key", "said"), [
    # Each said only "unknown key (see raytrain config schema ...)", "unknown section; valid sections: ...", or a
    # wrong nearest name (clip_range_vf: 'clip_param'; num_envs: 'num_epochs').
    ("learning_rate", "stable-baselines3's learning_rate is training.lr here"),
    ("n_steps", "stable-baselines3's n_steps is training.train_batch_size here (SB3's n_steps times n_envs: the env "
                "steps of one update)"),
    ("max_grad_norm", "stable-baselines3's max_grad_norm is training.grad_clip here"),
    ("clip_range_vf", "stable-baselines3's clip_range_vf is training.vf_clip_param here"),
    ("n_envs", "stable-baselines3's n_envs is env_runners.num_envs_per_env_runner here"),
    ("num_envs", "stable-baselines3's num_envs is env_runners.num_envs_per_env_runner here"),
    ("n_timesteps", "stable-baselines3's n_timesteps is stop: {num_env_steps_sampled_lifetime: N} here"),
    ("total_timesteps", "stable-baselines3's total_timesteps is stop: {num_env_steps_sampled_lifetime: N} here"),
    ("net_arch", "stable-baselines3's net_arch is model.fcnet_hiddens here"),
    ("policy_kwargs", "stable-baselines3's policy_kwargs is model here (net_arch: fcnet_hiddens, activation_fn: "
                      "fcnet_activation)"),
    ("policy", "stable-baselines3's policy is the default network here (model: its layers)"),
])
@pytest.mark.parametrize("where", ["top", "training"])
def test_stable_baselines3_names_are_told_raytrains(write_yaml, key, said, where):
    """RL Baselines3 Zoo's hyperparameter files write them flat; SB3's PPO(...) takes them as arguments."""
    body = f"{key}: 1\n" if where == "top" else f"training: {{{key}: 1}}\n"
    (msg,) = errors_of(write_yaml("environment: {env: CartPole-v1}\n" + body))
    assert msg.endswith(f"; {said}"), msg


def test_a_setting_written_with_no_value_is_warned_of(write_yaml):
    """`lr:` with nothing after it (an edit left unfinished) is YAML's null, and RLlib's default applied unsaid."""
    path = write_yaml("environment: {env: CartPole-v1}\ntraining:\n  lr:\n  gamma: 0.99\nmodel: {fcnet_hiddens: }\n")
    loaded = load_config(path)
    assert loaded.warnings == [
        f"warning: {path}:3: training.lr: has no value (YAML reads an empty value as null), so RLlib's default applies: "
        "write a value, or leave the key out",
        f"warning: {path}:5: model.fcnet_hiddens: has no value (YAML reads an empty value as null), so RLlib's default "
        "applies: write a value, or leave the key out",
    ]
    assert load_config(write_yaml("environment: {env: CartPole-v1}\nexperiment: {seed: null}\n")).warnings == []


@pytest.mark.parametrize(("model", "line", "said"), [
    # Each passed validate and --dry-run, then failed in every learner once Ray had started, when RLlib built the
    # network: `TypeError: orthogonal_() got an unexpected keyword argument 'gan'`, `constant_() missing 1 required
    # positional argument: 'val'`, `ValueError: Only tensors with 2 or more dimensions are supported`.
    ("fcnet_kernel_initializer: orthogonal_\n  fcnet_kernel_initializer_kwargs: {gan: 1.4}", 4,
     "model.fcnet_kernel_initializer_kwargs.gan: torch's orthogonal_ takes no gan (it takes gain); did you mean gain?"),
    ("fcnet_bias_initializer: constant_", 3,
     "model.fcnet_bias_initializer: torch's constant_ needs val: set model.fcnet_bias_initializer_kwargs: "
     "{val: ...}"),
    ("head_fcnet_kernel_initializer: xavier_uniform_\n  head_fcnet_kernel_initializer_kwargs: {generator: 1}", 4,
     "model.head_fcnet_kernel_initializer_kwargs.generator: torch's xavier_uniform_ takes no generator from a config "
     "(it takes gain)"),
    ("fcnet_kernel_initializer: orthogonal_\n  fcnet_kernel_initializer_kwargs: {gain: high}", 4,
     "model.fcnet_kernel_initializer_kwargs.gain: torch's orthogonal_ takes a number as gain (got 'high')"),
    ("fcnet_kernel_initializer: kaiming_normal_\n  fcnet_kernel_initializer_kwargs: {mode: fan_avg}", 4,
     "model.fcnet_kernel_initializer_kwargs.mode: torch's kaiming_normal_ takes one of fan_in, fan_out as mode "
     "(got 'fan_avg')"),
    ("fcnet_bias_initializer: orthogonal_", 3,
     "model.fcnet_bias_initializer: torch's orthogonal_ takes a tensor of 2 or more dimensions, and a bias is a vector "
     "(1 dimension): use one of constant_, normal_, ones_, trunc_normal_, uniform_, zeros_"),
    ("conv_kernel_initializer: eye_", 3,
     "model.conv_kernel_initializer: torch's eye_ takes a tensor of 2 dimensions, and a CNN kernel has 4: use one of "
     "constant_, dirac_, kaiming_normal_, kaiming_uniform_, normal_, ones_, orthogonal_, trunc_normal_, uniform_, "
     "xavier_normal_, xavier_uniform_, zeros_"),
    ("fcnet_kernel_initializer: dirac_", 3,
     "model.fcnet_kernel_initializer: torch's dirac_ takes a tensor of 3, 4 or 5 dimensions, and a layer's weights have "
     "2: use one of constant_, eye_, kaiming_normal_, kaiming_uniform_, normal_, ones_, orthogonal_, sparse_, "
     "trunc_normal_, uniform_, xavier_normal_, xavier_uniform_, zeros_"),
])
def test_an_initializer_torch_would_refuse_for_its_layer_exits_2_at_its_line(write_yaml, model, line, said):
    path = write_yaml(f"environment: {{env: CartPole-v1}}\nmodel:\n  {model}\n")
    (msg,) = errors_of(path)
    assert msg == f"{path}:{line}: {said}"


def test_initializers_with_their_arguments_pass(write_yaml):
    text = ("environment: {env: CartPole-v1}\nmodel:\n  fcnet_kernel_initializer: orthogonal_\n"
            "  fcnet_kernel_initializer_kwargs: {gain: 1.41}\n  fcnet_bias_initializer: constant_\n"
            "  fcnet_bias_initializer_kwargs: {val: 0.0}\n  head_fcnet_kernel_initializer: kaiming_uniform_\n"
            "  head_fcnet_kernel_initializer_kwargs: {a: 0, mode: fan_out, nonlinearity: relu}\n"
            "  conv_kernel_initializer: dirac_\n  conv_kernel_initializer_kwargs: {groups: 1}\n"
            "  use_lstm: true\n  lstm_kernel_initializer: sparse_\n"
            "  lstm_kernel_initializer_kwargs: {sparsity: 0.1, std: 0.01}\n")
    assert load_config(write_yaml(text)).warnings == []


def test_the_initializer_table_agrees_with_torch():
    """Each initializer's arguments, the required ones, and the tensor dimensions it takes, as torch has them."""
    import inspect

    import torch

    from raytrain.config.initializers import INITIALIZERS, takes_dimensions

    for name, spec in INITIALIZERS.items():
        function = getattr(torch.nn.init, name)
        params = list(inspect.signature(function).parameters.values())[1:]  # the tensor first
        assert set(spec.arguments) | {"generator"} >= {p.name for p in params} >= set(spec.arguments), name
        assert spec.required == tuple(p.name for p in params if p.default is p.empty), name
        kwargs = {key: 0.1 for key in spec.required}
        for dims in (1, 2, 3, 4, 5):
            try:
                function(torch.empty(*[4] * dims), **kwargs)
                took = True
            except ValueError:
                took = False
            assert took == takes_dimensions(name, dims), (name, dims)


def test_the_network_built_with_what_the_check_passes_builds(write_yaml):
    """What the initializer check lets through, RLlib builds (here, without Ray)."""
    from raytrain.rllib.fit import built_shapes

    text = ("environment: {env: CartPole-v1}\nmodel:\n  fcnet_kernel_initializer: sparse_\n"
            "  fcnet_kernel_initializer_kwargs: {sparsity: 0.1}\n  fcnet_bias_initializer: constant_\n"
            "  fcnet_bias_initializer_kwargs: {val: 0.1}\n  head_fcnet_kernel_initializer: kaiming_normal_\n"
            "  head_fcnet_kernel_initializer_kwargs: {a: 0.01, mode: fan_in, nonlinearity: leaky_relu}\n")
    assert built_shapes(load_config(write_yaml(text)).config)


@pytest.mark.parametrize(("text", "line", "said"), [
    ("model:\n  fcnet_kernel_initializer_kwargs: {gain: 1.41}\n", 3,
     "model.fcnet_kernel_initializer_kwargs: has no effect without model.fcnet_kernel_initializer (RLlib passes them "
     "to that initializer only, and layers keep torch's default initialization): set it, e.g. "
     "fcnet_kernel_initializer: orthogonal_, or leave these out"),
    ("training:\n  use_kl_loss: false\n  kl_coeff: 0.3\n", 4,
     "training.kl_coeff: has no effect with training.use_kl_loss: false (no KL term in the loss): set use_kl_loss: "
     "true, or leave it out"),
    ("training:\n  use_kl_loss: false\n  kl_target: 0.02\n", 4,
     "training.kl_target: has no effect with training.use_kl_loss: false (no KL term in the loss): set use_kl_loss: "
     "true, or leave it out"),
    ("model:\n  lstm_cell_size: 64\n", 3,
     "model.lstm_cell_size: has no effect without model.use_lstm: true (the network has no LSTM): set use_lstm: true, "
     "or leave it out"),
    ("model:\n  use_lstm: false\n  max_seq_len: 20\n", 4,
     "model.max_seq_len: has no effect without model.use_lstm: true (the network has no LSTM): set use_lstm: true, "
     "or leave it out"),
    ("training:\n  grad_clip_by: norm\n", 3,
     "training.grad_clip_by: has no effect without training.grad_clip (no gradient is clipped): set grad_clip, e.g. "
     "0.5, or leave it out"),
])
def test_a_setting_another_setting_turns_off_is_warned_of(write_yaml, text, line, said):
    """RLlib reads each of these only when the other is set: each was dropped without a word."""
    path = write_yaml("environment: {env: CartPole-v1}\n" + text)
    assert load_config(path).warnings == [f"warning: {path}:{line}: {said}"]


def test_settings_their_switch_turns_on_are_not_warned_of(write_yaml):
    text = ("environment: {env: CartPole-v1}\ntraining: {kl_coeff: 0.3, grad_clip: 0.5, grad_clip_by: norm}\n"
            "model: {use_lstm: true, lstm_cell_size: 64, max_seq_len: 20}\n")
    assert load_config(write_yaml(text)).warnings == []


def test_free_log_std_with_actions_that_have_no_gaussian_exits_2_before_ray(obs_envs, write_yaml):
    """RLlib asserted `free_log_std is only supported for DiagGaussian action distributions` when it built the
    network in every learner, once Ray had started, exit 1."""
    from typer.testing import CliRunner

    from raytrain.cli import app

    storage = obs_envs / "runs"
    path = write_yaml(f"experiment: {{storage_path: {storage}}}\nenvironment:\n  env: CartPole-v1\n"
                      "model:\n  free_log_std: true\n")
    said = (f"{path}:5: model.free_log_std: is for continuous actions (a Gaussian's log-std learned apart from the "
            "observation), and the env's action space Discrete(2) has no Gaussian: leave it out")
    for args in (["train", str(path)], ["config", "validate", str(path)]):
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 2, result.output
        assert said in " ".join(result.output.split()), result.output
    assert starts == [] and not storage.exists()
    pendulum = load_config(write_yaml("environment: {env: Pendulum-v1}\nmodel: {free_log_std: true}\n"))
    from raytrain.rllib.fit import observation_issue

    assert observation_issue(pendulum.config, pendulum.source) is None


@pytest.mark.parametrize(("env", "model", "said"), [
    ("CartPole-v1", "conv_filters: [[16, 4, 2]]\n  conv_activation: relu\n  fcnet_hiddens: [32]", [
        ("model.conv_filters", 5, "has no effect: the network's observations (Box(4,) float32) are a vector, which "
         "RLlib's encoder takes with an MLP (model.fcnet_*), not a CNN: leave it out"),
        ("model.conv_activation", 6, "has no effect: the network's observations (Box(4,) float32) are a vector, which "
         "RLlib's encoder takes with an MLP (model.fcnet_*), not a CNN: leave it out")]),
    ("obs_walks:ImageWalk", "fcnet_hiddens: [32]\n  conv_activation: relu", [
        ("model.fcnet_hiddens", 5, "has no effect: the network's observations (Box(42, 42, 3) float32) are images, "
         "which RLlib's encoder takes with a CNN (model.conv_*; model.head_fcnet_* shape the heads after it): leave it "
         "out")]),
    ("CartPole-v1", "log_std_clip_param: 5", [
        ("model.log_std_clip_param", 5, "has no effect: it clips a Gaussian's log-std, and the env's action space "
         "Discrete(2) has no Gaussian: leave it out")]),
    ("Pendulum-v1", "log_std_clip_param: 5\n  fcnet_hiddens: [32]", []),
])
def test_a_model_setting_the_envs_network_never_reads_is_warned_of(obs_envs, write_yaml, env, model, said):
    """RLlib builds an MLP for vector observations, a CNN for images, and clips a log-std only for a Gaussian: the
    others' settings were dropped without a word (CNN filters on CartPole, `validate` said ok)."""
    from typer.testing import CliRunner

    from raytrain.cli import app

    path = write_yaml(f"experiment: {{storage_path: {obs_envs / 'runs'}}}\nenvironment: {{env: '{env}'}}\n"
                      f"training: {{train_batch_size: 200, minibatch_size: 100}}\nmodel:\n  {model}\n")
    result = CliRunner().invoke(app, ["config", "validate", str(path)])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.output.splitlines() if line.startswith("warning:")]
    assert lines == [f"warning: {path}:{line}: {key}: {why}" for key, line, why in said], result.output
    assert starts == []


def test_a_sweeps_model_setting_the_envs_network_never_reads_is_warned_of(obs_envs, write_yaml):
    """The base config's setting at its line; a searched one at the search, as a sweep of trials that train alike."""
    from typer.testing import CliRunner

    from raytrain.cli import app

    base = write_yaml(f"experiment: {{storage_path: {obs_envs / 'runs'}}}\nenvironment: {{env: CartPole-v1}}\n"
                      "training: {train_batch_size: 200, minibatch_size: 100}\nmodel:\n  conv_filters: [[16, 4, 2]]\n"
                      "stop: {training_iteration: 2}\n")
    sweep = obs_envs / "sweep.yaml"
    sweep.write_text(f"base: {base.name}\nsearch: {{num_samples: 2}}\ncheckpoint: {{storage_path: {obs_envs / 'runs'}}}\n"
                     "space:\n  model.conv_activation: {distribution: choice, values: [relu, tanh]}\n")
    result = CliRunner().invoke(app, ["config", "validate", str(sweep)])
    assert result.exit_code == 0, result.output
    vector = ("has no effect: the network's observations (Box(4,) float32) are a vector, which RLlib's encoder takes "
              "with an MLP (model.fcnet_*), not a CNN: leave it out")
    lines = [line for line in result.output.splitlines() if line.startswith("warning:")]
    assert lines == [f"warning: {base}:5: model.conv_filters: {vector}",
                     f"warning: {sweep}:5: space.model.conv_activation: is searched, and no trial reads it: it {vector}; "
                     "the sweep would rank noise"], result.output
    assert starts == []


def test_a_search_in_a_train_configs_env_config_is_warned_of(write_yaml):
    """RLlib's old YAML ran through Tune, which expanded `{grid_search: [...]}` anywhere in the config: here the env
    got the mapping itself (gymnasium.make's max_episode_steps={'grid_search': ...}), and `validate` said ok."""
    path = write_yaml("environment:\n  env: CartPole-v1\n  env_config:\n    max_episode_steps: {grid_search: [30, 90]}\n")
    assert load_config(path).warnings == [
        f"warning: {path}:4: environment.env_config.max_episode_steps: is a search, and the env gets it as this mapping "
        "(neither RLlib nor raytrain expands a search in env_config): to try each value, search it under a sweep's "
        "space: {environment.env_config.max_episode_steps: {distribution: grid, values: [30, 90]}}"]
    plain = write_yaml("environment:\n  env: CartPole-v1\n  env_config: {max_episode_steps: 30}\n")
    assert load_config(plain).warnings == []


def test_rllibs_evaluation_config_is_told_raytrains_setting(write_yaml):
    """It said "unknown key; did you mean 'evaluation_duration'?"."""
    path = write_yaml("environment: {env: CartPole-v1}\nevaluation:\n  evaluation_interval: 1\n"
                      "  evaluation_config: {explore: false}\n")
    (msg,) = errors_of(path)
    assert msg == (f"{path}:4: evaluation.evaluation_config: unknown key; RLlib's evaluation_config (settings that "
                   "differ in evaluation) is not taken whole here: greedy evaluation is evaluation.evaluation_explore: "
                   "false")

"""Sweep files: schema, checks before anything starts, and the Tune objects each mode builds (golden)."""

import json
import re
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from raytrain.config.sweep_load import load_sweep
from raytrain.errors import ConfigError
from raytrain.tune.build import build_scheduler, build_search, plan

BASE = """
experiment: {name: base, seed: 1}
environment: {env: CartPole-v1}
training: {train_batch_size: 400, minibatch_size: 100, lr: 0.001}
stop: {training_iteration: 5}
"""


@pytest.fixture
def sweep_file(tmp_path):
    (tmp_path / "base.yaml").write_text(BASE)

    def write(text: str):
        path = tmp_path / "sweep.yaml"
        # A test that writes its own `checkpoint:` gets only that one (a key given twice is an error).
        default = "" if "\ncheckpoint:" in "\n" + text else f"checkpoint: {{storage_path: {tmp_path / 'results'}}}\n"
        path.write_text("base: base.yaml\n" + default + text)
        return path

    return write


@pytest.mark.parametrize("algorithm, setting, expected", [
    ("pbt", "", True), ("pb2", "", True), ("random", "", False), ("asha", "", False),
    ("pbt", "reuse_actors: false\n", False), ("random", "reuse_actors: true\n", True),
])
def test_reuse_actors_defaults_on_for_population_based_sweeps_only(sweep_file, algorithm, setting, expected):
    """PBT and PB2 pause and resume trials at every exploit: reusing the actor saves a process and a build."""
    sections = {
        "pbt": "pbt: {hyperparam_mutations: {training.lr: {distribution: loguniform, low: 0.0001, high: 0.01}}}\n",
        "pb2": "pb2: {hyperparam_bounds: {training.lr: [0.0001, 0.01]}}\n",
        "random": "space: {training.lr: {distribution: loguniform, low: 0.0001, high: 0.01}}\n",
        "asha": "space: {training.lr: {distribution: loguniform, low: 0.0001, high: 0.01}}\n",
    }
    path = sweep_file(f"name: r\nsearch: {{algorithm: {algorithm}, num_samples: 2}}\n" + sections[algorithm] + setting)
    assert plan(load_sweep(path))["tune_config"]["reuse_actors"] is expected


def errors(path) -> str:
    with pytest.raises(ConfigError) as info:
        load_sweep(path)
    return "\n".join(str(i) for i in info.value.issues)


def test_pbt_plan_golden(sweep_file, tmp_path):
    path = sweep_file(
        "name: p\nsearch: {algorithm: pbt, num_samples: 3, seed: 4}\n"
        "space:\n  training.lr: {distribution: loguniform, low: 0.0001, high: 0.01}\n"
        "pbt:\n  perturbation_interval: 4\n  quantile_fraction: 0.5\n  hyperparam_mutations:\n"
        "    training.lr: {distribution: loguniform, low: 0.0001, high: 0.01}\n"
        "    training.num_epochs: [2, 4, 8]\n"
        "checkpoint: {storage_path: " + str(tmp_path / "results") + ", frequency: 2, num_to_keep: 3}\n"
        "failure: {max_failures: 3}\n"
    )
    p = plan(load_sweep(path))
    assert p["trainable"] == "raytrain.tune.trainable:RaytrainPPO"
    assert p["param_space"]["raytrain"]["overrides"] == {
        "training.lr": {"loguniform": [0.0001, 0.01]},
        "training.num_epochs": {"choice": [2, 4, 8]},
        "experiment.seed": {"randint": [0, 1000000]},
    }
    assert p["param_space"]["raytrain"]["base"]["training"] == {"lr": 0.001, "train_batch_size": 400, "minibatch_size": 100}
    assert p["tune_config"] == {
        "metric": "raytrain/episode_return_mean_100", "mode": "max", "num_samples": 3,
        "max_concurrent_trials": None, "time_budget_s": None, "reuse_actors": True,  # PBT's default
    }
    assert p["scheduler"] == {
        "class": "PopulationBasedTraining",
        "kwargs": {
            "time_attr": "training_iteration", "perturbation_interval": 4.0, "burn_in_period": 0.0,
            "hyperparam_mutations": {"training.lr": {"loguniform": [0.0001, 0.01]}, "training.num_epochs": {"choice": [2, 4, 8]}},
            "quantile_fraction": 0.5, "resample_probability": 0.25, "perturbation_factors": [1.2, 0.8],
            "custom_explore_fn": None, "synch": False,
        },
    }
    assert p["search_alg"] == {"class": "BasicVariantGenerator", "kwargs": {"random_state": 4}}
    assert p["run_config"] == {
        "name": "p", "storage_path": str(tmp_path / "results"), "stop": {"training_iteration": 5.0},
        "checkpoint_config": {"num_to_keep": 3, "checkpoint_frequency": 2, "checkpoint_at_end": True},
        "failure_config": {"max_failures": 3},
    }
    scheduler = build_scheduler(p["scheduler"])
    assert type(scheduler).__name__ == "RaytrainPBT"  # Tune's PopulationBasedTraining (raytrain.tune.schedulers)
    assert scheduler._perturbation_interval == 4.0
    assert scheduler._quantile_fraction == 0.5
    assert set(scheduler._hyperparam_mutations["raytrain"]["overrides"]) == {"training.lr", "training.num_epochs"}
    json.dumps(p)  # the plan is data


def test_asha_plan(sweep_file):
    path = sweep_file(
        "search: {algorithm: asha, num_samples: 6, max_concurrent_trials: 2}\n"
        "space: {training.lr: {distribution: uniform, low: 0.0001, high: 0.001}}\n"
        "asha: {max_t: 50, grace_period: 5, reduction_factor: 3}\n"
    )
    loaded = load_sweep(path)
    assert loaded.name == "base_asha"
    p = plan(loaded)
    assert p["scheduler"] == {"class": "ASHAScheduler", "kwargs": {"time_attr": "training_iteration", "max_t": 50.0, "grace_period": 5.0, "reduction_factor": 3.0}}
    s = build_scheduler(p["scheduler"])
    assert s._max_t == 50 and s._reduction_factor == 3
    assert p["tune_config"]["max_concurrent_trials"] == 2


def test_optuna_plan_with_asha_pruner(sweep_file, tmp_path):
    path = sweep_file(
        "name: o\nsearch: {algorithm: optuna, num_samples: 5, seed: 3}\n"
        "space:\n  training.lr: {distribution: loguniform, low: 0.0001, high: 0.01}\n"
        "  model.fcnet_hiddens: {distribution: choice, values: [[32], [64, 64]]}\n"
        "optuna: {sampler: tpe, pruner: asha, points_to_evaluate: [{training.lr: 0.001, model.fcnet_hiddens: [32]}]}\n"
        "asha: {max_t: 20}\n"
    )
    p = plan(load_sweep(path))
    assert "experiment.seed" not in p["param_space"]["raytrain"]["overrides"]  # Optuna must not tune the seed
    assert p["search_alg"]["class"] == "OptunaSearch"
    assert p["search_alg"]["kwargs"] == {
        "sampler": "tpe", "seed": 3, "study_name": "o",
        "storage": f"sqlite:///{tmp_path / 'results' / 'o' / 'optuna.db'}",
        "points_to_evaluate": [{"raytrain": {"overrides": {"training.lr": 0.001, "model.fcnet_hiddens": [32]}}}],
    }
    assert p["scheduler"]["class"] == "ASHAScheduler" and p["scheduler"]["kwargs"]["max_t"] == 20.0
    search = build_search(p["search_alg"])
    from ray.tune.search.optuna import OptunaSearch

    assert isinstance(search, OptunaSearch) and type(search).__name__ == "ResumableOptunaSearch"
    assert (tmp_path / "results" / "o").is_dir()


@pytest.mark.parametrize("sampler,cls", [("cmaes", "CmaEsSampler"), ("random", "RandomSampler"), ("nsga2", "NSGAIISampler")])
def test_optuna_samplers(sweep_file, sampler, cls):
    path = sweep_file(f"search: {{algorithm: optuna}}\nspace: {{training.lr: {{distribution: uniform, low: 0.0001, high: 0.001}}}}\noptuna: {{sampler: {sampler}, seed: 1}}\n")
    search = build_search(plan(load_sweep(path))["search_alg"])
    assert type(search._sampler).__name__ == cls


def test_grid_plan(sweep_file):
    path = sweep_file("search: {algorithm: grid}\nspace: {training.num_epochs: {distribution: grid, values: [1, 2, 3]}}\n")
    p = plan(load_sweep(path))
    assert p["param_space"]["raytrain"]["overrides"]["training.num_epochs"] == {"grid_search": [1, 2, 3]}
    assert p["scheduler"] is None


def test_set_and_stop_override_the_base(sweep_file):
    path = sweep_file("set: {training.gamma: 0.9, env_runners: {num_envs_per_env_runner: 3}, experiment.return_window: 20, "
                      "experiment.seed: 3}\nstop: {training_iteration: 9}\n")
    cfg = load_sweep(path).base.config
    assert cfg.training.gamma == 0.9 and cfg.env_runners.num_envs_per_env_runner == 3
    assert cfg.experiment.return_window == 20 and cfg.experiment.seed == 3
    assert cfg.stop == {"training_iteration": 9}


def test_embedded_train_config(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(f"train:\n  environment: {{env: CartPole-v1}}\n  training: {{lr: 0.01}}\ncheckpoint: {{storage_path: {tmp_path}}}\n")
    assert load_sweep(path).base.config.training.lr == 0.01
    path.write_text(f"train:\n  environment: {{env: CartPole-v1}}\n  training: {{lrr: 0.01}}\ncheckpoint: {{storage_path: {tmp_path}}}\n")
    msg = errors(path)
    assert f"{path}:3: training.lrr: unknown key; did you mean 'lr'?" in msg


@pytest.mark.parametrize(
    "text,expected",
    [
        ("search: {algorithm: pbt}\npbt: {hyperparam_mutations: {training.lr: [0.1]}}\noptuna: {sampler: tpe}\n", "cannot be combined with a search algorithm"),
        ("search: {algorithm: pbt}\npbt: {hyperparam_mutations: {training.lrr: [0.001]}}\n", "training.lrr: is not a key of the train config; did you mean 'training.lr'?"),
        ("search: {algorithm: pbt}\npbt: {hyperparam_mutations: {training.num_sgd_iter: [2]}}\n", "search over training.num_epochs instead"),
        ("search: {algorithm: pbt}\npbt: {}\n", "PBT needs pbt.hyperparam_mutations"),
        ("search: {algorithm: pbt}\npbt: {hyperparam_mutations: {training.lr: [0.001]}}\ncheckpoint: {num_to_keep: 2}\n", "too few for PBT"),
        ("search: {algorithm: random}\nasha: {max_t: 3}\n", "search.algorithm is random"),
        ("search: {algorithm: optuna}\nspace: {training.lr: {distribution: grid, values: [0.1, 0.2]}}\n", "Optuna cannot sample a grid"),
        # Tune's Optuna searcher refuses it at the sweep's start (`Found delimiter / in key`).
        ("search: {algorithm: optuna}\nspace: {environment.env_config.a/b: {distribution: choice, values: [1, 2]}}\n",
         "space.environment.env_config.a/b: Optuna cannot search a key that holds `/`"),
        ("search: {algorithm: grid}\nspace: {training.lr: {distribution: uniform, low: 0.1, high: 0.2}}\n", "needs every space entry to be `distribution: grid`"),
        ("search: {metric: episode_reward_mean}\n", "search.metric: is a metric PPO never reports"),
        ("space: {training.minibatch_size: {distribution: choice, values: [100, 800]}}\n", "with training.minibatch_size = 800 a trial's config is invalid"),
        ("space: {training.lr: {distribution: uniform, low: 0.2, high: 0.1}}\n", "high (0.1) must be above low (0.2)"),
        ("space: {training.lr: {distribution: gaussian, mu: 1}}\n", "a distribution needs `distribution:`"),
        ("checkpoint: {storage_path: relative/dir}\n", "checkpoint.storage_path: must be an absolute path"),
        ("searc: {}\n", "searc: unknown key; did you mean 'search'?"),
        # With no key near it, the error lists the keys of that place, as an unknown section of a train file does.
        ("foo: {}\n", "foo: unknown key; valid keys: name, base, train, set, search, space, pbt, pb2, asha, optuna, "
         "checkpoint, failure, stop, time_budget_s, reuse_actors"),
        ("search: {algorithm: random, zzz: 1}\n", "search.zzz: unknown key; valid keys: algorithm, num_samples, max_concurrent_trials, "
         "metric, mode, seed"),
        # What a trial does not use is refused with where it goes, not dropped.
        ("set: {stop.training_iteration: 2}\n", "set.stop.training_iteration: is not a trial setting: a trial stops on "
         "the sweep's own top-level `stop:` (`stop: {training_iteration: ...}`)"),
        ("set: {experiment.checkpoint_frequency: 1}\n", "set.experiment.checkpoint_frequency: is not used by a sweep "
         "(its experiment folder and checkpoints are its own): write checkpoint.frequency in the sweep file"),
        ("set: {experiment: {num_to_keep: 2}}\n", "write checkpoint.num_to_keep in the sweep file"),
        ("set: {experiment.checkpoint_at_end: false}\n", "write checkpoint.at_end in the sweep file"),
        ("set: {experiment.storage_path: /tmp}\n", "write checkpoint.storage_path in the sweep file"),
        ("set: {experiment.name: x}\n", "set.experiment.name: is not used by a sweep"),
        ("space: {experiment.return_window: {distribution: choice, values: [10, 20]}}\n",
         "space.experiment.return_window: is not searchable: of `experiment`, a sweep varies only experiment.seed"),
        ("space: {environment.env: {distribution: choice, values: [CartPole-v1]}}\n",
         "space.environment.env: is not a trial setting: a sweep trains the base config's env"),
    ],
)
def test_invalid_combinations_are_errors(sweep_file, text, expected):
    assert expected in errors(sweep_file(text))


def test_unwritable_storage_path(tmp_path):
    (tmp_path / "base.yaml").write_text(BASE)
    blocker = tmp_path / "file"
    blocker.write_text("x")
    path = tmp_path / "s.yaml"
    path.write_text(f"base: base.yaml\ncheckpoint: {{storage_path: {blocker}/sub}}\n")
    assert f"checkpoint.storage_path: not writable: {blocker} is not a directory" in errors(path)


def test_errors_name_the_line(sweep_file):
    path = sweep_file("search: {algorithm: pbt}\npbt:\n  hyperparam_mutations:\n    training.lrr: [0.001]\n")
    assert f"{path}:6: pbt.hyperparam_mutations.training.lrr:" in errors(path)


def test_pb2_without_its_dependency(sweep_file, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "GPy", None)  # what an environment without GPy looks like to `import GPy`
    path = sweep_file("search: {algorithm: pb2}\npb2: {hyperparam_bounds: {training.lr: [0.0001, 0.01]}}\n")
    assert "pb2 needs the GPy and scikit-learn packages: pip install 'raytrain[pb2]'" in errors(path)


def test_pb2_plan(sweep_file):
    path = sweep_file("search: {algorithm: pb2, num_samples: 2}\npb2: {perturbation_interval: 3, hyperparam_bounds: {training.lr: [0.0001, 0.01]}}\n")
    p = plan(load_sweep(path))
    assert p["scheduler"] == {"class": "PB2", "kwargs": {"time_attr": "training_iteration", "perturbation_interval": 3.0, "quantile_fraction": 0.25, "hyperparam_bounds": {"training.lr": [0.0001, 0.01]}, "synch": False}}
    assert p["param_space"]["raytrain"]["overrides"]["training.lr"] == {"uniform": [0.0001, 0.01]}
    scheduler = build_scheduler(p["scheduler"])
    assert type(scheduler).__name__ == "RaytrainPB2"  # Tune's PB2 (raytrain.tune.schedulers)


def test_optuna_resume_when_the_study_is_ahead_of_the_searcher_state(tmp_path):
    """CI found it: the study marked a trial COMPLETE, the driver died before Tune saved its state.

    The resumed sweep re-runs that trial from an older checkpoint; its reports must not end the sweep
    (Optuna raised UpdateFinishedTrialError), and the study keeps the outcome it had.
    """
    import optuna
    from ray import tune

    from raytrain.tune.optuna_search import ResumableOptunaSearch

    def searcher():
        s = ResumableOptunaSearch(
            space={"lr": tune.loguniform(1e-4, 1e-3)},
            metric="m",
            mode="max",
            study_name="s",
            storage=optuna.storages.RDBStorage(f"sqlite:///{tmp_path / 'optuna.db'}"),
            seed=0,
        )
        return s

    first = searcher()
    first.suggest("a")
    first.suggest("b")
    first.on_trial_result("a", {"m": 1.0, "training_iteration": 1})
    first.save(str(tmp_path / "state.pkl"))  # Tune's last saved state: both trials running
    first.on_trial_complete("a", {"m": 5.0, "training_iteration": 9})  # then the study moved on; then the crash

    resumed = searcher()
    resumed.restore(str(tmp_path / "state.pkl"))
    resumed.on_trial_result("a", {"m": 2.0, "training_iteration": 2})  # raised before
    resumed.on_trial_complete("a", {"m": 4.0, "training_iteration": 9})
    resumed.on_trial_result("b", {"m": 3.0, "training_iteration": 2})
    resumed.on_trial_complete("b", {"m": 3.0, "training_iteration": 9})
    study = optuna.load_study(study_name="s", storage=f"sqlite:///{tmp_path / 'optuna.db'}")
    assert [(t.state.name, t.value) for t in study.trials] == [("COMPLETE", 5.0), ("COMPLETE", 3.0)]


@pytest.mark.parametrize("config", ["ppo_pbt.yaml", "ppo_optuna.yaml"])
def test_a_submitted_sweep_travels_as_one_yaml_that_loads_to_the_same_sweep(config, tmp_path):
    """`tune --submit` ships the sweep with its base config embedded; the head must read the same sweep."""
    import yaml

    from raytrain.tune.jobs import job_sweep, submission_id

    configs = Path(__file__).resolve().parents[2] / "configs"
    loaded = load_sweep(configs / config, ["name=sent"])
    shipped = tmp_path / "sweep.yaml"
    shipped.write_text(yaml.safe_dump(job_sweep(loaded), sort_keys=False))
    again = load_sweep(shipped)
    assert again.name == "sent"
    assert again.base.config.to_yaml_dict() == loaded.base.config.to_yaml_dict()
    assert plan(again)["param_space"] == plan(loaded)["param_space"]
    assert plan(again)["scheduler"] == plan(loaded)["scheduler"]
    assert re.fullmatch(r"raytrain-tune-sent-\d{8}-\d{6}", submission_id("sent"))


def test_pbt_every_option_reaches_tune(sweep_file, tmp_path, monkeypatch):
    """Non-default values for each PBT option, on the plan and on the built scheduler; the explore fn gets the overrides."""
    (tmp_path / "my_explore.py").write_text(
        "seen = []\n"
        "def explore(overrides):\n"
        "    seen.append(dict(overrides))\n"
        "    return {**overrides, 'training.num_epochs': 7}\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    path = sweep_file(
        "search: {algorithm: pbt, num_samples: 2}\n"
        "pbt:\n  time_attr: num_env_steps_sampled_lifetime\n  perturbation_interval: 4000\n  burn_in_period: 8000\n"
        "  quantile_fraction: 0.4\n  resample_probability: 0.6\n  perturbation_factors: [1.5, 0.5]\n"
        "  custom_explore_fn: my_explore:explore\n  synch: true\n"
        "  hyperparam_mutations: {training.lr: [0.001, 0.002]}\n"
        "checkpoint: {num_to_keep: 3}\n"
    )
    p = plan(load_sweep(path))
    assert p["scheduler"]["kwargs"] == {
        "time_attr": "num_env_steps_sampled_lifetime", "perturbation_interval": 4000.0, "burn_in_period": 8000.0,
        "hyperparam_mutations": {"training.lr": {"choice": [0.001, 0.002]}}, "quantile_fraction": 0.4,
        "resample_probability": 0.6, "perturbation_factors": [1.5, 0.5], "custom_explore_fn": "my_explore:explore",
        "synch": True,
    }
    s = build_scheduler(p["scheduler"])
    assert type(s).__name__ == "RaytrainPBT"
    assert (s._time_attr, s._perturbation_interval, s._burn_in_period) == ("num_env_steps_sampled_lifetime", 4000.0, 8000.0)
    assert (s._quantile_fraction, s._resample_probability, s._perturbation_factors, s._synch) == (0.4, 0.6, (1.5, 0.5), True)
    config = {"raytrain": {"base": {}, "overrides": {"training.lr": 0.002, "experiment.seed": 5}}}
    out = s._custom_explore_fn(config)
    import my_explore

    assert my_explore.seen == [{"training.lr": 0.002, "experiment.seed": 5}]
    assert out["raytrain"]["overrides"] == {"training.lr": 0.002, "experiment.seed": 5, "training.num_epochs": 7}


def test_pbt_explore_fn_that_cannot_be_imported(sweep_file):
    path = sweep_file("search: {algorithm: pbt}\npbt: {custom_explore_fn: 'no_such_module_xyz:f', hyperparam_mutations: {training.lr: [0.001]}}\n")
    assert "pbt.custom_explore_fn: cannot import 'no_such_module_xyz:f'" in errors(path)


@pytest.mark.parametrize(("name", "said"), [
    ("FACTOR", "explore_probe_fns:FACTOR is a float, not a function: PBT calls it with one argument"),
    ("two", "explore_probe_fns:two takes (a, b), and PBT calls it with one argument"),
    ("Explorer", "explore_probe_fns:Explorer is a class, not a function: PBT calls it with one argument"),
])
def test_pbt_explore_fn_that_is_not_a_function_of_one_argument_is_refused(sweep_file, tmp_path, monkeypatch, name,
                                                                            said):
    """Each passed the checks; at the first exploit Tune ended the sweep with its traceback (`TypeError: 'float'
    object is not callable`), exit 1, and `tune status` showed the trials as PENDING at iteration 0."""
    (tmp_path / "explore_probe_fns.py").write_text("FACTOR = 1.2\n\ndef two(a, b):\n    return a\n\n"
                                                   "class Explorer:\n    def __init__(self, config):\n        pass\n")
    monkeypatch.chdir(tmp_path)
    path = sweep_file(f"search: {{algorithm: pbt}}\npbt: {{custom_explore_fn: 'explore_probe_fns:{name}', "
                      "hyperparam_mutations: {training.lr: [0.001]}}\n")
    assert (f"pbt.custom_explore_fn: {said} (the trial's overrides, a mapping of dotted keys to values) and takes the "
            "mapping it returns: name a function of one argument") in " ".join(errors(path).split())


def test_pb2_bounds_reach_the_scheduler(sweep_file):
    path = sweep_file("search: {algorithm: pb2, num_samples: 2}\npb2: {quantile_fraction: 0.5, synch: true, hyperparam_bounds: {training.lr: [0.0001, 0.01], training.gamma: [0.9, 0.99]}}\n")
    s = build_scheduler(plan(load_sweep(path))["scheduler"])
    assert s._hyperparam_bounds == {"raytrain": {"overrides": {"training.lr": [0.0001, 0.01], "training.gamma": [0.9, 0.99]}}}
    assert (s._quantile_fraction, s._synch) == (0.5, True)


@pytest.mark.parametrize(("space", "drawn"), [
    ("{distribution: loguniform, low: 0.00001, high: 0.1}", "[1e-05, 0.1]"),
    ("{distribution: choice, values: [0.0001, 0.05]}", "[0.0001, 0.05]"),
])
def test_a_pb2_start_searched_outside_its_bounds_is_warned_of(sweep_file, space, drawn):
    """space: wins over the bounds for a trial's start, and PB2 explores only its bottom trials: a top trial kept a
    value outside the bounds to the end, without a word."""
    path = sweep_file("search: {algorithm: pb2, num_samples: 2}\n"
                      f"space:\n  training.lr: {space}\n"
                      "pb2:\n  hyperparam_bounds:\n    training.lr: [0.0001, 0.01]\n")
    found = [w for w in load_sweep(path).warnings if "hyperparam_bounds" in w]
    assert found == [
        f"warning: {path}:5: space.training.lr: draws trials' starts from {drawn}, outside pb2.hyperparam_bounds "
        f"[0.0001, 0.01] ({path}:8): PB2 explores only its bottom trials, so a top trial keeps such a value to the "
        "end; draw within the bounds, or leave training.lr out of space: (PB2 then draws each start within them)"]
    inside = sweep_file("search: {algorithm: pb2, num_samples: 2}\n"
                        "space:\n  training.lr: {distribution: loguniform, low: 0.0001, high: 0.01}\n"
                        "pb2:\n  hyperparam_bounds:\n    training.lr: [0.0001, 0.01]\n")
    assert [w for w in load_sweep(inside).warnings if "hyperparam_bounds" in w] == []


def test_pb2_keeps_explored_values_within_the_bounds(sweep_file):
    """Tune's PB2 proposes values through float32: a value at the low bound 1e-4 came back as 9.9999997e-05."""
    import pickle

    import numpy as np

    path = sweep_file("search: {algorithm: pb2}\npb2: {hyperparam_bounds: {training.lr: [0.0001, 0.01], training.gamma: [0.9, 0.99]}}\n")
    s = pickle.loads(pickle.dumps(build_scheduler(plan(load_sweep(path))["scheduler"])))
    proposed = {"raytrain": {"overrides": {"training.lr": float(np.float32(0.0001)), "training.gamma": float(np.float32(0.99)),
                                           "training.train_batch_size": 64}}, "seed": 3}
    assert proposed["raytrain"]["overrides"]["training.lr"] < 0.0001
    assert s._custom_explore_fn(proposed) == {
        "raytrain": {"overrides": {"training.lr": 0.0001, "training.gamma": 0.99, "training.train_batch_size": 64}}, "seed": 3}
    inside = {"raytrain": {"overrides": {"training.lr": 0.005, "training.gamma": 0.95}}}
    assert s._custom_explore_fn(inside) == {"raytrain": {"overrides": {"training.lr": 0.005, "training.gamma": 0.95}}}


def test_tpe_search_built_with_seed_and_points(sweep_file):
    import optuna

    def first_draws(seed: int) -> list[float]:
        path = sweep_file(
            f"search: {{algorithm: optuna, seed: {seed}}}\nspace: {{training.lr: {{distribution: uniform, low: 0.0001, high: 0.001}}}}\n"
            "optuna: {sampler: tpe, points_to_evaluate: [{training.lr: 0.0005}]}\n"
        )
        search = build_search(plan(load_sweep(path))["search_alg"])
        assert type(search._sampler).__name__ == "TPESampler"
        assert search._points_to_evaluate == [{"raytrain": {"overrides": {"training.lr": 0.0005}}}]
        study = optuna.create_study(sampler=search._sampler)
        return [study.ask().suggest_float("x", 0, 1) for _ in range(3)]

    # The seed reached the sampler: the same seed draws the same values, another seed others.
    assert first_draws(11) == first_draws(11) != first_draws(12)


def test_random_search_plan_and_every_distribution(sweep_file):
    path = sweep_file(
        "search: {algorithm: random, num_samples: 4, seed: 9}\nspace:\n"
        "  training.lr: {distribution: loguniform, low: 0.0001, high: 0.01}\n"
        "  training.gamma: {distribution: uniform, low: 0.9, high: 0.99}\n"
        "  training.clip_param: {distribution: quniform, low: 0.1, high: 0.3, q: 0.05}\n"
        "  training.num_epochs: {distribution: randint, low: 2, high: 9}\n"
        "  model.fcnet_activation: {distribution: choice, values: [tanh, relu]}\n"
    )
    p = plan(load_sweep(path))
    assert p["param_space"]["raytrain"]["overrides"] == {
        "training.lr": {"loguniform": [0.0001, 0.01]},
        "training.gamma": {"uniform": [0.9, 0.99]},
        "training.clip_param": {"quniform": [0.1, 0.3, 0.05]},
        "training.num_epochs": {"randint": [2, 9]},
        "model.fcnet_activation": {"choice": ["tanh", "relu"]},
        "experiment.seed": {"randint": [0, 1000000]},
    }
    assert p["scheduler"] is None
    assert p["search_alg"] == {"class": "BasicVariantGenerator", "kwargs": {"random_state": 9}}
    from ray.tune.search import sample

    from raytrain.sweeps.space import domain

    clip = domain({"quniform": [0.1, 0.3, 0.05]})
    epochs = domain({"randint": [2, 9]})
    assert isinstance(clip, sample.Float) and isinstance(clip.sampler, sample.Quantized) and clip.sampler.q == 0.05
    assert isinstance(epochs, sample.Integer) and (epochs.lower, epochs.upper) == (2, 9)
    values = [clip.sample(random_state=i) for i in range(20)]
    assert all(0.1 - 1e-9 <= v <= 0.3 + 1e-9 and abs(round(v / 0.05) * 0.05 - v) < 1e-9 for v in values)


def test_default_storage_path_is_expanded(tmp_path, monkeypatch):
    """A sweep that does not set checkpoint.storage_path goes to ~/raytrain_results, `~` expanded."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "base.yaml").write_text(BASE)
    (tmp_path / "s.yaml").write_text("base: base.yaml\n")
    loaded = load_sweep(tmp_path / "s.yaml")
    assert loaded.experiment_dir == tmp_path / "home" / "raytrain_results" / "base_random"
    assert not (tmp_path / "~").exists()
    assert not (tmp_path / "home").exists(), "checking a sweep writes nothing; the run makes the folder"


def test_probing_the_storage_path_writes_nothing(tmp_path):
    (tmp_path / "base.yaml").write_text(BASE)
    (tmp_path / "s.yaml").write_text(f"base: base.yaml\ncheckpoint: {{storage_path: {tmp_path / 'new' / 'results'}}}\n")
    load_sweep(tmp_path / "s.yaml", storage="probe")
    assert not (tmp_path / "new").exists()
    blocker = tmp_path / "file"
    blocker.write_text("x")
    (tmp_path / "s.yaml").write_text(f"base: base.yaml\ncheckpoint: {{storage_path: {blocker}/sub}}\n")
    with pytest.raises(ConfigError) as info:
        load_sweep(tmp_path / "s.yaml", storage="probe")
    assert f"checkpoint.storage_path: not writable: {blocker} is not a directory" in str(info.value.issues[0])


# --- issue 11: every number finite with its real bounds; the sweep name is one folder name ----------------


@pytest.mark.parametrize(
    "text,expected",
    [
        ("space: {training.lr: {distribution: uniform, low: .nan, high: 0.1}}\n", ":3: space.training.lr.low: Input should be a finite number"),
        ("space: {training.lr: {distribution: uniform, low: 0.1, high: .inf}}\n", ":3: space.training.lr.high: Input should be a finite number"),
        ("space: {training.lr: {distribution: loguniform, low: 0, high: 0.1}}\n", ":3: space.training.lr.low: Input should be greater than 0"),
        ("space: {training.lr: {distribution: quniform, low: 0.1, high: 0.2, q: .nan}}\n", "space.training.lr.q: Input should be a finite number"),
        ("search: {algorithm: pb2}\npb2: {hyperparam_bounds: {training.lr: [0.01, 0.001]}}\n", ":4: pb2.hyperparam_bounds.training.lr: high (0.001) must be above low (0.01)"),
        ("search: {algorithm: pb2}\npb2: {hyperparam_bounds: {training.lr: [0.001, .inf]}}\n", "pb2.hyperparam_bounds.training.lr.1: Input should be a finite number"),
        ("search: {algorithm: pbt}\npbt: {perturbation_factors: [1.2, -0.8], hyperparam_mutations: {training.lr: [0.1]}}\n", "pbt.perturbation_factors.1: Input should be greater than 0"),
        ("search: {algorithm: pbt}\npbt: {perturbation_interval: .inf, hyperparam_mutations: {training.lr: [0.1]}}\n", "pbt.perturbation_interval: Input should be a finite number"),
        ("search: {algorithm: asha}\nasha: {max_t: 10, grace_period: 20}\n", "asha: grace_period (20) must not exceed max_t (10)"),
        ("search: {seed: -1}\n", ":3: search.seed: Input should be greater than or equal to 0"),
        ("time_budget_s: .inf\n", ":3: time_budget_s: Input should be a finite number"),
        ("stop: {training_iteration: .nan}\n", ":3: stop.training_iteration: Input should be a finite number"),
        ("name: ../../x\n", ":3: name: must be a single folder name"),
        ("name: '.'\n", ":3: name: must be a single folder name"),
        ("name: 'a\\\\b'\n", ":3: name: must be a single folder name"),
    ],
)
def test_sweep_numbers_and_name(sweep_file, text, expected):
    assert expected in errors(sweep_file(text))


@pytest.mark.parametrize(
    "text,expected",
    [
        ("space:\n  training.lr: {distribution: loguniform, low: 0.0001, high: 0.001}\n"
         "  training.gamma: {distribution: uniform, low: 0.99, high: 0.9}\n",
         ":5: space.training.gamma: high (0.9) must be above low (0.99)"),
        ("search: {algorithm: pbt}\npbt:\n  hyperparam_mutations:\n    training.lr: [0.001]\n"
         "    training.num_epochs: {distribution: randint, low: 5, high: 5}\n",
         ":7: pbt.hyperparam_mutations.training.num_epochs: high (5) must be above low (5)"),
        ("search: {algorithm: pb2}\npb2:\n  hyperparam_bounds:\n    training.gamma: [0.9, 0.99]\n    training.lr: [0.01, 0.001]\n",
         ":7: pb2.hyperparam_bounds.training.lr: high (0.001) must be above low (0.01)"),
        # A mutation is a distribution or a list: the error is the one of what was written, not of both.
        ("search: {algorithm: pbt}\npbt:\n  hyperparam_mutations:\n    training.num_epochs: {distribution: randint, low: 2}\n"
         "    training.lr: 0.1\n",
         ":6: pbt.hyperparam_mutations.training.num_epochs.high: is required\n"),
        ("search: {algorithm: pbt}\npbt:\n  hyperparam_mutations:\n    training.num_epochs: {distribution: randint, low: 2, high: 4}\n"
         "    training.lr: 0.1\n",
         ":7: pbt.hyperparam_mutations.training.lr: must be a list of values or a distribution"),
    ],
)
def test_an_empty_range_is_reported_at_its_own_line_and_key(sweep_file, text, expected):
    """It was reported at the line of `space:` (or of the mapping that holds it), as `space: high ...`."""
    msg = errors(sweep_file(text))
    assert expected in msg
    assert "list[any]" not in msg and "valid list (got {" not in msg


def test_a_distribution_is_written_with_distribution_first_as_in_the_file():
    """`config show` and the experiment folder's sweep.yaml write `distribution:` before its bounds."""
    from raytrain.sweeps.space import LogUniform, QUniform, RandInt, Uniform

    for cls, extra in ((Uniform, {}), (LogUniform, {}), (QUniform, {"q": 0.1}), (RandInt, {})):
        dumped = cls.model_validate({"distribution": cls.model_fields["distribution"].annotation.__args__[0],
                                     "low": 1, "high": 2, **extra}).model_dump()
        assert list(dumped)[:3] == ["distribution", "low", "high"], dumped


@pytest.mark.parametrize(
    "base_text,expected",
    [
        ("base: other.yaml\nsearch: {algorithm: random}\n", "is a sweep file (it has base, search), not a train config"),
        ("name: lab\nhead: {host: localhost}\n", "is a cluster file (it has head), not a train config"),
        ("nodes: 2\ncpus_per_node: 4\n", "is a Slurm file (it has cpus_per_node, nodes), not a train config"),
    ],
)
def test_a_base_that_is_another_kind_of_raytrain_file_is_named_as_such(tmp_path, base_text, expected):
    """It gave an `unknown section` error for each of the base's sections and `environment: is required`."""
    from raytrain.config.sweep_load import load_sweep

    (tmp_path / "other.yaml").write_text(base_text)
    path = tmp_path / "sweep.yaml"
    path.write_text("base: other.yaml\nsearch: {algorithm: random, num_samples: 2}\n")
    with pytest.raises(ConfigError) as info:
        load_sweep(path)
    (issue,) = info.value.issues
    assert str(issue).startswith(f"{path}:1: base: {tmp_path / 'other.yaml'} {expected}"), str(issue)
    assert "give the train config" in str(issue)


def _sweep_refused(tmp_path: Path, text: str, **files: str) -> str:
    """The ConfigError of loading sweep.yaml written with `text`, beside `files` (name: text)."""
    from raytrain.config.sweep_load import load_sweep

    for name, content in files.items():
        (tmp_path / name).write_text(content)
    (tmp_path / "sweep.yaml").write_text(text)
    with pytest.raises(ConfigError) as info:
        load_sweep(tmp_path / "sweep.yaml")
    return str(info.value)


def test_a_base_that_is_a_sweep_names_that_sweeps_own_base(tmp_path):
    said = _sweep_refused(tmp_path, "base: pbt.yaml\n", **{"pbt.yaml": "base: cartpole.yaml\nsearch: {algorithm: random}\n"})
    assert said.endswith("; that sweep's own base is cartpole.yaml")


@pytest.mark.parametrize(
    "written,expected",
    [
        ("[0.001, 0.002]", "must be a distribution, e.g. `{distribution: choice, values: [0.001, 0.002]}` (choice, grid, "
         "uniform, loguniform, quniform or randint), not [0.001, 0.002]"),
        ("0.9", "must be a distribution, e.g. `{distribution: choice, values: [...]}`"),
        ("[2024-01-01]", 'values: ["2024-01-01"]}` (choice, grid, uniform, loguniform, quniform or randint), not '
         '["2024-01-01"]'),  # what YAML reads as a date is shown as written, not a crash
    ],
)
def test_a_space_entry_written_as_its_values_says_to_write_a_distribution(sweep_file, written, expected):
    """It said "Input should be a valid dictionary or object to extract fields from"."""
    msg = errors(sweep_file(f"space:\n  training.lr: {written}\n"))
    assert ":4: space.training.lr: must be a distribution, e.g. `{distribution: choice, values: " in msg, msg
    assert expected in msg, msg


def test_a_base_that_is_a_folder_says_so(tmp_path):
    from raytrain.config.sweep_load import load_sweep

    (tmp_path / "configs").mkdir()
    path = tmp_path / "sweep.yaml"
    path.write_text("base: configs\nsearch: {algorithm: random, num_samples: 2}\n")
    with pytest.raises(ConfigError) as info:
        load_sweep(path)
    assert str(info.value) == f"{path}:1: base: {tmp_path / 'configs'} is a folder: give the train config's file in it"


def test_sweep_space_values_are_checked_as_train_values(sweep_file):
    # A sampled value goes through the train schema: a choice of a negative lr is refused before any trial.
    msg = errors(sweep_file("space: {training.lr: {distribution: choice, values: [0.001, -1]}}\n"))
    assert "training.lr" in msg and "greater than 0" in msg


# --- the base config's experiment.storage_path and checkpoint settings -----------------------------------


def test_a_sweep_keeps_its_checkpoints_where_the_base_config_says(tmp_path):
    """A base config that names the lab's shared folder keeps a sweep over it there: the base config's
    experiment.storage_path and checkpoint settings are the sweep's defaults, its own `checkpoint:` wins."""
    shared = tmp_path / "nfs" / "results"
    (tmp_path / "base.yaml").write_text(BASE.replace(
        "experiment: {name: base, seed: 1}",
        f"experiment: {{name: base, seed: 1, storage_path: {shared}, checkpoint_frequency: 3, num_to_keep: 4, "
        "checkpoint_at_end: false}",
    ))
    (tmp_path / "s.yaml").write_text("base: base.yaml\ncheckpoint: {frequency: 7}\n")
    loaded = load_sweep(tmp_path / "s.yaml")
    assert loaded.experiment_dir == shared / "base_random"
    run = plan(loaded)["run_config"]
    assert run["storage_path"] == str(shared)
    assert run["checkpoint_config"] == {"num_to_keep": 4, "checkpoint_frequency": 7, "checkpoint_at_end": False}
    (tmp_path / "s.yaml").write_text(f"base: base.yaml\ncheckpoint: {{storage_path: {tmp_path / 'own'}}}\n")
    assert load_sweep(tmp_path / "s.yaml").experiment_dir == tmp_path / "own" / "base_random"


def test_an_error_in_a_setting_the_sweep_takes_from_its_base_names_the_base_config(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    (tmp_path / "base.yaml").write_text(
        f"experiment:\n  name: base\n  storage_path: {blocker}/sub\n  num_to_keep: 1\nenvironment: {{env: CartPole-v1}}\n"
    )
    (tmp_path / "s.yaml").write_text(
        "base: base.yaml\nsearch: {algorithm: pbt, num_samples: 2}\n"
        "pbt: {hyperparam_mutations: {training.lr: {distribution: loguniform, low: 0.0001, high: 0.01}}}\n"
    )
    found = errors(tmp_path / "s.yaml")
    assert f"base.yaml:3: experiment.storage_path: not writable: {blocker} is not a directory" in found
    assert "base.yaml:4: experiment.num_to_keep: 1 is too few for PBT" in found
    assert "checkpoint." not in found


def test_a_base_whose_keys_hold_a_slash_reaches_optuna_and_each_trial_intact(sweep_file, tmp_path):
    """The shipped configs/ppo_optuna.yaml failed at its start: `Found delimiter / in key`. Optuna's searcher
    flattens the whole Tune space on `/` and refuses a key that holds one, as the base's stop metric
    `raytrain/episode_return_mean_100` does."""
    from ray.tune.search.optuna import OptunaSearch

    from raytrain.tune.build import tune_space
    from raytrain.tune.trainable import trial_config

    path = sweep_file("name: o\nsearch: {algorithm: optuna, num_samples: 2}\n"
                      "space: {training.lr: {distribution: loguniform, low: 0.0001, high: 0.01}}\n")
    (tmp_path / "base.yaml").write_text(BASE.replace("stop: {training_iteration: 5}",
                                                     "stop: {raytrain/episode_return_mean_100: 450, training_iteration: 5}"))
    space = tune_space(plan(load_sweep(path)))
    assert OptunaSearch(metric="m", mode="max").set_search_properties(None, None, space)
    trial = {"raytrain": {**space["raytrain"], "overrides": {"training.lr": 0.002, "experiment.seed": 3}}}
    cfg = trial_config(trial)
    assert cfg.stop == {"raytrain/episode_return_mean_100": 450, "training_iteration": 5}
    assert cfg.training.lr == 0.002 and cfg.experiment.seed == 3


@given(st.recursive(st.none() | st.integers() | st.text(max_size=5),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text("%/2F5a", max_size=6), inner, max_size=3),
                    max_leaves=10))
def test_escaped_keys_hold_no_slash_and_read_back_exactly(data):
    from raytrain.tune import escape_keys, unescape_keys

    escaped = escape_keys(data)
    assert "/" not in json.dumps(_keys(escaped))
    assert unescape_keys(escaped) == data


def _keys(data):
    if isinstance(data, dict):
        return [[k, _keys(v)] for k, v in data.items()]
    return [_keys(v) for v in data] if isinstance(data, list) else None


@pytest.mark.parametrize(("override", "path", "expected"), [
    # Into an entry whose key is a dotted path: it was split, `space: {training: {lr: {high: ...}}}`, and
    # refused as `space.training: a distribution needs distribution:`.
    ("space.training.lr.high=0.02", ("space", "training.lr", "high"), 0.02),
    ("pbt.hyperparam_mutations.training.lr.low=0.0002", ("pbt", "hyperparam_mutations", "training.lr", "low"), 0.0002),
    # A new entry of such a mapping takes the rest of the path as its key.
    ("space.training.gamma={distribution: uniform, low: 0.9, high: 0.99}", ("space", "training.gamma"),
     {"distribution": "uniform", "low": 0.9, "high": 0.99}),
    ("set.training.gamma=0.95", ("set", "training.gamma"), 0.95),
])
def test_set_reaches_the_entries_of_mappings_keyed_by_dotted_paths(sweep_file, override, path, expected):
    from raytrain.config.source import Source, apply_overrides

    # `set:` holds another key than `space:`: one key in both is refused (test_a_setting_both_set_and_searched_...).
    file = sweep_file("name: d\nsearch: {algorithm: pbt, num_samples: 2}\nset: {training.clip_param: 0.2}\n"
                      "space: {training.lr: {distribution: loguniform, low: 0.0001, high: 0.01}}\n"
                      "pbt: {hyperparam_mutations: {training.lr: {distribution: loguniform, low: 0.0001, high: 0.01}}}\n")
    from raytrain.config.sweep_load import DOTTED_KEY_MAPPINGS

    source = Source(yaml.safe_load(file.read_text()), {}, str(file))
    apply_overrides(source, [override], DOTTED_KEY_MAPPINGS)
    node = source.data
    for key in path:
        node = node[key]
    assert node == expected
    assert source.where(path) == f"--set {override}"
    load_sweep(file, [override])  # and the sweep is valid with it


def test_set_into_a_train_config_still_splits_every_dot():
    from raytrain.config.source import Source, apply_overrides

    source = Source({"environment": {"env": "CartPole-v1", "env_config": {"a.b": 1}}}, {}, "f.yaml")
    apply_overrides(source, ["training.lr=0.1", "environment.env_config.a.b=2", "environment.env_config.c.d=3"])
    assert source.data["training"] == {"lr": 0.1}
    assert source.data["environment"]["env_config"] == {"a.b": 2, "c": {"d": 3}}


def test_set_into_a_nested_entry_of_a_dotted_mapping_follows_the_nesting():
    from raytrain.config.source import Source, apply_overrides
    from raytrain.config.sweep_load import DOTTED_KEY_MAPPINGS

    source = Source({"set": {"experiment": {"seed": 1}}}, {}, "f.yaml")
    apply_overrides(source, ["set.experiment.seed=2"], DOTTED_KEY_MAPPINGS)
    assert source.data["set"] == {"experiment": {"seed": 2}}


@pytest.mark.parametrize(("sweep", "warned"), [
    ("search: {algorithm: random, num_samples: 2}\n", True),
    ("search: {algorithm: pbt, num_samples: 2}\npbt: {hyperparam_mutations: {training.lr: [0.001, 0.002]}}\n", True),
    ("search: {algorithm: random, num_samples: 2}\ntime_budget_s: 600\n", False),
    ("search: {algorithm: random, num_samples: 2}\nstop: {training_iteration: 3}\n", False),
    ("search: {algorithm: asha, num_samples: 2}\nasha: {max_t: 10}\n", False),  # ASHA ends every trial at max_t
])
def test_a_sweep_that_nothing_stops_is_warned_of(sweep_file, tmp_path, sweep, warned):
    """A sweep with no stop criteria (its own or its base's) and no time budget trained every trial until Ctrl-C,
    without a word; `raytrain train` warns of the same."""
    (tmp_path / "base.yaml").write_text(BASE.replace("stop: {training_iteration: 5}\n", ""))
    path = sweep_file("name: n\nspace: {training.lr: {distribution: loguniform, low: 0.0001, high: 0.01}}\n" + sweep)
    warning = ("warning: no stop criteria (stop:, here or in the base config) and no time_budget_s: every trial trains "
               "until Ctrl-C")
    assert any(w.startswith(warning) for w in load_sweep(path).warnings) is warned


@pytest.mark.parametrize(("settings", "warned"), [
    ("pbt: {perturbation_interval: 5, hyperparam_mutations: {training.lr: [0.001, 0.002]}}\n", True),
    ("pbt: {perturbation_interval: 8, hyperparam_mutations: {training.lr: [0.001, 0.002]}}\n", True),
    ("pbt: {perturbation_interval: 2, hyperparam_mutations: {training.lr: [0.001, 0.002]}}\n", False),
    ("pbt: {perturbation_interval: 8, time_attr: time_total_s, hyperparam_mutations: {training.lr: [0.001, 0.002]}}\n", False),
])
def test_a_population_sweep_whose_trials_end_before_the_first_perturbation_is_warned_of(sweep_file, settings, warned):
    """PBT with perturbation_interval at or past the trials' last iteration never exploits: a random search."""
    path = sweep_file("name: p\nsearch: {algorithm: pbt, num_samples: 2}\n" + settings)  # the base stops at 5
    warning = "warning: pbt.perturbation_interval"
    found = [w for w in load_sweep(path).warnings if w.startswith(warning)]
    assert bool(found) is warned, found
    if warned:
        assert "is not below stop.training_iteration (5): every trial ends before PBT's first exploit" in found[0]


def test_a_misspelt_base_names_the_file_meant(tmp_path):
    said = _sweep_refused(tmp_path, "base: ppo_cartpol.yaml\nsearch: {algorithm: random, num_samples: 2}\n",
                          **{"ppo_cartpole.yaml": "environment: {env: CartPole-v1}\n"})
    assert said == (f"{tmp_path / 'sweep.yaml'}:1: base: no such file: {tmp_path / 'ppo_cartpol.yaml'}; did you mean "
                    f"{tmp_path / 'ppo_cartpole.yaml'}?")


def test_pbt_perturbations_stay_inside_the_sweep_files_ranges_and_choices(sweep_file):
    """Tune's PBT multiplies a perturbed value by 1.2 or 0.8 whatever its distribution: `training.lambda` in
    uniform(0.9, 1.0) went from 0.96 to 1.15 and 3 of 4 trials failed (lambda <= 1); a choice of strings was
    multiplied too (TypeError: can't multiply sequence by non-int of type 'float'), which ended the whole sweep
    at its first exploit, and a choice of numbers left its values (8 * 1.2 = 10 epochs)."""
    import pickle
    import random

    from ray.tune.schedulers.pbt import _explore  # the explore step Tune's PBT runs at an exploit

    path = sweep_file(
        "search: {algorithm: pbt, num_samples: 4}\npbt:\n  resample_probability: 0.1\n  hyperparam_mutations:\n"
        "    training.lambda: {distribution: uniform, low: 0.9, high: 1.0}\n"
        "    training.lr: {distribution: loguniform, low: 1.0e-4, high: 1.0e-3}\n"
        "    training.num_epochs: {distribution: randint, low: 2, high: 9}\n"
        "    training.clip_param: {distribution: quniform, low: 0.1, high: 0.3, q: 0.05}\n"
        "    model.fcnet_activation: {distribution: choice, values: [tanh, relu]}\n"
        "    training.minibatch_size: [64, 128, 256]\n")
    s = pickle.loads(pickle.dumps(build_scheduler(plan(load_sweep(path))["scheduler"])))
    config = {"raytrain": {"base": {}, "overrides": {
        "training.lambda": 0.99, "training.lr": 9e-4, "training.num_epochs": 8, "training.clip_param": 0.3,
        "model.fcnet_activation": "relu", "training.minibatch_size": 256, "experiment.seed": 3}}}
    random.seed(0)
    seen = set()
    for _ in range(60):
        config, _ = _explore(config, s._hyperparam_mutations, s._resample_probability, s._perturbation_factors,
                             s._custom_explore_fn)
        o = config["raytrain"]["overrides"]
        assert 0.9 <= o["training.lambda"] <= 1.0 and 1e-4 <= o["training.lr"] <= 1e-3, o
        assert isinstance(o["training.num_epochs"], int) and 2 <= o["training.num_epochs"] <= 8, o
        assert 0.1 <= o["training.clip_param"] <= 0.3 and abs(o["training.clip_param"] / 0.05 - round(o["training.clip_param"] / 0.05)) < 1e-9, o
        assert o["model.fcnet_activation"] in ("tanh", "relu") and o["training.minibatch_size"] in (64, 128, 256), o
        assert o["experiment.seed"] == 3
        seen.add((o["training.lambda"], o["model.fcnet_activation"]))
    assert len(seen) > 5  # it did perturb


def test_a_grid_among_pbt_mutations_is_refused_at_its_key(sweep_file):
    """It passed every check; Tune's PBT then failed at the first exploit (TypeError: 'int' object is not subscriptable)."""
    path = sweep_file("search: {algorithm: pbt}\npbt:\n  hyperparam_mutations:\n"
                      "    training.num_epochs: {distribution: grid, values: [2, 4]}\n")
    assert ("pbt.hyperparam_mutations.training.num_epochs: PBT cannot perturb a grid: write {distribution: choice, values: "
            "[...]} (an exploit moves to a neighbouring value), and put the grid under space: to start trials from each "
            "value") in errors(path)


def test_optuna_cmaes_without_its_dependency(sweep_file, monkeypatch):
    """It passed every check; Optuna's CmaEsSampler imports `cmaes` at its first relative sample, so the sweep
    failed after Ray started, at its second trial (ModuleNotFoundError: No module named 'cmaes')."""
    import sys

    monkeypatch.setitem(sys.modules, "cmaes", None)  # what an environment without cmaes looks like to `import cmaes`
    path = sweep_file("search: {algorithm: optuna}\nspace: {training.lr: {distribution: uniform, low: 0.0001, high: 0.001}}\n"
                      "optuna: {sampler: cmaes}\n")
    assert (f"{path}:5: optuna.sampler: Optuna's cmaes sampler needs the cmaes package: pip install 'raytrain[cmaes]' "
            "(or use tpe)") in errors(path)


@pytest.mark.parametrize("where", [
    "search: {algorithm: random}\nspace:\n  %s\n",
    "search: {algorithm: optuna}\nspace:\n  %s\n",
    "search: {algorithm: pbt}\npbt:\n  hyperparam_mutations:\n    %s\n",
])
@pytest.mark.parametrize("dist", [
    "{distribution: uniform, low: 2, high: 10}", "{distribution: loguniform, low: 2, high: 10}",
    "{distribution: quniform, low: 2, high: 10, q: 0.5}",
])
def test_a_continuous_distribution_over_a_whole_number_setting_is_refused_at_its_key(sweep_file, where, dist):
    """Its bounds (2 and 10) were valid trial values, so it passed every check; the first trial drew 5.43 and the
    sweep stopped after Ray started: `<trial>: training.num_epochs: Input should be a valid integer, got a number
    with a fractional part`, with no file or line."""
    path = sweep_file(where % f"training.num_epochs: {dist}")
    said = errors(path)
    assert "training.num_epochs: takes a whole number, and " in said, said
    assert "draws fractions: use {distribution: randint, low: 2, high: 11} (high excluded)" in said, said


def test_pb2_rounds_a_whole_number_setting_it_explores(sweep_file):
    """PB2 explores continuous values: its first trial drew training.num_epochs 5.43 and the sweep stopped after
    Ray started (`Input should be a valid integer`)."""
    import pickle
    import random

    from ray.tune.search.variant_generator import generate_variants

    from raytrain.sweeps.space import domain

    path = sweep_file("search: {algorithm: pb2}\npb2: {hyperparam_bounds: {training.num_epochs: [2, 10], training.lr: [0.0001, 0.01]}}\n")
    p = plan(load_sweep(path))
    assert p["param_space"]["raytrain"]["overrides"]["training.num_epochs"] == {"randint": [2, 11]}
    random.seed(0)
    drawn = {next(generate_variants({"x": domain({"randint": [2, 11]})}))[1]["x"] for _ in range(30)}
    assert drawn <= set(range(2, 11)) and len(drawn) > 3
    s = pickle.loads(pickle.dumps(build_scheduler(p["scheduler"])))
    proposed = {"raytrain": {"overrides": {"training.num_epochs": 5.43, "training.lr": 0.003}}}
    assert s._custom_explore_fn(proposed) == {"raytrain": {"overrides": {"training.num_epochs": 5, "training.lr": 0.003}}}
    high = {"raytrain": {"overrides": {"training.num_epochs": 10.4, "training.lr": 0.003}}}
    assert s._custom_explore_fn(high)["raytrain"]["overrides"]["training.num_epochs"] == 10


def test_pb2_bounds_that_hold_no_whole_number_of_a_whole_number_setting(sweep_file):
    path = sweep_file("search: {algorithm: pb2}\npb2: {hyperparam_bounds: {training.num_epochs: [2.2, 2.8]}}\n")
    assert "pb2.hyperparam_bounds.training.num_epochs: takes a whole number, and [2.2, 2.8] holds none" in errors(path)


def test_a_bad_value_under_set_is_placed_at_its_own_line(sweep_file):
    """`set:` keys are dotted (`training.gamma`): their values' errors were placed at the `set:` line."""
    path = sweep_file("search: {algorithm: random}\nset:\n  training.lr: 0.001\n  training.gamma: 1.5\n"
                      "  env_runners: {num_envs_per_env_runner: abc}\n")
    said = errors(path)
    assert f"{path}:6: training.gamma: Input should be less than or equal to 1" in said, said
    assert f"{path}:7: env_runners.num_envs_per_env_runner: Input should be a valid integer" in said, said


@pytest.mark.parametrize(("search", "warning"), [
    # A return ranked lowest-first: the leaderboard, best.yaml and PBT's exploits would favour the worst trial.
    ("search: {algorithm: random, mode: min}\n", "search.mode: min ranks the trial with the lowest "
     "raytrain/episode_return_mean_100 best, and a return is better higher: the leaderboard, best.yaml and PBT's "
     "exploits would favour the worst trial; use mode: max (or leave it out)"),
    ("search: {algorithm: random, metric: env_runners/episode_return_mean, mode: min}\n", "search.mode: min ranks "
     "the trial with the lowest env_runners/episode_return_mean best"),
    # A loss ranked highest-first, mode left at its default.
    ("search: {algorithm: random, metric: learners/default_policy/total_loss}\n", "search.mode: max (the default) "
     "ranks the trial with the highest learners/default_policy/total_loss best, and a loss is better lower: the "
     "leaderboard, best.yaml and PBT's exploits would favour the worst trial; use mode: min"),
    ("search: {algorithm: random}\n", None),
    ("search: {algorithm: random, metric: learners/default_policy/total_loss, mode: min}\n", None),
])
def test_a_ranking_the_wrong_way_round_is_warned_of(sweep_file, search, warning):
    """`mode: min` on the return was taken without a word, and the sweep's best trial was its worst."""
    path = sweep_file("name: m\nspace: {training.lr: {distribution: loguniform, low: 0.0001, high: 0.01}}\n" + search)
    found = [w for w in load_sweep(path).warnings if "search.mode" in w]
    if warning is None:
        assert found == []
    else:
        assert len(found) == 1 and f"search.mode: {warning.split('search.mode: ', 1)[1]}" in found[0], found
        assert found[0].startswith(f"warning: {path}:5: search.mode: "), found


@pytest.mark.parametrize("setting", [
    "set: {training.lr: 0.001}\n",
    "set: {training: {lr: 0.001}}\n",
])
def test_a_setting_both_set_and_searched_is_refused(sweep_file, setting):
    """`set:` and `space:` on one key: every trial took the searched value, and the set one was dropped unsaid."""
    path = sweep_file("name: b\nsearch: {algorithm: random, num_samples: 2}\n"
                      "space: {training.lr: {distribution: loguniform, low: 0.0001, high: 0.01}}\n" + setting)
    said = errors(path)
    assert (f"{path}:6: set.training.lr: is also searched under space: ({path}:5): every trial would take the searched "
            "value and drop this one; keep one of them") in said, said


@pytest.mark.parametrize(("setting", "line"), [
    ("set:\n  environment.env_config: {max_episode_steps: 50, sutton_barto_reward: true}\n", 8),
    ("set:\n  environment:\n    env_config: {max_episode_steps: 50}\n", 9),
])
def test_a_set_mapping_that_holds_a_searched_key_is_refused(sweep_file, setting, line):
    """Only the same dotted key was refused: a set mapping that holds a searched key lost that value in every
    trial without a word. (A mapping is not searched whole: space: takes environment.env_config.<key>.)"""
    path = sweep_file("name: b\nsearch: {algorithm: random, num_samples: 2}\n"
                      "space:\n  environment.env_config.max_episode_steps: {distribution: choice, values: [30, 90]}\n"
                      + setting)
    text = " ".join(errors(path).split())
    assert (f"{path}:{line}: set.environment.env_config.max_episode_steps: is also searched under space: ({path}:6): "
            "every trial would take the searched value and drop this one; keep one of them") in text, text


@pytest.mark.parametrize(("key", "written", "space"), [
    ("training.lr", "{distribution: loguniform, low: 0.0001, high: 0.01}",
     "{distribution: loguniform, low: 0.0001, high: 0.01}"),
    ("training.lr", "{grid_search: [0.001, 0.01]}", "{distribution: grid, values: [0.001, 0.01]}"),
])
def test_a_search_written_under_set_is_told_to_move_to_space(sweep_file, key, written, space):
    """It said to search it "in a sweep file with base: base.yaml and space: ...", as for a train config: this file
    is that sweep file, and the fix is to move the entry from set: to space:."""
    path = sweep_file(f"name: b\nsearch: {{algorithm: random, num_samples: 2}}\nset:\n  {key}: {written}\n")
    text = " ".join(errors(path).split())
    assert text == (f"{path}:6: set.{key}: is a search, and set: gives every trial one value: move it to "
                    f"space: {{{key}: {space}}}"), text


def test_an_env_config_search_written_under_set_is_warned_of(sweep_file):
    """An env_config value may be a mapping, so it is legal: it reached the env as one (gymnasium.make's
    max_episode_steps={...}), without a word."""
    path = sweep_file("name: b\nsearch: {algorithm: random, num_samples: 2}\nset:\n"
                      "  environment.env_config.max_episode_steps: {distribution: choice, values: [30, 90]}\n")
    assert [w for w in load_sweep(path).warnings if "env_config" in w] == [
        f"warning: {path}:6: environment.env_config.max_episode_steps: is a search, and the env gets it as this mapping "
        "(neither RLlib nor raytrain expands a search in env_config): to try each value, search it under a sweep's "
        "space: {environment.env_config.max_episode_steps: {distribution: choice, values: [30, 90]}}"]


def test_a_set_mapping_beside_a_searched_key_is_kept(sweep_file):
    """A set mapping whose keys are not searched is merged with the searched key in every trial."""
    path = sweep_file("name: b\nsearch: {algorithm: random, num_samples: 2}\n"
                      "space:\n  environment.env_config.max_episode_steps: {distribution: choice, values: [3, 9]}\n"
                      "set:\n  environment.env_config: {sutton_barto_reward: true}\n")
    assert load_sweep(path).base.config.environment.env_config == {"sutton_barto_reward": True}


@pytest.mark.parametrize(("algorithm", "hint"), [
    ("PBT", "; write it in lower case: pbt"),
    ("hyperopt", "; Tune's hyperopt is not offered here: search: {algorithm: optuna} is the model-based search (TPE, "
     "as hyperopt's), asha the early stopping"),
    ("bohb", "; Tune's bohb is not offered here: search: {algorithm: optuna} is the model-based search"),
    ("hyperband", "; Tune's hyperband is not offered here: search: {algorithm: optuna} is the model-based search"),
])
def test_another_search_algorithm_name_is_told_what_is_offered(sweep_file, algorithm, hint):
    """They said only "Input should be 'pbt', 'pb2', 'asha', 'optuna', 'random' or 'grid'"."""
    path = sweep_file(f"name: a\nsearch: {{algorithm: {algorithm}}}\n")
    said = errors(path)
    assert f"search.algorithm: Input should be 'pbt', 'pb2', 'asha', 'optuna', 'random' or 'grid' (got '{algorithm}'){hint}" \
        in said, said


def test_a_seed_set_for_every_trial_where_each_draws_its_own_is_refused(sweep_file):
    """`set: {experiment.seed: 7}`: every trial drew its own seed from search.seed, and the 7 was dropped unsaid (the
    shipped ppo_pbt.yaml had `experiment.seed: 0` there)."""
    path = sweep_file("name: s\nsearch: {algorithm: random, num_samples: 2}\nset: {experiment.seed: 7}\n")
    said = " ".join(errors(path).split())
    assert (f"{path}:5: set.experiment.seed: every trial draws its own seed (from search.seed: trials with the same "
            "hyperparameters would otherwise be copies of each other), and this one would be dropped: remove it "
            "(search.seed makes the seeds reproducible), or give every trial this seed with space: {experiment.seed: "
            "{distribution: choice, values: [7]}}") in said, said
    for fine in ("name: s\nsearch: {algorithm: random, num_samples: 1}\nset: {experiment.seed: 7}\n",
                 "name: s\nsearch: {algorithm: optuna, num_samples: 2}\nset: {experiment.seed: 7}\n"
                 "space: {training.lr: {distribution: loguniform, low: 0.0001, high: 0.01}}\n"):
        assert load_sweep(sweep_file(fine)).base.config.experiment.seed == 7


@pytest.mark.parametrize(("search", "said"), [
    ("search: {algorithm: random, num_samples: 2, seed: 5}\n", "each trial draws its own seed from search.seed (5)"),
    ("search: {algorithm: random, num_samples: 2}\n", "each trial draws its own seed, and search.seed is unset: set "
                                                       "search.seed: N to draw the same seeds each time"),
])
def test_the_base_configs_seed_that_the_trials_replace_is_told(sweep_file, search, said):
    """The base's `experiment.seed: 1` was replaced by each trial's drawn seed, with no word: validate said ok."""
    path = sweep_file("name: s\n" + search)
    found = [n for n in load_sweep(path).notices if "experiment.seed" in n]
    assert found == [f"notice: {path.parent / 'base.yaml'}:2: experiment.seed: 1 is not used by the sweep's trials: "
                     f"{said} (to give every trial this seed: space: {{experiment.seed: {{distribution: choice, values: "
                     "[1]}})"]
    one = sweep_file("name: s\nsearch: {algorithm: random, num_samples: 1}\n")
    assert [n for n in load_sweep(one).notices if "experiment.seed" in n] == []


def test_a_setting_set_and_perturbed_by_pbt_is_refused(sweep_file):
    """PBT starts each trial from a value drawn from its mutations: the set one was dropped unsaid."""
    path = sweep_file("name: p\nsearch: {algorithm: pbt, num_samples: 2}\nset: {training.lr: 0.001}\n"
                      "pbt:\n  hyperparam_mutations:\n    training.lr: {distribution: loguniform, low: 0.0001, high: 0.01}\n")
    said = " ".join(errors(path).split())
    assert (f"{path}:5: set.training.lr: is also varied under pbt.hyperparam_mutations ({path}:8): every trial starts "
            "from a value drawn there and drops this one; keep one of them") in said, said


def test_the_shipped_sweeps_set_no_seed_their_trials_draw():
    for path in sorted(Path(__file__).parents[2].joinpath("configs").glob("*.yaml")):
        if yaml.safe_load(path.read_text()).get("base"):
            load_sweep(path)


def test_a_base_under_the_home_folder_is_found_by_tilde(tmp_path, monkeypatch):
    """`base: ~/configs/base.yaml` was read as a folder named `~` beside the sweep file, as storage paths are not."""
    home = tmp_path / "home"
    (home / "configs").mkdir(parents=True)
    (home / "configs" / "base.yaml").write_text(BASE)
    monkeypatch.setenv("HOME", str(home))
    sweep = tmp_path / "sweeps" / "s.yaml"
    sweep.parent.mkdir()
    sweep.write_text(f"base: ~/configs/base.yaml\nname: t\ncheckpoint: {{storage_path: {tmp_path / 'results'}}}\n")
    loaded = load_sweep(sweep)
    assert loaded.base.source.file == str(home / "configs" / "base.yaml")


def test_the_experiment_folders_copy_of_the_sweep_runs_as_it_is(sweep_file, tmp_path):
    """It kept `base: base.yaml`, relative to the sweep file's folder: `raytrain config validate EXP/sweep.yaml` and
    `tune --dry-run` said "base: no such file: EXP/base.yaml"."""
    from raytrain.tune.run import _write_meta

    loaded = load_sweep(sweep_file("name: kept\nsearch: {algorithm: random, num_samples: 2}\nset: {training.lr: 0.002}\n"
                                   "space: {training.gamma: {distribution: uniform, low: 0.9, high: 0.99}}\n"))
    exp = _write_meta(loaded, plan(loaded), ["raytrain", "tune", "sweep.yaml"])
    again = load_sweep(exp / "sweep.yaml")
    assert again.base.config == loaded.base.config and again.sweep.space == loaded.sweep.space
    assert again.name == "kept"


@pytest.mark.parametrize(("entry", "said"), [
    # Each said only "a distribution needs `distribution:` one of uniform, loguniform, ...".
    ("{grid_search: [0.001, 0.01]}", "Tune's grid_search is written {distribution: grid, values: [0.001, 0.01]} here"),
    ("{distribution: log_uniform, low: 0.0001, high: 0.01}", "did you mean loguniform? (got 'log_uniform')"),
    ("{distribution: LogUniform, low: 0.0001, high: 0.01}", "did you mean loguniform? (got 'LogUniform')"),
    ("{type: uniform, low: 0.0001, high: 0.01}", "write distribution: uniform (got type: uniform)"),
])
def test_a_distribution_in_another_form_is_told_raytrains(sweep_file, entry, said):
    path = sweep_file(f"name: d\nsearch: {{algorithm: random, num_samples: 2}}\nspace:\n  training.lr: {entry}\n")
    text = " ".join(errors(path).split())
    assert (f"space.training.lr: a distribution needs `distribution:` one of uniform, loguniform, quniform, randint, "
            f"choice, grid; {said}") in text, text


@pytest.mark.parametrize("algorithm", ["pbt", "pb2"])
@pytest.mark.parametrize("setting", ["", "set: {training.gamma: 0.9}\n"])
def test_a_population_sweep_without_its_section_says_so(sweep_file, algorithm, setting):
    """It was `error: AssertionError:` (exit 1): the trials' overrides were read before the section was checked."""
    path = sweep_file(f"name: p\nsearch: {{algorithm: {algorithm}, num_samples: 2}}\n" + setting)
    said = errors(path)
    assert "AssertionError" not in said and f"{algorithm}" in said, said


@pytest.mark.parametrize("checkpoint", [
    "checkpoint: {storage_path: STORAGE, frequency: 0, at_end: false}\n",
])
def test_a_sweep_that_writes_no_checkpoint_is_warned_of(sweep_file, tmp_path, checkpoint):
    """It ran, printed `best checkpoint: None`, and eval of it was exit 2; `train` warns of the same settings."""
    path = sweep_file("name: n\nsearch: {algorithm: random, num_samples: 2}\n"
                      + checkpoint.replace("STORAGE", str(tmp_path / "results")))
    found = [w for w in load_sweep(path).warnings if "checkpoint" in w]
    assert found == [f"warning: {path}:4: checkpoint.at_end: false with checkpoint.frequency 0: the trials write no "
                     "checkpoint at all, so the leaderboard names none, eval has nothing to evaluate and tune resume "
                     "starts stopped trials over; set at_end: true (the default) or a frequency"], found
    fine = sweep_file("name: n\nsearch: {algorithm: random, num_samples: 2}\n"
                      f"checkpoint: {{storage_path: {tmp_path / 'results'}, frequency: 0}}\n")
    assert [w for w in load_sweep(fine).warnings if "checkpoint" in w] == []


@pytest.mark.parametrize("searched", [
    "space:\n  training.use_kl_loss: {distribution: choice, values: [true, false]}\n",
    "pbt: {hyperparam_mutations: {training.use_kl_loss: {distribution: choice, values: [true, false]}}}\n",
])
def test_a_base_setting_whose_switch_the_sweep_searches_is_not_warned_of(tmp_path, sweep_file, searched):
    """The base config's kl_coeff was said to have no effect with use_kl_loss: false, and half the trials turn it on."""
    (tmp_path / "base.yaml").write_text(BASE.replace("lr: 0.001}", "lr: 0.001, use_kl_loss: false, kl_coeff: 0.3}"))
    algorithm = "pbt" if searched.startswith("pbt") else "random"
    path = sweep_file(f"name: b\nsearch: {{algorithm: {algorithm}, num_samples: 2}}\n{searched}")
    assert [w for w in load_sweep(path).warnings if "kl_coeff" in w] == []


def test_a_base_setting_whose_switch_is_off_in_every_trial_is_still_warned_of(tmp_path, sweep_file):
    (tmp_path / "base.yaml").write_text(BASE.replace("lr: 0.001}", "lr: 0.001, use_kl_loss: false, kl_coeff: 0.3}"))
    path = sweep_file("name: b\nsearch: {algorithm: random, num_samples: 2}\n"
                      "space:\n  training.lr: {distribution: choice, values: [0.001, 0.0003]}\n")
    assert [w for w in load_sweep(path).warnings if "kl_coeff" in w] == [
        f"warning: {tmp_path / 'base.yaml'}:4: training.kl_coeff: has no effect with training.use_kl_loss: false (no KL "
        "term in the loss): set use_kl_loss: true, or leave it out"]


@pytest.mark.parametrize(("searched", "line", "key"), [
    ("space:\n  training.kl_target: {distribution: uniform, low: 0.01, high: 0.05}\n", 6, "space.training.kl_target"),
    ("pbt: {hyperparam_mutations: {training.kl_coeff: {distribution: uniform, low: 0.1, high: 0.5}}}\n", 5,
     "pbt.hyperparam_mutations.training.kl_coeff"),
])
def test_a_searched_setting_that_no_trial_reads_is_warned_of(tmp_path, sweep_file, searched, line, key):
    """A search over kl_target with use_kl_loss: false in the base ran every trial with the same loss, without a
    word: the leaderboard ranked noise."""
    (tmp_path / "base.yaml").write_text(BASE.replace("lr: 0.001}", "lr: 0.001, use_kl_loss: false}"))
    algorithm = "pbt" if searched.startswith("pbt") else "random"
    path = sweep_file(f"name: b\nsearch: {{algorithm: {algorithm}, num_samples: 2}}\n{searched}")
    name = key.rpartition(".")[2]
    said = [w for w in load_sweep(path).warnings if name in w]
    assert said == [f"warning: {path}:{line}: {key}: is searched, and no trial reads it: it has no effect with "
                    "training.use_kl_loss: false (no KL term in the loss): set use_kl_loss: true, or leave it out; "
                    "the sweep would rank noise"], said


@pytest.mark.parametrize("algorithm", ["random", "grid", "pbt", "asha", "optuna"])
def test_max_concurrent_trials_limits_the_trials_that_run_at_once(sweep_file, algorithm):
    """Tune ignores TuneConfig's max_concurrent_trials beside a BasicVariantGenerator (a log line alone): a probe's
    3 trials with max_concurrent_trials: 2 all ran at once. The generator takes the limit itself; Optuna's
    searcher gets Tune's ConcurrencyLimiter from the TuneConfig."""
    sections = {
        "random": "space: {training.lr: {distribution: loguniform, low: 0.0001, high: 0.01}}\n",
        "grid": "space: {training.lr: {distribution: grid, values: [0.001, 0.01, 0.0001]}}\n",
        "pbt": "pbt: {hyperparam_mutations: {training.lr: {distribution: loguniform, low: 0.0001, high: 0.01}}}\n",
        "asha": "space: {training.lr: {distribution: loguniform, low: 0.0001, high: 0.01}}\n",
        "optuna": "space: {training.lr: {distribution: loguniform, low: 0.0001, high: 0.01}}\n",
    }
    path = sweep_file(f"name: c\nsearch: {{algorithm: {algorithm}, num_samples: 3, max_concurrent_trials: 2}}\n"
                      + sections[algorithm])
    p = plan(load_sweep(path))
    if algorithm == "optuna":
        assert p["tune_config"]["max_concurrent_trials"] == 2 and p["search_alg"]["class"] != "BasicVariantGenerator"
        return
    assert build_search(p["search_alg"]).max_concurrent == 2
    unlimited = plan(load_sweep(sweep_file(f"name: c\nsearch: {{algorithm: {algorithm}, num_samples: 3}}\n"
                                           + sections[algorithm])))
    assert build_search(unlimited["search_alg"]).max_concurrent == 0  # Tune's "no limit"

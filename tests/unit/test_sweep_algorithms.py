"""The sweep algorithm registry: it agrees with the sweep schema, and scheduler settings reach Tune whole."""

import inspect
import pickle
import typing

import pytest

from raytrain.config.sweep import SearchConfig, SweepConfig
from raytrain.config.sweep_load import load_sweep
from raytrain.sweeps import ALGORITHMS, SETTINGS, TUNE_CLASSES, AlgorithmName
from raytrain.sweeps.base import Settings
from raytrain.tune.build import build_scheduler, plan

BASE = """
experiment: {name: base, seed: 1}
environment: {env: CartPole-v1}
training: {train_batch_size: 400, minibatch_size: 100, lr: 0.001}
stop: {training_iteration: 5}
"""


def test_search_algorithm_values_are_the_registry():
    assert typing.get_args(AlgorithmName) == tuple(ALGORITHMS)
    assert SearchConfig.model_fields["algorithm"].annotation == AlgorithmName


def test_every_settings_section_is_a_sweep_field_and_back():
    def settings_model(annotation):
        return next((a for a in typing.get_args(annotation) if isinstance(a, type) and issubclass(a, Settings)), None)

    in_schema = {name: settings_model(f.annotation) for name, f in SweepConfig.model_fields.items()}
    in_schema = {name: model for name, model in in_schema.items() if model is not None}
    assert in_schema == {model.key: model for model in SETTINGS}
    assert list(in_schema) == [model.key for model in SETTINGS]  # the order settings_in() checks them
    for algorithm in ALGORITHMS.values():
        assert set(algorithm.sections) <= set(in_schema), algorithm.name


# Every field of a scheduler's settings set to a value other than its default.
SCHEDULER_SETTINGS = {
    "pbt": (
        "ray.tune.schedulers.PopulationBasedTraining",
        {
            "time_attr": "time_total_s", "perturbation_interval": 3, "burn_in_period": 2, "quantile_fraction": 0.3,
            "resample_probability": 0.1, "perturbation_factors": [1.4, 0.6],
            "hyperparam_mutations": {"training.lr": [0.001, 0.002]}, "custom_explore_fn": "json:loads", "synch": True,
        },
    ),
    "pb2": (
        "ray.tune.schedulers.pb2.PB2",
        {
            "time_attr": "time_total_s", "perturbation_interval": 3, "quantile_fraction": 0.3,
            "hyperparam_bounds": {"training.lr": [0.0001, 0.01]}, "synch": True,
        },
    ),
    "asha": (
        "ray.tune.schedulers.ASHAScheduler",
        {"time_attr": "time_total_s", "max_t": 30, "grace_period": 2, "reduction_factor": 3},
    ),
}

# What raytrain itself gives a Tune scheduler beside the user's settings.
RAYTRAIN_ADDS = {"pb2": {"custom_explore_fn"}}  # WithinBounds: PB2's proposals kept inside hyperparam_bounds


def _tune_class(dotted: str) -> type:
    import importlib

    module_name, _, name = dotted.rpartition(".")
    return getattr(importlib.import_module(module_name), name)


@pytest.mark.parametrize("section", list(SCHEDULER_SETTINGS))
def test_scheduler_settings_are_keyword_arguments_of_the_tune_class(section):
    model = next(m for m in SETTINGS if m.key == section)
    cls = _tune_class(SCHEDULER_SETTINGS[section][0])
    parameters = inspect.signature(cls.__init__).parameters
    assert set(model.model_fields) <= set(parameters) - {"self"}, f"{section}: not a {cls.__name__} argument"


@pytest.mark.parametrize("section", list(SCHEDULER_SETTINGS))
def test_every_scheduler_setting_reaches_the_tune_scheduler(section, tmp_path, monkeypatch):
    """A field added to the settings model is passed on without another edit: none is dropped on the way."""
    import yaml

    dotted, settings = SCHEDULER_SETTINGS[section]
    model = next(m for m in SETTINGS if m.key == section)
    assert set(settings) == set(model.model_fields), "the test sets every field"
    defaults = model()
    for name, value in settings.items():
        assert getattr(model(**{name: value}), name) != getattr(defaults, name), f"{name} is set to its default"

    cls = _tune_class(dotted)
    received: dict = {}
    init = cls.__init__

    def recording_init(self, **kwargs):  # the real constructor, noting what it was given
        received.update(kwargs)
        init(self, **kwargs)

    monkeypatch.setattr(cls, "__init__", recording_init)
    (tmp_path / "base.yaml").write_text(BASE)
    sweep = {
        "base": "base.yaml",
        "checkpoint": {"storage_path": str(tmp_path / "results")},
        "search": {"algorithm": section, "num_samples": 2},
        section: settings,
    }
    if section == "asha":
        sweep["space"] = {"training.lr": {"distribution": "uniform", "low": 0.0001, "high": 0.001}}
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump(sweep))
    spec = plan(load_sweep(tmp_path / "sweep.yaml"))["scheduler"]
    assert list(spec["kwargs"]) == list(model.model_fields)
    assert isinstance(build_scheduler(spec), cls)
    assert set(received) == set(model.model_fields) | RAYTRAIN_ADDS.get(section, set())
    for field in model.model_fields:
        assert received[field] != getattr(defaults, field), f"{section}.{field} did not reach {cls.__name__}"
    assert TUNE_CLASSES[spec["class"]].section == section  # Tune's refusal of it points at this section


def test_explore_adapter_of_an_older_sweep_still_unpickles():
    """A PBT sweep's tuner.pkl from before the algorithm units names raytrain.tune.build.ExploreAdapter."""
    from raytrain.sweeps.pbt import ExploreAdapter

    old = pickle.dumps(ExploreAdapter("json:loads"), protocol=0).replace(b"raytrain.sweeps.pbt", b"raytrain.tune.build")
    assert b"raytrain.tune.build" in old
    assert pickle.loads(old).path == "json:loads"

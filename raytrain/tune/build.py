"""A checked sweep -> the Tune objects that run it (param space, search algorithm, scheduler, configs).

`plan()` is pure data (class names and keyword arguments, JSON-ready) for `--dry-run` and golden tests;
`build()` turns it into Tune objects.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from raytrain.config.sweep import Choice, Grid, LogUniform, QUniform, RandInt, Uniform
from raytrain.config.sweep_load import LoadedSweep
from raytrain.tune import TRIAL_KEY

OPTUNA_DB = "optuna.db"


def _domain_spec(dist) -> dict[str, Any]:
    if isinstance(dist, list):
        return {"choice": dist}
    if isinstance(dist, Uniform):
        return {"uniform": [dist.low, dist.high]}
    if isinstance(dist, LogUniform):
        return {"loguniform": [dist.low, dist.high]}
    if isinstance(dist, QUniform):
        return {"quniform": [dist.low, dist.high, dist.q]}
    if isinstance(dist, RandInt):
        return {"randint": [dist.low, dist.high]}
    if isinstance(dist, Choice):
        return {"choice": dist.values}
    if isinstance(dist, Grid):
        return {"grid_search": dist.values}
    raise TypeError(dist)


def _domain(spec: dict[str, Any]):
    from ray import tune

    (kind, args), = spec.items()
    if kind in ("choice", "grid_search"):
        return getattr(tune, kind)(args)
    return getattr(tune, kind)(*args)


def _grid_size(space: dict[str, Any]) -> int:
    size = 1
    for spec in space.values():
        if "grid_search" in spec:
            size *= len(spec["grid_search"])
    return size


def _nest(overrides: dict[str, Any]) -> dict[str, Any]:
    return {TRIAL_KEY: {"overrides": overrides}}


def plan(loaded: LoadedSweep) -> dict[str, Any]:
    """Everything Tune will be given, as data."""
    s = loaded.sweep
    algo = s.search.algorithm
    space = {k: _domain_spec(d) for k, d in s.space.items()}
    if s.pbt:
        for k, d in s.pbt.hyperparam_mutations.items():
            space.setdefault(k, _domain_spec(d))
    if s.pb2:
        for k, (lo, hi) in s.pb2.hyperparam_bounds.items():
            space.setdefault(k, {"uniform": [lo, hi]})

    if algo != "optuna" and "experiment.seed" not in space and s.search.num_samples * _grid_size(space) > 1:
        # Different seeds per trial, drawn reproducibly from search.seed: otherwise trials with the same
        # hyperparameters are copies of each other (and PBT populations lose their diversity).
        space["experiment.seed"] = {"randint": [0, 1_000_000]}

    scheduler = None
    if algo == "pbt":
        p = s.pbt
        scheduler = {
            "class": "PopulationBasedTraining",
            "kwargs": {
                "time_attr": p.time_attr,
                "perturbation_interval": p.perturbation_interval,
                "burn_in_period": p.burn_in_period,
                "hyperparam_mutations": {k: _domain_spec(d) for k, d in p.hyperparam_mutations.items()},
                "quantile_fraction": p.quantile_fraction,
                "resample_probability": p.resample_probability,
                "perturbation_factors": list(p.perturbation_factors),
                "custom_explore_fn": p.custom_explore_fn,
                "synch": p.synch,
            },
        }
    elif algo == "pb2":
        p = s.pb2
        scheduler = {
            "class": "PB2",
            "kwargs": {
                "time_attr": p.time_attr,
                "perturbation_interval": p.perturbation_interval,
                "quantile_fraction": p.quantile_fraction,
                "hyperparam_bounds": {k: list(b) for k, b in p.hyperparam_bounds.items()},
                "synch": p.synch,
            },
        }
    elif algo == "asha" or (algo == "optuna" and s.optuna and s.optuna.pruner == "asha"):
        from raytrain.config.sweep import ASHAConfig

        a = s.asha or ASHAConfig()
        scheduler = {
            "class": "ASHAScheduler",
            "kwargs": {
                "time_attr": a.time_attr,
                "max_t": a.max_t,
                "grace_period": a.grace_period,
                "reduction_factor": a.reduction_factor,
            },
        }

    if algo == "optuna":
        from raytrain.config.sweep import OptunaConfig

        o = s.optuna or OptunaConfig()
        search = {
            "class": "OptunaSearch",
            "kwargs": {
                "sampler": o.sampler,
                "seed": o.seed if o.seed is not None else s.search.seed,
                "study_name": loaded.name,
                "storage": f"sqlite:///{loaded.experiment_dir / OPTUNA_DB}",
                "points_to_evaluate": [_nest(point) for point in o.points_to_evaluate or []] or None,
            },
        }
    else:
        search = {"class": "BasicVariantGenerator", "kwargs": {"random_state": s.search.seed}}

    return {
        "trainable": "raytrain.tune.trainable:RaytrainPPO",
        "param_space": {TRIAL_KEY: {"base": loaded.base.config.to_yaml_dict(), "overrides": space}},
        "tune_config": {
            "metric": loaded.metric,
            "mode": s.search.mode,
            "num_samples": s.search.num_samples,
            "max_concurrent_trials": s.search.max_concurrent_trials,
            "time_budget_s": s.time_budget_s,
            "reuse_actors": s.reuse_actors,
        },
        "scheduler": scheduler,
        "search_alg": search,
        "run_config": {
            "name": loaded.name,
            "storage_path": s.checkpoint.storage_path,
            "stop": dict(loaded.base.config.stop),
            "checkpoint_config": {
                "num_to_keep": s.checkpoint.num_to_keep,
                "checkpoint_frequency": s.checkpoint.frequency,
                "checkpoint_at_end": s.checkpoint.at_end,
            },
            "failure_config": {"max_failures": s.failure.max_failures},
        },
    }


class ExploreAdapter:
    """Calls a user's `custom_explore_fn(overrides) -> overrides` on the trial's raytrain keys."""

    def __init__(self, path: str):
        self.path = path

    def __call__(self, config: dict) -> dict:
        from raytrain.imports import resolve_import

        fn = resolve_import(self.path)
        overrides = dict(config[TRIAL_KEY]["overrides"])
        config[TRIAL_KEY]["overrides"] = fn(overrides) or overrides
        return config


def _sampler(name: str, seed: int | None):
    import optuna

    return {
        "tpe": lambda: optuna.samplers.TPESampler(seed=seed),
        "cmaes": lambda: optuna.samplers.CmaEsSampler(seed=seed),
        "random": lambda: optuna.samplers.RandomSampler(seed=seed),
        "nsga2": lambda: optuna.samplers.NSGAIISampler(seed=seed),
    }[name]()


def build_scheduler(spec: dict | None):
    if spec is None:
        return None
    from ray.tune import schedulers

    kwargs = dict(spec["kwargs"])
    if spec["class"] == "PopulationBasedTraining":
        kwargs["hyperparam_mutations"] = _nest({k: _domain(v) for k, v in kwargs["hyperparam_mutations"].items()})
        kwargs["perturbation_factors"] = tuple(kwargs["perturbation_factors"])
        kwargs["custom_explore_fn"] = ExploreAdapter(kwargs["custom_explore_fn"]) if kwargs["custom_explore_fn"] else None
        return schedulers.PopulationBasedTraining(**kwargs)
    if spec["class"] == "PB2":
        from ray.tune.schedulers.pb2 import PB2

        kwargs["hyperparam_bounds"] = _nest(kwargs["hyperparam_bounds"])
        return PB2(**kwargs)
    return schedulers.ASHAScheduler(**kwargs)


def build_search(spec: dict):
    kwargs = dict(spec["kwargs"])
    if spec["class"] == "OptunaSearch":
        import optuna

        from raytrain.tune.optuna_search import ResumableOptunaSearch

        Path(kwargs["storage"].removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
        storage = optuna.storages.RDBStorage(kwargs["storage"])
        return ResumableOptunaSearch(
            sampler=_sampler(kwargs["sampler"], kwargs["seed"]),
            study_name=kwargs["study_name"],
            storage=storage,
            seed=kwargs["seed"],
            points_to_evaluate=kwargs["points_to_evaluate"],
        )
    from ray.tune.search import BasicVariantGenerator

    return BasicVariantGenerator(**kwargs)


def check(loaded: LoadedSweep, plan_: dict) -> None:
    """Every check of a sweep that needs no Ray runtime and writes nothing; raises ConfigError.

    RLlib's own `PPOConfig.validate()` of the base config and of the trial configs at the ends of every
    searched range, then the Tune objects that can be built without Ray (search domains, scheduler,
    searcher but for Optuna's storage, TuneConfig, CheckpointConfig, FailureConfig). `tune` and
    `tune --dry-run` both run it before Ray starts and before the experiment folder is made.
    """
    from raytrain.config.load import load_source
    from raytrain.config.sweep_load import sample_values, searched, trial_source
    from raytrain.errors import ConfigError, ConfigIssue
    from raytrain.rllib.translate import build_ppo_config

    issues: list[ConfigIssue] = []

    def rllib_problem(cfg) -> str | None:
        try:
            build_ppo_config(cfg).validate()
        except Exception as exc:  # RLlib raises ValueError and friends
            return str(exc)
        return None

    problem = rllib_problem(loaded.base.config)
    if problem:
        what = "the train config" if loaded.sweep.base is None else f"the base config {loaded.base.source.file}"
        issues.append(ConfigIssue(
            loaded.source.file, "", f"RLlib rejects {what} (with the sweep's `set:` and `stop:`): {problem}"
        ))
    else:
        for key_path, dist in searched(loaded.sweep):
            for value in sample_values(dist):
                cfg = load_source(trial_source(loaded.base.source, {key_path[-1]: value})).config
                problem = rllib_problem(cfg)
                if problem:
                    issues.append(ConfigIssue(
                        loaded.source.where(key_path), ".".join(key_path),
                        f"with {key_path[-1]} = {value!r} RLlib rejects a trial's config: {problem}",
                    ))
                    break
    if issues:
        raise ConfigError(issues)

    from ray import tune

    def tune_rejects(key_path: tuple[str, ...], make) -> None:
        try:
            make()
        except Exception as exc:  # Tune raises ValueError, TypeError, TuneError
            issues.append(ConfigIssue(loaded.source.where(key_path), ".".join(key_path), f"Ray Tune rejects it: {exc}"))

    for key_path, dist in searched(loaded.sweep):
        if key_path[0] != "pb2":  # PB2's bounds are not Tune domains; its scheduler is built below
            tune_rejects(key_path, lambda dist=dist: _domain(_domain_spec(dist)))
    if issues:
        raise ConfigError(issues)
    if plan_["scheduler"] is not None:
        section = {"PopulationBasedTraining": "pbt", "PB2": "pb2"}.get(plan_["scheduler"]["class"], "asha")
        tune_rejects((section,), lambda: build_scheduler(plan_["scheduler"]))
    search = plan_["search_alg"]
    if search["class"] == "OptunaSearch":  # the searcher itself opens (creates) optuna.db
        tune_rejects(("optuna",), lambda: _sampler(search["kwargs"]["sampler"], search["kwargs"]["seed"]))
    else:
        tune_rejects(("search",), lambda: build_search(search))
    tc, rc = plan_["tune_config"], plan_["run_config"]
    tune_rejects(("search",), lambda: tune.TuneConfig(**tc))
    tune_rejects(("checkpoint",), lambda: tune.CheckpointConfig(**rc["checkpoint_config"]))
    tune_rejects(("failure",), lambda: tune.FailureConfig(**rc["failure_config"]))
    if issues:
        raise ConfigError(issues)


def build(plan_: dict, callbacks: list | None = None):
    """The Tuner for a plan (Ray must be connected)."""
    from ray import tune

    from raytrain.tune.trainable import RaytrainPPO

    space = dict(plan_["param_space"])
    space[TRIAL_KEY] = {**space[TRIAL_KEY], "overrides": {k: _domain(v) for k, v in space[TRIAL_KEY]["overrides"].items()}}
    tc = plan_["tune_config"]
    rc = plan_["run_config"]
    return tune.Tuner(
        RaytrainPPO,
        param_space=space,
        tune_config=tune.TuneConfig(
            metric=tc["metric"],
            mode=tc["mode"],
            num_samples=tc["num_samples"],
            max_concurrent_trials=tc["max_concurrent_trials"],
            time_budget_s=tc["time_budget_s"],
            reuse_actors=tc["reuse_actors"],
            scheduler=build_scheduler(plan_["scheduler"]),
            search_alg=build_search(plan_["search_alg"]),
            trial_name_creator=trial_name,
            trial_dirname_creator=trial_name,
        ),
        run_config=tune.RunConfig(
            name=rc["name"],
            storage_path=rc["storage_path"],
            stop=rc["stop"] or None,
            checkpoint_config=tune.CheckpointConfig(**rc["checkpoint_config"]),
            failure_config=tune.FailureConfig(**rc["failure_config"]),
            callbacks=callbacks,
            verbose=0,
        ),
    )


def trial_name(trial) -> str:
    """`<experiment>_<index>`: short, stable, and tells trials apart on the dashboard."""
    return f"{trial.experiment_dir_name}_{trial.trial_id}" if getattr(trial, "experiment_dir_name", None) else f"trial_{trial.trial_id}"

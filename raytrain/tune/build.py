"""A checked sweep -> the Tune objects that run it (param space, search algorithm, scheduler, configs).

`plan()` is pure data (class names and keyword arguments, JSON-ready) for `--dry-run` and golden tests;
`build()` turns it into Tune objects. What depends on the search algorithm comes from its unit in
`raytrain.sweeps`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from raytrain.config.sweep_load import LoadedSweep
from raytrain.errors import ConfigError, ConfigIssue
from raytrain.sweeps import ALGORITHMS, TUNE_CLASSES, trial_overrides
from raytrain.sweeps.base import BASIC_SEARCH, KeyPath, Spec
from raytrain.sweeps.pbt import ExploreAdapter  # noqa: F401  (the tuner.pkl of older PBT sweeps names it here)
from raytrain.sweeps.space import domain, domain_spec, grid_size
from raytrain.tune import TRIAL_KEY, escape_keys

if TYPE_CHECKING:
    from raytrain.config.schema import RaytrainConfig
    from raytrain.training import RayCpus

Plan = dict[str, Any]
"""Everything Tune is given, as JSON-ready data (what `tune --dry-run` shows)."""


def trial_count(loaded: LoadedSweep) -> int:
    """How many trials the sweep starts: num_samples, times the size of the grid when the space has one."""
    return loaded.sweep.search.num_samples * grid_size({k: domain_spec(d) for k, d in loaded.sweep.space.items()})


def plan(loaded: LoadedSweep) -> Plan:
    """Everything Tune will be given, as data."""
    s = loaded.sweep
    algorithm = ALGORITHMS[s.search.algorithm]
    space = trial_overrides(s)
    return {
        "trainable": "raytrain.tune.trainable:RaytrainPPO",
        "param_space": {TRIAL_KEY: {"base": loaded.base.config.to_yaml_dict(), "overrides": space}},
        "tune_config": {
            "metric": loaded.metric,
            "mode": s.search.mode,
            "num_samples": s.search.num_samples,
            "max_concurrent_trials": s.search.max_concurrent_trials,
            "time_budget_s": s.time_budget_s,
            "reuse_actors": algorithm.reuses_actors if s.reuse_actors is None else s.reuse_actors,
        },
        "scheduler": algorithm.scheduler(loaded),
        "search_alg": algorithm.search_alg(loaded),
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


def build_scheduler(spec: Spec | None) -> Any:
    """The Tune scheduler of a plan's `scheduler` (None: Tune's default)."""
    return None if spec is None else TUNE_CLASSES[spec["class"]].build(spec["kwargs"])


def build_search(spec: Spec) -> Any:
    """The Tune search algorithm of a plan's `search_alg`."""
    return TUNE_CLASSES[spec["class"]].build(spec["kwargs"])


def check(loaded: LoadedSweep, plan_: Plan) -> list[str]:
    """Every check of a sweep that needs no Ray runtime and writes nothing; raises ConfigError. Returns the
    warnings RLlib logged meanwhile, each once, at the setting it names.

    RLlib's own `PPOConfig.validate()` of the base config and of the trial configs at the ends of every
    searched range, a trial's placement group (every bundle reserves something), then the Tune objects that
    can be built without Ray (search domains, scheduler, searcher but for Optuna's storage, TuneConfig,
    CheckpointConfig, FailureConfig). `tune` and
    `tune --dry-run` both run it before Ray starts and before the experiment folder is made.
    """
    from raytrain.rllib.translate import located_warnings, rllib_warnings

    with rllib_warnings() as found:
        issues = (_rllib_issues(loaded) or _perturbed_network_issues(loaded) or _placement_issues(loaded)
                  or _tune_issues(loaded, plan_))
    if issues:
        raise ConfigError(issues)
    from raytrain.config.sweep_load import searched
    from raytrain.rllib.translate import env_idle_warnings

    return (located_warnings(found, lambda key: _writes(loaded, key), lambda key: _where(loaded, key), loaded.source.file)
            + env_idle_warnings(loaded.base.config, loaded.base.source,
                                {path[-1]: (loaded.source.where(path), ".".join(path)) for path, _ in searched(loaded.sweep)}))


def check_cpus(loaded: LoadedSweep, ray: RayCpus | None = None) -> None:
    """Before Ray starts: one trial's placement group (its main process and learner, its env runners; what
    RLlib asks Tune for) must fit `ray`'s CPUs (by default a local Ray's), or no trial would ever start.

    So must the trial of each end of a searched range (`num_env_runners` searched up to 8 on 2 CPUs: the
    trials that fit would run and the sweep would then wait forever for the others).

    Raises:
        ConfigError: at the field to lower, in the sweep's `set:` or in the base config, or at the searched
            range; exit 2.
    """
    from raytrain.training import TRIAL_ACTORS, local_ray, too_few_cpus, trial_bundles

    ray = ray or local_ray()
    cfg = loaded.base.config
    error = too_few_cpus(trial_bundles(cfg), cfg, lambda key: _where(loaded, key), TRIAL_ACTORS, ray, group=True)
    if error is not None:
        raise error

    def too_large(trial: RaytrainConfig) -> str | None:
        error = too_few_cpus(trial_bundles(trial), trial, lambda key: None, TRIAL_ACTORS, ray, group=True)
        return None if error is None else error.issues[0].message

    issues = _searched_trials_rejected(loaded, too_large)
    if issues:
        raise ConfigError(issues)


def _writes(loaded: LoadedSweep, key: str) -> bool:
    """Whether the sweep's `set:` or its base config writes the dotted key of a trial's base config."""
    from raytrain.rllib.translate import writes

    return key in loaded.sweep.set or writes(loaded.base.source, key)


def _where(loaded: LoadedSweep, key: str) -> str | None:
    """Where a dotted key of a trial's base config is written: the sweep's `set:`, else the base config."""
    if key in loaded.sweep.set:
        return loaded.source.where(("set", key))
    return loaded.base.source.where(tuple(key.split(".")))


def _placement_issues(loaded: LoadedSweep) -> list[ConfigIssue]:
    """Tune places each trial's actors in a placement group of RLlib's bundles, and Ray refuses a bundle that
    reserves nothing: an actor given 0 CPUs and no GPU or custom resource (`raytrain train`, which places no
    group, runs it). Tune's controller then failed on its own cleanup with a KeyError. The base config, else
    the first such value of each searched range."""
    advice = ": give it a share of a CPU (such as 0.1)"
    issues = [ConfigIssue(_where(loaded, key), key, problem + advice) for key, problem in _empty_bundles(loaded.base.config)]
    return issues or _searched_trials_rejected(
        loaded, lambda trial: next((problem + advice for _, problem in _empty_bundles(trial)), None))


def _searched_trials_rejected(loaded: LoadedSweep, problem: Callable[[RaytrainConfig], str | None]) -> list[ConfigIssue]:
    """For each searched range, the first end whose trial config `problem` finds wrong, at the range."""
    from raytrain.config.load import load_source
    from raytrain.config.sweep_load import sample_values, searched, trial_source

    issues = []
    for key_path, dist in searched(loaded.sweep):
        for value in sample_values(dist):
            found = problem(load_source(trial_source(loaded.base.source, {key_path[-1]: value})).config)
            if found:
                issues.append(ConfigIssue(loaded.source.where(key_path), ".".join(key_path),
                                          f"with {key_path[-1]} = {value!r} {found}"))
                break
    return issues


def _empty_bundles(cfg: RaytrainConfig) -> list[tuple[str, str]]:
    """(the field, what is wrong) for each kind of a trial's actors whose bundle reserves nothing."""
    from raytrain.rllib.translate import build_ppo_config
    from raytrain.training import trial_bundles

    bundles = trial_bundles(cfg)
    first_learner = len(bundles) - build_ppo_config(cfg).num_learners
    found: dict[str, str] = {}
    for i, bundle in enumerate(bundles):
        if any(amount > 0 for amount in bundle.values()):
            continue
        if i == 0:
            key, actor = "resources.num_cpus_for_main_process", "the trial's main process (with its local learner)"
        elif i >= first_learner:
            key, actor = "learners.num_cpus_per_learner", "each learner actor"
        else:
            key, actor = "env_runners.num_cpus_per_env_runner", "each env runner actor"
        found.setdefault(key, f"{actor} reserves no CPU, GPU or custom resource, and Ray refuses such a bundle in "
                              "a trial's placement group")
    return list(found.items())


def _rllib_problem(cfg: RaytrainConfig) -> str | None:
    from raytrain.rllib.translate import build_ppo_config, rllib_error_text

    try:
        build_ppo_config(cfg).validate()
    except Exception as exc:  # RLlib raises ValueError and friends
        return rllib_error_text(exc)
    return None


def _rllib_issues(loaded: LoadedSweep) -> list[ConfigIssue]:
    """What RLlib rejects: the base config, else the first rejected value of each searched range."""
    problem = _rllib_problem(loaded.base.config)
    if problem:
        from raytrain.rllib.translate import rejected_setting

        what = "the train config" if loaded.sweep.base is None else f"the base config {loaded.base.source.file}"
        key = rejected_setting(problem, lambda k: _writes(loaded, k))
        where = loaded.source.file if key is None else _where(loaded, key)
        return [ConfigIssue(where, key or "", f"RLlib rejects {what} (with the sweep's `set:` and `stop:`): {problem}")]
    from raytrain.rllib.fit import changed_keys, observation_issue, observation_problem

    base = loaded.base.config
    keys = loaded.hyperparameters()  # env_config keys the trials set
    if (unfit := observation_issue(base, loaded.base.source, keys)) is not None:
        return [unfit]

    def rejected(trial: RaytrainConfig) -> str | None:
        found = _rllib_problem(trial)
        if found is not None:
            return f"RLlib rejects a trial's config: {found}"
        # a searched env_config or model value can change the env's spaces or the network PPO builds for them
        if changed_keys(base, trial):
            return observation_problem(trial, keys)
        return None

    return _searched_trials_rejected(loaded, rejected)


def _perturbed_network_issues(loaded: LoadedSweep) -> list[ConfigIssue]:
    """A PBT or PB2 perturbation of a setting whose values build networks of other shapes (model.fcnet_hiddens).

    An exploit restores the stronger trial's checkpoint into the perturbed config: torch refused its weights with
    a page of size mismatches at the first exploit, after Ray started, and the trial failed. A setting of
    `space:` is safe: an exploit copies the stronger trial's value along with its weights.
    """
    from raytrain.config.load import load_source
    from raytrain.config.sweep_load import sample_values, trial_source
    from raytrain.rllib.fit import built_shapes, changed_keys, first_misfit
    from raytrain.sweeps.pbt import PopulationBased

    algorithm = ALGORITHMS[loaded.sweep.search.algorithm]
    if not isinstance(algorithm, PopulationBased):
        return []
    base = loaded.base.config
    base_shapes = functools.cache(lambda: built_shapes(base))  # built once, if a value is the base config's own
    issues = []
    for section in algorithm.sections:
        settings = getattr(loaded.sweep, section, None)
        for key_path, dist in settings.searched() if settings is not None else []:
            key, built = key_path[-1], []
            trials = [(value, trial, bool(changed_keys(base, trial))) for value in sample_values(dist)
                      for trial in [load_source(trial_source(loaded.base.source, {key: value})).config]]
            if not any(changed for _, _, changed in trials):
                continue  # no value reaches the network
            for value, trial, changed in trials:
                shapes = built_shapes(trial) if changed else base_shapes()
                if shapes is None:
                    break  # the env cannot be made here: RLlib's build says why
                built.append((value, shapes))
            differ = [(a, b) for a, b in zip(built, built[1:]) if a[1] != b[1]]
            if not differ:
                continue
            (first, old), (second, new) = differ[0]
            param, old_shape, new_shape = first_misfit(old, new)
            issues.append(ConfigIssue(
                loaded.source.where(key_path), ".".join(key_path),
                f"{algorithm.name.upper()} perturbs it, but its values build networks of other shapes ({param}: "
                f"{old_shape} with {first!r}, {new_shape} with {second!r}): an exploit loads the stronger "
                "trial's weights into the perturbed config, and they would not fit; search it under space: instead "
                "(an exploit copies the stronger trial's value with its weights), and perturb settings that keep the "
                "network (training.lr, training.clip_param, ...)",
            ))
    return issues


def _tune_issues(loaded: LoadedSweep, plan_: Plan) -> list[ConfigIssue]:
    """What Ray Tune rejects: the search domains first, then the scheduler, searcher and configs."""
    from ray import tune

    from raytrain.config.sweep_load import searched

    issues: list[ConfigIssue] = []

    def tune_rejects(key_path: KeyPath, make: Callable[..., Any], *args: Any) -> None:
        try:
            make(*args)
        except Exception as exc:  # Tune raises ValueError, TypeError, TuneError
            issues.append(ConfigIssue(loaded.source.where(key_path), ".".join(key_path), f"Ray Tune rejects it: {exc}"))

    for key_path, dist in searched(loaded.sweep, domains_only=True):
        tune_rejects(key_path, lambda dist: domain(domain_spec(dist)), dist)
    if issues:
        return issues
    for spec in (plan_["scheduler"], plan_["search_alg"]):
        if spec is not None:
            tune_class = TUNE_CLASSES[spec["class"]]
            tune_rejects((tune_class.section,), tune_class.dry_build or tune_class.build, spec["kwargs"])
    tc, rc = plan_["tune_config"], plan_["run_config"]
    tune_rejects(("search",), lambda: tune.TuneConfig(**tc))
    tune_rejects(("checkpoint",), lambda: tune.CheckpointConfig(**rc["checkpoint_config"]))
    tune_rejects(("failure",), lambda: tune.FailureConfig(**rc["failure_config"]))
    return issues


def tune_space(plan_: Plan) -> dict[str, Any]:
    """The param_space Tune is given: the overrides as Tune domains, the base's keys escaped (`escape_keys`)."""
    space = dict(plan_["param_space"])
    trial = space[TRIAL_KEY]
    space[TRIAL_KEY] = {**trial, "base": escape_keys(trial["base"]),
                        "overrides": {k: domain(v) for k, v in trial["overrides"].items()}}
    return space


def concurrency_unset(loaded: LoadedSweep, plan_: Plan) -> int | None:
    """With a search algorithm of its own (Optuna) and search.max_concurrent_trials unset, the limit to give Tune: as
    many trials as the connected Ray holds at once. Tune keeps one trial pending beside such a searcher unless a limit
    is set (`_get_max_pending_trials` in ray/tune/execution/tune_controller.py), so it made the trials one after
    another, each once the one before was running, and a sweep of 4 trials on 2 CPUs ended 1.15x later
    (scripts/bench_optuna_start.py). None where the sweep sets the limit or Tune's own generator searches (it keeps
    many pending)."""
    import ray

    from raytrain.training import trial_bundles
    from raytrain.tune.schedulers import trials_at_once

    if plan_["search_alg"]["class"] == BASIC_SEARCH.name or plan_["tune_config"]["max_concurrent_trials"] is not None:
        return None
    return trials_at_once(trial_bundles(loaded.base.config), ray.cluster_resources())


def build(plan_: Plan, callbacks: list[Any] | None = None, at_once: int | None = None) -> Any:
    """The Tuner for a plan (Ray must be connected). `at_once`: the concurrency limit where the sweep leaves it
    unset (`concurrency_unset`)."""
    from ray import tune

    from raytrain.tune.loggers import result_writers
    from raytrain.tune.trainable import RaytrainPPO

    tc = plan_["tune_config"]
    rc = plan_["run_config"]
    return tune.Tuner(
        RaytrainPPO,
        param_space=tune_space(plan_),
        tune_config=tune.TuneConfig(
            metric=tc["metric"],
            mode=tc["mode"],
            num_samples=tc["num_samples"],
            # a BasicVariantGenerator takes the limit itself (Tune ignores this one beside it)
            max_concurrent_trials=None if plan_["search_alg"]["class"] == BASIC_SEARCH.name else tc["max_concurrent_trials"] or at_once,
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
            callbacks=[*(callbacks or []), *result_writers()],
            verbose=0,
        ),
    )


def trial_name(trial: Any) -> str:
    """`<experiment>_<index>`: short, stable, and tells trials apart on the dashboard."""
    return f"{trial.experiment_dir_name}_{trial.trial_id}" if getattr(trial, "experiment_dir_name", None) else f"trial_{trial.trial_id}"

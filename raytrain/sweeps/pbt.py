"""search.algorithm pbt: Population Based Training (Tune `PopulationBasedTraining`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import Field

from raytrain.config.schema import Positive
from raytrain.sweeps.base import Algorithm, Issue, KeyPath, SchedulerSettings, Spec, TuneClass
from raytrain.sweeps.space import Distribution, DomainSpec, Grid, domain, domain_spec, nest
from raytrain.tune import TRIAL_KEY

if TYPE_CHECKING:
    from raytrain.config.sweep import SweepConfig
    from raytrain.config.sweep_load import LoadedSweep


class PBTConfig(SchedulerSettings):
    """Population Based Training (Tune `PopulationBasedTraining`)."""

    key: ClassVar[str] = "pbt"

    time_attr: str = "training_iteration"
    """The result attribute that measures progress (`training_iteration`, `time_total_s`, `num_env_steps_sampled_lifetime`)."""
    perturbation_interval: float = Field(default=5, gt=0)
    """Exploit/explore every this many `time_attr` units."""
    burn_in_period: float = Field(default=0, ge=0)
    """No perturbation before this many `time_attr` units."""
    quantile_fraction: float = Field(default=0.25, ge=0, le=0.5)
    """Bottom fraction that copies the top fraction."""
    resample_probability: float = Field(default=0.25, ge=0, le=1)
    """Probability of resampling a value from its distribution instead of perturbing it."""
    perturbation_factors: tuple[Positive, Positive] = (1.2, 0.8)
    """Factors (> 0) a continuous value is multiplied by when perturbed."""
    hyperparam_mutations: dict[str, Distribution | list[Any]] = Field(default_factory=dict)
    """Dotted key -> distribution (or list of values) that PBT samples and perturbs: a ranged value is multiplied by a perturbation factor and kept inside its [low, high] (a randint below high, a quniform on its grid); a choice or list moves to a neighbouring value; a grid is refused."""
    custom_explore_fn: str | None = None
    """Import path `"pkg.module:function"` of a function(overrides) -> overrides, applied after each perturbation: it gets the trial's {dotted key: value} and returns them, changed as it likes."""
    synch: bool = False
    """Synchronous PBT: perturb only when all trials reached the interval."""

    def searched(self) -> list[tuple[KeyPath, Any]]:
        return [((self.key, "hyperparam_mutations", k), d) for k, d in self.hyperparam_mutations.items()]

    def check(self, sweep: SweepConfig, known_metrics: set[str], issue: Issue) -> None:
        super().check(sweep, known_metrics, issue)
        for key, dist in self.hyperparam_mutations.items():
            if isinstance(dist, Grid):  # Tune's PBT failed at the first exploit: 'int' object is not subscriptable
                issue((self.key, "hyperparam_mutations", key),
                      "PBT cannot perturb a grid: write {distribution: choice, values: [...]} (an exploit moves to a "
                      "neighbouring value), and put the grid under space: to start trials from each value")
        if self.custom_explore_fn:
            from raytrain.imports import resolve_import

            try:
                fn = resolve_import(self.custom_explore_fn)
            except (ImportError, AttributeError, ValueError) as exc:
                issue((self.key, "custom_explore_fn"), f"cannot import {self.custom_explore_fn!r}: {exc}")
            else:
                if (wrong := _not_one_argument(self.custom_explore_fn, fn)) is not None:
                    issue((self.key, "custom_explore_fn"), wrong + (
                        " (the trial's overrides, a mapping of dotted keys to values) and takes the mapping it returns: "
                        "name a function of one argument"))


def _not_one_argument(path: str, fn: Any) -> str | None:
    """Why `fn` cannot be called as PBT calls an explore function, `fn(overrides)`, else None. Tune found out at the
    first exploit, and ended the sweep with its traceback."""
    import inspect

    if inspect.isclass(fn) or not callable(fn):
        return f"{path} is {'a class' if inspect.isclass(fn) else 'a ' + type(fn).__name__}, not a function: PBT calls it with one argument"
    try:
        signature = inspect.signature(fn)
        signature.bind({})
    except TypeError:
        return f"{path} takes {signature.replace(return_annotation=inspect.Signature.empty)}, and PBT calls it with one argument"
    except ValueError:  # no signature to read (a builtin): calling it tells
        return None
    return None


class ExploreAdapter:
    """Calls a user's `custom_explore_fn(overrides) -> overrides` on the trial's raytrain keys."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __call__(self, config: dict[str, Any]) -> dict[str, Any]:
        from raytrain.imports import resolve_import

        fn = resolve_import(self.path)
        overrides = dict(config[TRIAL_KEY]["overrides"])
        config[TRIAL_KEY]["overrides"] = fn(overrides) or overrides
        return config


RANGED = ("uniform", "loguniform", "quniform", "randint")
"""The distributions over a range, whose perturbed values Tune does not keep inside it."""


def within(kind: str, args: list[Any], value: Any) -> Any:
    """`value` put back inside the range of a distribution's plan data (`"quniform", [low, high, q]`), on its grid."""
    if kind == "randint":  # high excluded, as in Tune
        low, high = args
        return min(max(int(round(value)), low), high - 1)
    low, high = args[0], args[1]
    if kind == "quniform":
        value = round(value / args[2]) * args[2]
    return min(max(value, low), high)


class PerturbedWithinRanges:
    """Tune's PBT explore step, then each ranged mutation put back inside the range the sweep file gives it, then
    the user's `custom_explore_fn`.

    Tune multiplies a perturbed value by a perturbation factor whatever its distribution's range (ray-project/ray
    #5035): `training.lambda` in uniform(0.9, 1.0) went from 0.96 to 1.15, above what PPO takes, and the trial
    failed. A class, not a closure, so the scheduler pickles with the sweep.
    """

    def __init__(self, ranges: dict[str, tuple[str, list[Any]]], explore: str | None) -> None:
        self.ranges = ranges
        self.explore = explore

    def __call__(self, config: dict[str, Any]) -> dict[str, Any]:
        overrides = config[TRIAL_KEY]["overrides"]
        for key, (kind, args) in self.ranges.items():
            if key in overrides:
                overrides[key] = within(kind, args, overrides[key])
        return ExploreAdapter(self.explore)(config) if self.explore else config


def _mutation(spec: DomainSpec) -> Any:
    """What Tune's PBT is given for one mutation: a choice as a plain list, which Tune perturbs by moving to a
    neighbouring value (a `tune.choice` domain it multiplies by the perturbation factor: a string raised a
    TypeError that ended the sweep, and a number left the values), anything else as its Tune domain."""
    ((kind, args),) = spec.items()
    return list(args) if kind == "choice" else domain(spec)


def _build(kwargs: dict[str, Any]) -> Any:
    from raytrain.tune.schedulers import RaytrainPBT

    mutations: dict[str, DomainSpec] = kwargs["hyperparam_mutations"]
    ranges = {key: next(iter(spec.items())) for key, spec in mutations.items() if next(iter(spec)) in RANGED}
    explore = kwargs["custom_explore_fn"]
    return RaytrainPBT(**{
        **kwargs,
        "hyperparam_mutations": nest({k: _mutation(v) for k, v in mutations.items()}),
        "perturbation_factors": tuple(kwargs["perturbation_factors"]),
        "custom_explore_fn": PerturbedWithinRanges(ranges, explore) if ranges or explore else None,
    })


SCHEDULER = TuneClass("PopulationBasedTraining", PBTConfig.key, _build)


class PopulationBased(Algorithm):
    """What PBT and PB2 share: no search algorithm beside them, and trials that exploit each other's checkpoints."""

    # Every exploit pauses a trial and resumes it from another's checkpoint: in a reused actor that is a
    # config swap and a restore (RaytrainPPO.reset_config) instead of a new process and a new build.
    reuses_actors = True

    def misplaced(self, section: str) -> str:
        if section == "optuna":
            return "PBT-style schedulers cannot be combined with a search algorithm (Tune refuses): remove `optuna` or set search.algorithm: optuna"
        return super().misplaced(section)

    def check(self, sweep: SweepConfig, issue: Issue, warn: Callable[[str], None]) -> None:
        keep = sweep.checkpoint.num_to_keep
        if keep is not None and keep < 3:
            issue(
                ("checkpoint", "num_to_keep"),
                f"{keep} is too few for PBT: an exploiting trial restores the stronger trial's "
                "checkpoint by reference, and that trial may have deleted it by then; keep at least 3 (or leave unset)",
            )


class PBT(PopulationBased):
    name = "pbt"
    sections = (PBTConfig.key,)

    def check(self, sweep: SweepConfig, issue: Issue, warn: Callable[[str], None]) -> None:
        if sweep.pbt is None or (not sweep.pbt.hyperparam_mutations and not sweep.pbt.custom_explore_fn):
            issue(("pbt",), "PBT needs pbt.hyperparam_mutations (what to perturb), e.g. {training.lr: {distribution: loguniform, low: 1e-4, high: 1e-2}}")
        super().check(sweep, issue, warn)

    def space(self, sweep: SweepConfig) -> dict[str, DomainSpec]:
        if sweep.pbt is None:  # said by PBT.check (this may be asked first: a trial's overrides)
            return {}
        return {k: domain_spec(d) for k, d in sweep.pbt.hyperparam_mutations.items()}

    def scheduler(self, loaded: LoadedSweep) -> Spec | None:
        pbt = loaded.sweep.pbt
        assert pbt is not None  # checked by PBT.check
        return SCHEDULER.spec({**pbt.tune_kwargs(), "hyperparam_mutations": self.space(loaded.sweep)})

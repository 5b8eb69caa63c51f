"""search.algorithm pb2: Population Based Bandits (Tune `PB2`), PBT with a GP-bandit explore step."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any, ClassVar

from pydantic import AfterValidator, Field

from raytrain.config.schema import whole_numbers_only
from raytrain.sweeps.base import Issue, KeyPath, SchedulerSettings, Spec, TuneClass
from raytrain.sweeps.pbt import PopulationBased, within
from raytrain.sweeps.space import DomainSpec, check_range, nest
from raytrain.tune import TRIAL_KEY

if TYPE_CHECKING:
    from raytrain.config.sweep import SweepConfig
    from raytrain.config.sweep_load import LoadedSweep


def _low_below_high(bounds: tuple[float, float]) -> tuple[float, float]:
    check_range(*bounds)
    return bounds


class PB2Config(SchedulerSettings):
    """Population Based Bandits (Tune `PB2`): PBT with a GP-bandit explore step (needs GPy and scikit-learn)."""

    key: ClassVar[str] = "pb2"
    tune_domains: ClassVar[bool] = False

    perturbation_interval: float = Field(default=5, gt=0)
    """Exploit/explore every this many `time_attr` units."""
    quantile_fraction: float = Field(default=0.25, ge=0, le=0.5)
    """Bottom fraction that copies the top fraction."""
    hyperparam_bounds: dict[str, Annotated[tuple[float, float], AfterValidator(_low_below_high)]] = Field(default_factory=dict)
    """Dotted key -> [low, high] (low < high) for the hyperparameters PB2 explores; what it tries stays within them, rounded for a setting that takes whole numbers (training.num_epochs)."""
    synch: bool = False
    """Synchronous mode."""

    def searched(self) -> list[tuple[KeyPath, Any]]:
        return [((self.key, "hyperparam_bounds", k), list(b)) for k, b in self.hyperparam_bounds.items()]


class WithinBounds:
    """PB2's explore step, then each bounded value put back inside its [low, high].

    Tune's PB2 rounds the values it proposes through float32, so a value at a bound can come back just outside
    it (a low of 1e-4 came back as 9.9999997e-05). Given to PB2 as its `custom_explore_fn`; a class, not a
    closure, so the scheduler pickles with the sweep.
    """

    def __init__(self, bounds: dict[str, tuple[float, float]]) -> None:
        self.bounds = {key: (float(low), float(high)) for key, (low, high) in bounds.items()}
        self.whole = {key for key in bounds if whole_numbers_only(key)}
        """The settings that take whole numbers (training.num_epochs): PB2's proposal rounded, inside the bounds."""

    def __call__(self, config: dict[str, Any]) -> dict[str, Any]:
        overrides = config[TRIAL_KEY]["overrides"]
        for key, (low, high) in self.bounds.items():
            whole = key in getattr(self, "whole", ())  # a scheduler pickled before it had `whole` has none
            overrides[key] = (within("randint", [math.ceil(low), math.floor(high) + 1], overrides[key]) if whole
                              else within("uniform", [low, high], overrides[key]))
        return config


def _build(kwargs: dict[str, Any]) -> Any:
    from raytrain.tune.schedulers import RaytrainPB2

    bounds = kwargs["hyperparam_bounds"]
    return RaytrainPB2(**{**kwargs, "hyperparam_bounds": nest(bounds), "custom_explore_fn": WithinBounds(bounds)})


SCHEDULER = TuneClass("PB2", PB2Config.key, _build)


class PB2(PopulationBased):
    name = "pb2"
    sections = (PB2Config.key,)

    def check(self, sweep: SweepConfig, issue: Issue, warn: Callable[[str], None]) -> None:
        if sweep.pb2 is None or not sweep.pb2.hyperparam_bounds:
            issue(("pb2",), "PB2 needs pb2.hyperparam_bounds, e.g. {training.lr: [1e-4, 1e-2]}")
        for key, (low, high) in sweep.pb2.hyperparam_bounds.items() if sweep.pb2 is not None else []:
            if whole_numbers_only(key) and math.ceil(low) > math.floor(high):
                issue(("pb2", "hyperparam_bounds", key), f"takes a whole number, and [{low:g}, {high:g}] holds none")
        try:
            import GPy  # noqa: F401
            import sklearn  # noqa: F401
        except ImportError:
            issue(("search", "algorithm"), "pb2 needs the GPy and scikit-learn packages: pip install 'raytrain[pb2]' (or use pbt)")
        super().check(sweep, issue, warn)

    def space(self, sweep: SweepConfig) -> dict[str, DomainSpec]:
        if sweep.pb2 is None:  # said by PB2.check (this may be asked first: a trial's overrides)
            return {}
        # The trials' starting values; PB2 explores within the bounds from there (a whole number rounded).
        return {k: {"randint": [math.ceil(low), math.floor(high) + 1]} if whole_numbers_only(k) else {"uniform": [low, high]}
                for k, (low, high) in sweep.pb2.hyperparam_bounds.items()}

    def scheduler(self, loaded: LoadedSweep) -> Spec | None:
        assert loaded.sweep.pb2 is not None  # checked by PB2.check
        return SCHEDULER.spec(loaded.sweep.pb2.tune_kwargs())

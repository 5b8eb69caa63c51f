"""search.algorithm asha: random search whose weak trials asynchronous successive halving stops early."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import Field, model_validator

from raytrain.sweeps.base import SchedulerSettings, Spec, TuneClass
from raytrain.sweeps.basic import RandomSearch

if TYPE_CHECKING:
    from raytrain.config.sweep import SweepConfig
    from raytrain.config.sweep_load import LoadedSweep


class ASHAConfig(SchedulerSettings):
    """Asynchronous successive halving (Tune `ASHAScheduler`): stops weak trials early."""

    key: ClassVar[str] = "asha"

    max_t: float = Field(default=100, gt=0)
    """No trial runs longer than this many `time_attr` units."""
    grace_period: float = Field(default=1, gt=0)
    """A trial runs at least this long before it can be stopped."""
    reduction_factor: float = Field(default=4, gt=1)
    """Keep 1/reduction_factor of the trials at each rung."""

    @model_validator(mode="after")
    def _grace_within_max_t(self) -> ASHAConfig:
        if self.grace_period > self.max_t:
            raise ValueError(f"grace_period ({self.grace_period:g}) must not exceed max_t ({self.max_t:g})")
        return self


def _build(kwargs: dict[str, Any]) -> Any:
    from ray.tune.schedulers import ASHAScheduler

    return ASHAScheduler(**kwargs)


SCHEDULER = TuneClass("ASHAScheduler", ASHAConfig.key, _build)


def scheduler(sweep: SweepConfig) -> Spec:
    """The ASHA scheduler of the sweep's `asha:` settings (defaults when it has none)."""
    return SCHEDULER.spec((sweep.asha or ASHAConfig()).tune_kwargs())


class ASHA(RandomSearch):
    """Random search, with ASHA stopping the weak trials."""

    name = "asha"
    sections = (ASHAConfig.key,)

    def scheduler(self, loaded: LoadedSweep) -> Spec | None:
        return scheduler(loaded.sweep)

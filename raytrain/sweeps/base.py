"""What every sweep algorithm unit provides: its settings section, its checks, the Tune objects it plans."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from raytrain.sweeps.space import DomainSpec, Section

if TYPE_CHECKING:
    from raytrain.config.sweep import SweepConfig
    from raytrain.config.sweep_load import LoadedSweep

KeyPath = tuple[str, ...]
"""Path of a key in the sweep file: `("pbt", "hyperparam_mutations", "training.lr")`."""

Issue = Callable[[KeyPath, str], None]
"""Records one problem with the key at a path (the loader adds its file:line)."""

Spec = dict[str, Any]
"""A Tune object as plan data: `{"class": Tune class name, "kwargs": {...}}`."""


@dataclass(frozen=True)
class TuneClass:
    """A Tune scheduler or search algorithm a plan names, and how to build it from the plan's kwargs."""

    name: str
    """The Tune class name, the plan's `class`."""
    section: str
    """The sweep-file section it is built from: where Tune's own refusal of it is reported."""
    build: Callable[[dict[str, Any]], Any]
    """The Tune object for the plan's kwargs (Ray need not be running)."""
    dry_build: Callable[[dict[str, Any]], Any] | None = None
    """What `check` builds instead of `build` when building writes something (Optuna's searcher opens its database)."""

    def spec(self, kwargs: dict[str, Any]) -> Spec:
        """This class with these keyword arguments, as plan data."""
        return {"class": self.name, "kwargs": kwargs}


class Settings(Section):
    """The settings section of an algorithm (`pbt:`, `asha:`, ...): the checks that hold wherever it appears."""

    key: ClassVar[str]
    """Its key in the sweep file, the `SweepConfig` field that holds it."""
    tune_domains: ClassVar[bool] = True
    """Whether the hyperparameters it varies are Tune search domains (PB2's bounds are not)."""

    def searched(self) -> list[tuple[KeyPath, Any]]:
        """(path in the sweep file, distribution or list of values) of each hyperparameter it varies."""
        return []

    def check(self, sweep: SweepConfig, known_metrics: set[str], issue: Issue) -> None:
        """Checks against the rest of the sweep, run whichever algorithm is chosen."""


class SchedulerSettings(Settings):
    """Settings of a Tune trial scheduler: every field is a keyword argument of its constructor, passed as it is."""

    time_attr: str = "training_iteration"
    """The result attribute that measures progress."""

    def tune_kwargs(self) -> dict[str, Any]:
        """The scheduler's keyword arguments, JSON-ready."""
        return self.model_dump(mode="json")

    def check(self, sweep: SweepConfig, known_metrics: set[str], issue: Issue) -> None:
        if self.time_attr not in known_metrics:
            issue(
                (self.key, "time_attr"),
                f"{self.time_attr!r} is not a reported metric; use training_iteration, time_total_s or num_env_steps_sampled_lifetime",
            )


def _basic_variant_generator(kwargs: dict[str, Any]) -> Any:
    from raytrain.tune.population import PopulationGenerator

    return PopulationGenerator(**kwargs)


BASIC_SEARCH = TuneClass("BasicVariantGenerator", "search", _basic_variant_generator)
"""Tune's random and grid search: samples `space:` (and a scheduler's hyperparameters) itself.

Built as `raytrain.tune.population.PopulationGenerator`, Tune's class that reports itself finished only
once its trials are, so that Tune keeps a paused trial's actor for reuse (the kwargs are Tune's)."""


class Algorithm:
    """One value of `search.algorithm`: the sections it reads, its checks and the Tune objects of its plan."""

    name: ClassVar[str]
    """Its `search.algorithm` value."""
    sections: ClassVar[tuple[str, ...]] = ()
    """The settings sections it reads; any other one in the file is an error."""
    seeds_trials: ClassVar[bool] = True
    """Whether Tune draws a different experiment.seed per trial; a searcher that models results must not tune it."""
    reuses_actors: ClassVar[bool] = False
    """`reuse_actors` when the sweep does not set it: on where trials pause and resume as a matter of course."""

    def misplaced(self, section: str) -> str:
        """The message for a settings section this algorithm does not read."""
        return f"is set but search.algorithm is {self.name}; remove it or set search.algorithm: {section}"

    def check(self, sweep: SweepConfig, issue: Issue, warn: Callable[[str], None]) -> None:
        """Checks of a sweep that chose this algorithm (`warn` records a legal but suspicious choice)."""

    def space(self, sweep: SweepConfig) -> dict[str, DomainSpec]:
        """Hyperparameters it varies besides `space:`, as plan data (`space:` wins for a key in both)."""
        return {}

    def scheduler(self, loaded: LoadedSweep) -> Spec | None:
        """Its trial scheduler as plan data (None: Tune's FIFO)."""
        return None

    def search_alg(self, loaded: LoadedSweep) -> Spec:
        """Its search algorithm as plan data. Tune's BasicVariantGenerator limits how many trials run at once itself
        (`max_concurrent`): Tune ignores TuneConfig's max_concurrent_trials beside one, with a log line alone."""
        limit = loaded.sweep.search.max_concurrent_trials
        return BASIC_SEARCH.spec({"random_state": loaded.sweep.search.seed, **({"max_concurrent": limit} if limit else {})})

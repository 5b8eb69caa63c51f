"""search.algorithm optuna: Optuna's samplers (TPE and co.) as the search algorithm, optionally with ASHA."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from raytrain.config.schema import Seed
from raytrain.sweeps import asha
from raytrain.sweeps.base import Algorithm, Issue, Settings, Spec, TuneClass
from raytrain.sweeps.space import Grid, nest

if TYPE_CHECKING:
    from raytrain.config.sweep import SweepConfig
    from raytrain.config.sweep_load import LoadedSweep

OPTUNA_DB = "optuna.db"
"""The study's database, in the experiment folder (a resumed sweep continues the same study)."""


class OptunaConfig(Settings):
    """Optuna search (Tune `OptunaSearch`); the study is kept in `optuna.db` beside the experiment."""

    key: ClassVar[str] = "optuna"

    sampler: Literal["tpe", "cmaes", "random", "nsga2"] = "tpe"
    """Optuna sampler."""
    seed: Seed | None = None
    """Sampler seed, 0 to 2**31-1 (default: search.seed)."""
    points_to_evaluate: list[dict[str, Any]] | None = None
    """Configurations ({dotted key: value}) to try first."""
    pruner: Literal["asha"] | None = None
    """Stop weak trials early with ASHA (settings from the `asha` section)."""

    def check(self, sweep: SweepConfig, known_metrics: set[str], issue: Issue) -> None:
        for i, point in enumerate(self.points_to_evaluate or []):
            for key in point:
                if key not in sweep.space:
                    issue((self.key, "points_to_evaluate", str(i), key), "is not a key of `space`")


def sampler(name: str, seed: int | None) -> Any:
    """The Optuna sampler `optuna.sampler` names."""
    import optuna

    samplers = {
        "tpe": optuna.samplers.TPESampler,
        "cmaes": optuna.samplers.CmaEsSampler,
        "random": optuna.samplers.RandomSampler,
        "nsga2": optuna.samplers.NSGAIISampler,
    }
    return samplers[name](seed=seed)


def _build(kwargs: dict[str, Any]) -> Any:
    import optuna

    from raytrain.tune.optuna_search import ResumableOptunaSearch

    Path(kwargs["storage"].removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    return ResumableOptunaSearch(
        sampler=sampler(kwargs["sampler"], kwargs["seed"]),
        study_name=kwargs["study_name"],
        storage=optuna.storages.RDBStorage(kwargs["storage"]),
        seed=kwargs["seed"],
        points_to_evaluate=kwargs["points_to_evaluate"],
    )


SEARCH = TuneClass(
    "OptunaSearch", OptunaConfig.key, _build, dry_build=lambda kwargs: sampler(kwargs["sampler"], kwargs["seed"])
)


class Optuna(Algorithm):
    """Optuna proposes each trial's values from the results so far."""

    name = "optuna"
    sections = (OptunaConfig.key, asha.ASHAConfig.key)
    seeds_trials = False  # the sampler would model the seed as if it were a hyperparameter

    def check(self, sweep: SweepConfig, issue: Issue, warn: Callable[[str], None]) -> None:
        if sweep.asha is not None and (sweep.optuna is None or sweep.optuna.pruner != "asha"):
            issue(("asha",), "is set but optuna.pruner is not asha; add `pruner: asha` under optuna to use it")
        for key, dist in sweep.space.items():
            if isinstance(dist, Grid):
                issue(("space", key), "Optuna cannot sample a grid; use `distribution: choice`")
            if "/" in key:  # Tune's OptunaSearch names parameters by their path joined with `/`
                issue(("space", key), "Optuna cannot search a key that holds `/` (Tune names its parameters by "
                      "their path joined with `/`); search it with another search.algorithm (random)")
        if not sweep.space:
            issue(("space",), "Optuna needs a search space")
        if sweep.optuna is not None and sweep.optuna.sampler == "cmaes":
            try:
                import cmaes  # noqa: F401  (CmaEsSampler imports it at its first relative sample: the second trial)
            except ImportError:
                issue(("optuna", "sampler"), "Optuna's cmaes sampler needs the cmaes package: pip install "
                      "'raytrain[cmaes]' (or use tpe)")

    def scheduler(self, loaded: LoadedSweep) -> Spec | None:
        settings = loaded.sweep.optuna
        return asha.scheduler(loaded.sweep) if settings and settings.pruner == "asha" else None

    def search_alg(self, loaded: LoadedSweep) -> Spec:
        settings = loaded.sweep.optuna or OptunaConfig()
        return SEARCH.spec({
            "sampler": settings.sampler,
            "seed": settings.seed if settings.seed is not None else loaded.sweep.search.seed,
            "study_name": loaded.name,
            "storage": f"sqlite:///{loaded.experiment_dir / OPTUNA_DB}",
            "points_to_evaluate": [nest(point) for point in settings.points_to_evaluate or []] or None,
        })

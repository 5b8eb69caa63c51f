"""Sweep algorithms, one unit each: its settings section, its checks, the Tune objects it plans and builds.

`raytrain.config.sweep` holds the sweep file's schema and takes each section's model from here;
`raytrain.config.sweep_load` runs the units' checks and `raytrain.tune.build` asks them for their plan.
Nothing here imports Ray at import time.

To add an algorithm: write its unit (a module with an `Algorithm`, its `Settings` section if it has one,
and the `TuneClass`es it plans) and enter it below (its name in `AlgorithmName` too). A settings section
also needs its field in `SweepConfig`, whose fields are declared one by one for the type checker and the
docs; `tests/unit/test_sweep_algorithms.py` fails until the schema and the registry agree.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from raytrain.sweeps import asha, optuna, pb2, pbt
from raytrain.sweeps.base import BASIC_SEARCH, Algorithm, Settings, TuneClass
from raytrain.sweeps.basic import GridSearch, RandomSearch

if TYPE_CHECKING:
    from raytrain.config.sweep import SweepConfig

AlgorithmName = Literal["pbt", "pb2", "asha", "optuna", "random", "grid"]
"""The values of `search.algorithm`, the keys of ALGORITHMS."""

ALGORITHMS: dict[str, Algorithm] = {
    algorithm.name: algorithm
    for algorithm in (pbt.PBT(), pb2.PB2(), asha.ASHA(), optuna.Optuna(), RandomSearch(), GridSearch())
}

SETTINGS: tuple[type[Settings], ...] = (pbt.PBTConfig, pb2.PB2Config, asha.ASHAConfig, optuna.OptunaConfig)
"""The settings sections, in the order the sweep file's schema lists them."""

TUNE_CLASSES: dict[str, TuneClass] = {
    tune_class.name: tune_class
    for tune_class in (pbt.SCHEDULER, pb2.SCHEDULER, asha.SCHEDULER, optuna.SEARCH, BASIC_SEARCH)
}
"""Every Tune class a plan can name, by the name it has there."""


def settings_in(sweep: SweepConfig) -> list[Settings]:
    """The settings sections the sweep file has, whichever algorithm it chose."""
    return [section for model in SETTINGS if (section := getattr(sweep, model.key)) is not None]


DRAWN_SEED = "experiment.seed"


def trial_overrides(sweep: SweepConfig) -> dict[str, Any]:
    """What each trial takes from the sweep's search, as plan data (`domain_spec`s by dotted key): `space:`, what
    the algorithm varies besides (PBT's mutations: `space:` wins for a key in both), and a seed drawn per trial
    from search.seed where several trials would otherwise be copies of each other (`DRAWN_SEED`, unless searched)."""
    from raytrain.sweeps.space import domain_spec, grid_size

    algorithm = ALGORITHMS[sweep.search.algorithm]
    space = {k: domain_spec(d) for k, d in sweep.space.items()}
    for key, spec in algorithm.space(sweep).items():
        space.setdefault(key, spec)
    if algorithm.seeds_trials and DRAWN_SEED not in space and sweep.search.num_samples * grid_size(space) > 1:
        # Different seeds per trial, drawn reproducibly from search.seed: otherwise trials with the same
        # hyperparameters are copies of each other (and PBT populations lose their diversity).
        space[DRAWN_SEED] = {"randint": [0, 1_000_000]}
    return space

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

from typing import TYPE_CHECKING, Literal

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

"""search.algorithm random and grid: Tune's own variant generator, no scheduler."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from raytrain.sweeps.base import Algorithm, Issue
from raytrain.sweeps.space import Grid

if TYPE_CHECKING:
    from raytrain.config.sweep import SweepConfig


class RandomSearch(Algorithm):
    """Each trial samples `space:` independently."""

    name = "random"

    def check(self, sweep: SweepConfig, issue: Issue, warn: Callable[[str], None]) -> None:
        if not sweep.space and sweep.search.num_samples == 1:
            warn("warning: the sweep has no search space and one sample: it runs a single trial")


class GridSearch(Algorithm):
    """Every combination of the `distribution: grid` values, `search.num_samples` times."""

    name = "grid"

    def check(self, sweep: SweepConfig, issue: Issue, warn: Callable[[str], None]) -> None:
        for key, dist in sweep.space.items():
            if not isinstance(dist, Grid):
                issue(("space", key), "search.algorithm grid needs every space entry to be `distribution: grid`")

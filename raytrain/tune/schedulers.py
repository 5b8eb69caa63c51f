"""Tune's PBT and PB2, pausing a trial to let another run only when that other trial has no room to run.

Asynchronous PBT shares the cluster between more trials than fit at once: at each perturbation point, a
trial pauses if any other trial is PENDING or PAUSED, so the waiting one gets its slot. But a trial is
PENDING too while its own actor starts (a new process importing torch and RLlib and building the
algorithm: seconds). When all the trials fit, the pause helps nobody, and with actor reuse it goes wrong:
the paused trial's actor is handed to the starting trial, whose half-started actor Tune then stops, and
the paused trial is PENDING in turn, with a new actor starting. If the iterations are short, the running
trial reaches its next perturbation point before that actor is up, and pauses again. Seen with 2 trials on
2 CPUs when one actor started half a second later than the other: the whole sweep then ran in one process,
the trials taking turns, while the other CPU started actors that were stopped before they were up.

So when every live trial's resources fit in the cluster's at once, a trial that reaches its perturbation
point goes on; a trial that waits will get its own slot. Exploits are unchanged (the exploiting trial
still pauses and restarts from the clone), as is synchronous mode, where pausing is how trials wait for
each other. When the trials do not all fit (more trials than slots, or a node is gone), Tune's rule holds.
The test sums the cluster's resources, not each node's: should a trial not fit on any one node although the
sum has room, it starts when a trial ends or an exploit frees an actor (PBT gives a freed actor to the
trial furthest behind).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import ray
from ray.tune.experiment import Trial
from ray.tune.schedulers import PopulationBasedTraining
from ray.tune.schedulers.trial_scheduler import TrialScheduler

# Sums of fractional requests (4 x 0.5 CPU) against the cluster's total.
_SLACK = 1e-6


def all_fit(trials: list[Any], cluster: dict[str, float]) -> bool:
    """Whether the resources of the trials not finished fit in `cluster` (Ray's resource totals) together."""
    need: Counter[str] = Counter()
    for trial in trials:
        if not trial.is_finished():
            need.update(trial.placement_group_factory.required_resources)
    return all(cluster.get(key, 0.0) + _SLACK >= amount for key, amount in need.items())


def trials_at_once(bundles: list[dict[str, float]], cluster: dict[str, float]) -> int:
    """How many trials of `bundles` (one trial's placement group) Ray's resource totals `cluster` hold at once,
    by each resource's total (at least 1; where they are spread over nodes Ray may place fewer)."""
    need: Counter[str] = Counter()
    for bundle in bundles:
        need.update(bundle)
    counts = [int((cluster.get(key, 0.0) + _SLACK) // amount) for key, amount in need.items() if amount > 0]
    return max(1, min(counts, default=1))


class _PauseOnlyToShare:
    """Keeps a trial running at its perturbation point when there is no trial it would make room for."""

    _synch: bool

    def on_trial_result(self, tune_controller: Any, trial: Any, result: dict[str, Any]) -> str:
        decision: str = super().on_trial_result(tune_controller, trial, result)  # type: ignore[misc]
        if decision != TrialScheduler.PAUSE or self._synch or trial.status != Trial.RUNNING:
            return decision
        if all_fit(tune_controller.get_trials(), ray.cluster_resources()):
            return TrialScheduler.CONTINUE
        return decision


class RaytrainPBT(_PauseOnlyToShare, PopulationBasedTraining):
    """Tune's PopulationBasedTraining; a trial pauses to share the cluster only when the trials do not all fit."""


def __getattr__(name: str) -> Any:
    """`RaytrainPB2`, made on first use. Importing Tune's PB2 imports scikit-learn and with it SciPy: about 1.2 s
    of CPU that a PBT sweep's driver paid before Ray could start, and an Optuna sweep's (`trials_at_once`) before
    its first trial (Tune's own `ray.tune.schedulers` imports PB2 lazily for the same reason). The class keeps its
    name here, where a PB2 sweep's `tuner.pkl` finds it."""
    if name != "RaytrainPB2":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from ray.tune.schedulers.pb2 import PB2

    class RaytrainPB2(_PauseOnlyToShare, PB2):
        """Tune's PB2; a trial pauses to share the cluster only when the trials do not all fit."""

    RaytrainPB2.__qualname__ = name
    globals()[name] = RaytrainPB2  # made once: pickle finds the same class again by its name
    return RaytrainPB2

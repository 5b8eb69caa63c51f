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
from pathlib import Path
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


CLONE_PREFIX = "pbt_clone_"
"""The folder, inside an exploiting trial's own folder, that holds its copy of the checkpoint it restores."""


def keep_for_the_clone(path: Path, trial_dir: Path, donor: str) -> Path | None:
    """A copy of checkpoint folder `path` (another trial's) inside `trial_dir`, its files hard-linked where the file
    system allows it (copied where not): `pbt_clone_<donor>_<checkpoint folder>`, made beside it and renamed, so it
    is whole or absent. Where `path` is gone, the copy made of it before, if any; None where there is none or the copy
    cannot be made (the trial restores from `path` then, as in Tune)."""
    import os
    import shutil

    target = trial_dir / f"{CLONE_PREFIX}{donor}_{path.name}"
    if not path.is_dir():
        return target if target.is_dir() else None
    partial = target.with_name(f".{target.name}.partial")

    def link_or_copy(source: str, destination: str) -> None:
        try:
            os.link(source, destination)
        except OSError:
            shutil.copy2(source, destination)

    try:
        shutil.rmtree(partial, ignore_errors=True)
        shutil.copytree(path, partial, copy_function=link_or_copy)
        if target.exists():
            shutil.rmtree(target)
        partial.rename(target)
    except OSError:
        shutil.rmtree(partial, ignore_errors=True)
        return None
    return target


class _ClonesKeepTheirCheckpoint:
    """An exploiting trial restores from a copy of the checkpoint it clones, kept in its own folder.

    Tune's PBT points the exploiting trial, now paused, at the stronger trial's latest checkpoint, by its path. Tune
    runs the paused trial with the least training time first, and a clone is given its donor's, so where more
    trials wait than fit it runs after the others; meanwhile its donor trains on and, with `checkpoint.num_to_keep`
    set, deletes its older checkpoints, that one too. The clone then failed ("Could not recover from checkpoint as it
    does not exist on storage anymore") and the sweep ended with an errored trial: the shipped PBT sweep with 8
    trials, `checkpoint.frequency: 1` and `num_to_keep: 3` on 2 CPUs failed so at its first exploit. So the clone
    gets a copy in its own folder (hard links: no data is copied on a file system that has them, NFS included),
    which its donor's deletions do not reach, and which is removed once the clone has a newer checkpoint of its own.
    A copy that cannot be made leaves Tune's reference as it was.

    The same deletion can come before the exploit: PBT records a leading trial's checkpoint at that trial's
    perturbation point, and a weaker trial clones it at its own, later; a leader that trained on in between may have
    deleted it. Tune paused the weaker trial all the same, and it failed as above. That exploit is skipped instead,
    as Tune skips one whose donor has no checkpoint: the weaker trial goes on, and clones at its next point."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._without_copies: set[str] = set()
        """The trials whose folder this scheduler has read and left without a copy: it is read again only after an
        exploit gives the trial one. Not kept across `tune resume` (Tune does not save its scheduler's state), so a
        resumed sweep reads each trial's folder once, which removes a copy the stopped run left there."""

    def _exploit(self, tune_controller: Any, trial: Any, trial_to_clone: Any) -> None:
        donors = self._trial_state[trial_to_clone].last_checkpoint  # type: ignore[attr-defined]
        if _local(getattr(donors, "filesystem", None)) and not Path(donors.path).is_dir():
            import logging

            logging.getLogger("ray.tune.schedulers.pbt").warning(
                "[pbt]: trial %s's checkpoint %s was deleted (checkpoint.num_to_keep) before trial %s could clone it: "
                "exploit skipped", trial_to_clone, donors.path, trial)
            return
        super()._exploit(tune_controller, trial, trial_to_clone)  # type: ignore[misc]
        result = _latest_result(trial)
        checkpoint = getattr(result, "checkpoint", None)
        if checkpoint is None or not _local(checkpoint.filesystem):
            return
        kept = keep_for_the_clone(Path(checkpoint.path), Path(trial.path), trial_to_clone.trial_id)
        self._without_copies.discard(trial.trial_id)  # a copy, or a partial one where it failed half way
        if kept is not None:
            result.checkpoint = type(checkpoint)(path=str(kept), filesystem=checkpoint.filesystem)

    def on_trial_result(self, tune_controller: Any, trial: Any, result: dict[str, Any]) -> str:
        decision: str = super().on_trial_result(tune_controller, trial, result)  # type: ignore[misc]
        self._drop_clone_copies(trial)
        return decision

    def on_trial_complete(self, tune_controller: Any, trial: Any, result: dict[str, Any]) -> None:
        super().on_trial_complete(tune_controller, trial, result)  # type: ignore[misc]
        self._drop_clone_copies(trial)

    def _drop_clone_copies(self, trial: Any) -> None:
        """Remove the trial's copies of cloned checkpoints (`keep_for_the_clone`, and one a crash left half made)
        but the one it restores from next. Called on every result of every trial, so a trial's folder (a directory
        listing on NFS) is read only while it may hold a copy."""
        import shutil

        if trial.trial_id in self._without_copies:
            return
        try:
            folder = Path(trial.path)
            copies = [p for p in [*folder.glob(f"{CLONE_PREFIX}*"), *folder.glob(f".{CLONE_PREFIX}*.partial")]
                      if p.is_dir()]
        except OSError:
            return
        checkpoint = getattr(_latest_result(trial), "checkpoint", None)
        needed = Path(checkpoint.path) if checkpoint is not None else None
        for copy in copies:
            if copy != needed:
                shutil.rmtree(copy, ignore_errors=True)
        if not any(copy.exists() for copy in copies):  # none left, not even one it restores from
            self._without_copies.add(trial.trial_id)


def _latest_result(trial: Any) -> Any:
    """The trial's latest checkpoint and its result (a `_TrainingResult`, or None), where Tune restores the trial
    from next: Tune's PBT sets it at an exploit. Private to Tune (`_CheckpointManager`), so read here only."""
    return trial.run_metadata.checkpoint_manager._latest_checkpoint_result


def _local(filesystem: Any) -> bool:
    """Whether a checkpoint's pyarrow file system is this machine's (a shared NFS mount included)."""
    import pyarrow.fs

    return isinstance(filesystem, pyarrow.fs.LocalFileSystem)


class RaytrainPBT(_ClonesKeepTheirCheckpoint, _PauseOnlyToShare, PopulationBasedTraining):
    """Tune's PopulationBasedTraining; a trial pauses to share the cluster only when the trials do not all fit, and an
    exploiting trial restores from its own copy of the checkpoint it clones."""


def __getattr__(name: str) -> Any:
    """`RaytrainPB2`, made on first use. Importing Tune's PB2 imports scikit-learn and with it SciPy: about 1.2 s
    of CPU that a PBT sweep's driver paid before Ray could start, and an Optuna sweep's (`trials_at_once`) before
    its first trial (Tune's own `ray.tune.schedulers` imports PB2 lazily for the same reason). The class keeps its
    name here, where a PB2 sweep's `tuner.pkl` finds it."""
    if name != "RaytrainPB2":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from ray.tune.schedulers.pb2 import PB2

    class RaytrainPB2(_ClonesKeepTheirCheckpoint, _PauseOnlyToShare, PB2):
        """Tune's PB2; a trial pauses to share the cluster only when the trials do not all fit, and an exploiting
        trial restores from its own copy of the checkpoint it clones."""

    RaytrainPB2.__qualname__ = name
    globals()[name] = RaytrainPB2  # made once: pickle finds the same class again by its name
    return RaytrainPB2

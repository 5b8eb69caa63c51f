"""Optuna search for sweeps that must survive a killed driver (imports Ray Tune: load it lazily)."""

from __future__ import annotations

from typing import Any

from ray.tune.search.optuna import OptunaSearch


class ResumableOptunaSearch(OptunaSearch):
    """OptunaSearch whose resume survives a study that is ahead of Tune's saved experiment state.

    The study (optuna.db) records a trial's end at once; Tune saves its experiment state every few
    seconds. A driver killed in between resumes a trial Tune still thinks is running while the study says
    it is finished, and Optuna refuses every later report of it (UpdateFinishedTrialError), which ended
    the whole resumed sweep. Such trials keep the outcome the study already holds.
    """

    def restore(self, checkpoint_path: str) -> None:
        super().restore(checkpoint_path)
        self._finished_before_resume: set[str] = set()
        storage = getattr(self._ot_study, "_storage", None)
        for trial_id, ot_trial in self._ot_trials.items():
            if trial_id in self._completed_trials or storage is None:
                continue
            try:
                state = storage.get_trial(ot_trial._trial_id).state
            except Exception:  # noqa: BLE001 - a trial the storage lost: leave it to Optuna
                continue
            if state.is_finished():
                self._finished_before_resume.add(trial_id)
                self._completed_trials.add(trial_id)

    def on_trial_result(self, trial_id: str, result: dict[str, Any]) -> None:
        if trial_id in getattr(self, "_finished_before_resume", ()):
            return
        super().on_trial_result(trial_id, result)

    def on_trial_complete(self, trial_id: str, result: dict[str, Any] | None = None, error: bool = False) -> None:
        if trial_id in getattr(self, "_finished_before_resume", ()):
            return
        super().on_trial_complete(trial_id, result, error)

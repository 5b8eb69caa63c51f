"""Tune's BasicVariantGenerator, reporting "finished" only once the trials it made have finished.

Why: Tune keeps a paused trial's actor for reuse (`reuse_actors`) only while its search algorithm is not
finished or another trial waits for an actor. A BasicVariantGenerator is finished as soon as it has made
its last trial, which for a population that all runs at once (the shipped PBT sweep) is before the first
result. From then on every PBT exploit, which pauses the trial and resumes it from the donor's checkpoint,
stopped the trial's actor and started a new one: a new process that imports torch and RLlib and builds
the algorithm again, seconds per exploit, and the reset_config swap never ran.

Reporting "not finished" while a trial it made is still live changes nothing else: Tune's own end test
already waits for every trial to finish, and when Tune stops the whole experiment (time budget, a
stopper) it stops every trial, which then counts as finished here too. After `tune resume` the trials are
Tune's restored copies, not the ones this object made, so it falls back to Tune's own test.
"""

from __future__ import annotations

from typing import Any

from ray.tune.search import BasicVariantGenerator


class PopulationGenerator(BasicVariantGenerator):
    """A BasicVariantGenerator that is finished when it has made all its trials and they have all finished."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._made: list[Any] = []

    def next_trial(self) -> Any:
        trial = super().next_trial()
        if trial is not None:
            self._made.append(trial)
        return trial

    def is_finished(self) -> bool:
        return bool(super().is_finished()) and all(trial.is_finished() for trial in self._made)

    def get_state(self) -> Any:
        state = super().get_state()
        if isinstance(state, dict):  # the trials are Tune's to save, not the searcher's
            state.pop("_made", None)
        return state

    def __getstate__(self) -> dict[str, Any]:  # tuner.pkl, and so a restored copy: without the live trials
        return {**self.__dict__, "_made": []}

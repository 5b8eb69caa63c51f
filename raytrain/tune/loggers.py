"""Tune's result.json and progress.csv writers, without the rows a paused trial lost.

Tune's driver writes each trial's result.json and progress.csv into a staging folder of its own
(`/tmp/ray/session_*/artifacts/...`) and copies that folder to the experiment folder now and then. Each
time a trial starts, its writer first copies the experiment folder's file back over the staged one
("resume the file from remote storage"). That is right for the first start in a driver (`tune resume`
after a crash starts with an empty staging folder), but a trial also starts again every time PBT or PB2
pauses and resumes it, and the experiment folder's copy is then older than the staged one: every row
written since the last copy was lost. A 4-trial PB2 sweep on 2 CPUs lost 5 to 7 of its 32 rows
(a trial's result.json read iterations 1, 3, 4, 7, 8), and the leaderboard, plots and `tune status`
read those files.

These writers copy the file back only when this driver has not staged it yet.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ray.tune.logger import CSVLoggerCallback, JsonLoggerCallback


class _KeepStaged:
    """Copies a trial's file back from the experiment folder only when this driver has not staged it yet."""

    def _restore_from_remote(self, file_name: str, trial: Any) -> None:
        if not Path(trial.local_path, file_name).exists():
            super()._restore_from_remote(file_name, trial)  # type: ignore[misc]


class ResultJson(_KeepStaged, JsonLoggerCallback):
    """Tune's result.json writer, keeping the rows this driver staged."""


class ProgressCsv(_KeepStaged, CSVLoggerCallback):
    """Tune's progress.csv writer, keeping the rows this driver staged."""


def result_writers() -> list[Any]:
    """The writers to give Tune in place of its own (it adds its own only when none of the kind is given)."""
    return [ResultJson(), ProgressCsv()]

"""Tune's experiment state (`experiment_state-<time>.json`), kept resumable through a crash.

Tune writes the state (every trial's status and checkpoints) on the driver, then copies it into the
experiment folder in a background thread, overwriting the file in place. A driver killed during that copy
(a power cut, kill -9) leaves the file empty or cut short, and `Tuner.restore` then fails to restore the
run state and carries on without it: it starts the sweep over, or ends at once with exit 0.

So the sweep's driver keeps a copy of the newest complete state beside it (`raytrain.tune.run.StateBackup`,
a Tune callback, saved as `experiment_state-<time>.json.complete`), and `raytrain tune resume` puts that copy back before
Tune reads the state (`repair`). With no complete copy it refuses (`check`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from raytrain.runs import write_atomic

STATE_GLOB = "experiment_state-*.json"
COPY_SUFFIX = ".complete"


def newest_state(exp_dir: Path) -> Path | None:
    """The experiment state Tune restores from: the newest `experiment_state-<time>.json`."""
    found = sorted(exp_dir.glob(STATE_GLOB))
    return found[-1] if found else None


def parse(data: bytes) -> dict[str, Any] | None:
    """The state in `data`, or None when it is not a whole one (empty, cut short, not Tune's)."""
    try:
        state = json.loads(data)
    except ValueError:  # JSONDecodeError and UnicodeDecodeError
        return None
    return state if isinstance(state, dict) and isinstance(state.get("trial_data"), list) else None


def _read(path: Path) -> dict[str, Any] | None:
    try:
        return parse(path.read_bytes())
    except OSError:
        return None


def read(exp_dir: Path) -> dict[str, Any] | None:
    """The newest experiment state, or its complete copy where the file itself is broken; None if neither."""
    path = newest_state(exp_dir)
    if path is None:
        return None
    return _read(path) or _read(path.with_name(path.name + COPY_SUFFIX))


def trials(exp_dir: Path) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(trial, runtime) of each trial in the newest experiment state (`read`), as Tune wrote them."""
    data = read(exp_dir) or {}
    found = []
    for entry in data.get("trial_data", []):
        trial, runtime = (entry[0], entry[1]) if isinstance(entry, (list, tuple)) else (entry, {})
        try:
            trial = json.loads(trial) if isinstance(trial, str) else trial
            runtime = json.loads(runtime) if isinstance(runtime, str) else (runtime or {})
        except ValueError:
            continue
        if isinstance(trial, dict) and isinstance(runtime, dict):
            found.append((trial, runtime))
    return found


def finished(exp_dir: Path, plan: Any) -> int | None:
    """How many trials the experiment has when every trial its `plan` (raytrain_sweep.json's) makes is in the
    newest state and TERMINATED: a resume would have nothing to do. None otherwise (a trial running, paused,
    errored or not yet made), and for a plan that does not say."""
    from raytrain.sweeps.space import grid_size
    from raytrain.tune import TRIAL_KEY

    try:
        planned = int(plan["tune_config"]["num_samples"]) * grid_size(plan["param_space"][TRIAL_KEY]["overrides"])
    except (KeyError, TypeError, ValueError):
        return None
    statuses = [trial.get("status") for trial, _ in trials(exp_dir)]
    if statuses and len(statuses) >= planned and all(status == "TERMINATED" for status in statuses):
        return len(statuses)
    return None


def broken(exp_dir: Path) -> tuple[Path, bool] | None:
    """(the state file, whether a complete copy exists) when the newest state is not whole; None when it is."""
    path = newest_state(exp_dir)
    if path is None or _read(path) is not None:
        return None
    return path, _read(path.with_name(path.name + COPY_SUFFIX)) is not None


def repair(exp_dir: Path) -> Path | None:
    """Put the complete copy back over a broken newest state (atomically). Returns the file repaired, if any."""
    found = broken(exp_dir)
    if found is None or not found[1]:
        return None
    path = found[0]
    write_atomic(path, path.with_name(path.name + COPY_SUFFIX).read_bytes())
    return path

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

from raytrain.runs import checkpoint_number, write_atomic

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


ENDED = frozenset({"TERMINATED", "ERROR"})
"""The statuses of a trial that has ended: TERMINATED (a resume leaves it) or ERROR (a resume retries it from its last
checkpoint; `--restart-errored` starts it over)."""


def statuses(exp_dir: Path) -> dict[str, str]:
    """Each trial's status in the newest experiment state (`trials`), by trial id; empty where none can be read."""
    return {trial["trial_id"]: trial.get("status", "") for trial, _ in trials(exp_dir)
            if isinstance(trial.get("trial_id"), str)}


def ended_since(before: dict[str, str], now: dict[str, str]) -> list[str]:
    """The trials that have ended in `now` (`ENDED`) and had not in `before`, which lists them; by trial id."""
    return [trial for trial, status in now.items()
            if status in ENDED and trial in before and before[trial] not in ENDED]


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


def cut_by_the_budget(exp_dir: Path) -> list[str]:
    """The trials the sweep's time budget (`time_budget_s`) stopped, by trial id, in the newest experiment state:
    TERMINATED with a last result that is not `done`. Tune marks a trial's last result done when its own stop
    criteria, its scheduler (ASHA's or PBT's stop) or the end of its trainable stop it; the stop of the whole
    experiment marks it TERMINATED alone. The budget is the only such stop raytrain gives Tune (no `fail_fast`);
    Ctrl-C and SIGTERM leave a trial as it was (RUNNING, PAUSED). Empty where the budget stopped none.

    Tune keeps the spent budget in its state (its `TimeoutStopper`), so a resume of such a sweep stops its trials
    at once: `tune resume` has nothing to continue there."""
    return [trial["trial_id"] for trial, runtime in trials(exp_dir)
            if trial.get("status") == "TERMINATED" and isinstance(trial.get("trial_id"), str)
            and isinstance(runtime.get("last_result"), dict) and not runtime["last_result"].get("done")]


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


PENDING_DECISIONS = ("_cached_trial_decisions", "_queued_trial_decisions")
"""Tune's controller's decisions waiting on a trial's save or result in flight (trial id to STOP, PAUSE,
CONTINUE), which Tune 2.60 saves in the experiment state's `runner_data` with the rest of the controller."""


def forget_pending_decisions(exp_dir: Path) -> dict[str, str]:
    """Drop from the newest state what Tune's controller had decided for trials whose save was in flight when the
    state was saved (`PENDING_DECISIONS`); returns them (trial id to decision), none when there were none.

    A trial whose actor died while it was saving (its node or its Ray stopped, the OOM killer) gets its stop
    decided for when that save comes back (STOP), and Tune saves that with its state. The resumed controller read
    it back and applied it to the first save of the resumed trial: the trial ran one iteration and was ended,
    TERMINATED, as if it had reached its stop (3 of 4 resumes of a sweep whose local Ray was stopped, here). No save
    of the run before is in flight in a resumed one, so none of these decisions can stand.
    """
    path = newest_state(exp_dir)
    data = _read(path) if path is not None else None
    runner = data.get("runner_data") if data is not None else None
    if path is None or data is None or not isinstance(runner, dict):
        return {}
    dropped = {}
    for key in PENDING_DECISIONS:
        pending = runner.get(key)
        if isinstance(pending, dict) and pending:
            dropped.update({str(trial): str(decision) for trial, decision in pending.items()})
            runner[key] = {}
    if dropped:
        write_atomic(path, json.dumps(data))
    return dropped


SET_ASIDE = "not_resumed"
"""The folder in a trial's folder that `set_aside` moves what a resume would write again into."""


def _unpickled(value: Any) -> Any:
    """A value Tune wrote into the state with cloudpickle (`{"_type": "CLOUDPICKLE_FALLBACK", "value": hex}`)."""
    from ray import cloudpickle

    if not (isinstance(value, dict) and value.get("_type") == "CLOUDPICKLE_FALLBACK"):
        return None
    try:
        return cloudpickle.loads(bytes.fromhex(value["value"]))
    except Exception:
        return None


def set_aside(exp_dir: Path, restart_errored: bool, stamp: str) -> list[str]:
    """Move out of the way what the trials wrote after Tune last saved the sweep's state, before a resume.

    Tune saves the state (each trial's latest checkpoint and checkpoint number) every few seconds, while a trial
    writes a checkpoint every iteration. A driver killed between two saves leaves checkpoints newer than the state:
    the resumed trial continues from the state's checkpoint and wrote its next ones into the same
    checkpoint_<n> folders, over complete checkpoints, and its result.json and progress.csv had the iterations
    after that checkpoint twice. Each such checkpoint folder, and those rows, go to
    `<trial>/not_resumed/<stamp>/`, as they were. Returns one line per trial that had any.
    """
    said = []
    for trial, runtime in trials(exp_dir):
        status = trial.get("status")
        if status == "TERMINATED" or (status == "ERROR" and restart_errored):  # not continued (restarted: a new folder)
            continue
        storage, manager = _unpickled(trial.get("storage")), _unpickled(runtime.get("checkpoint_manager"))
        index = getattr(storage, "current_checkpoint_index", None)
        name = getattr(storage, "trial_dir_name", None)
        if not isinstance(index, int) or not isinstance(name, str) or "/" in name or name in ("", ".", ".."):
            continue
        latest = getattr(manager, "latest_checkpoint_result", None)
        metrics = getattr(latest, "metrics", None) or {}
        iteration = metrics.get("training_iteration", 0) if latest is not None else 0
        trial_dir = exp_dir / name
        newer = sorted(p for p in trial_dir.glob("checkpoint_*") if p.is_dir() and (n := checkpoint_number(p)) is not None and n > index)
        target = trial_dir / SET_ASIDE / stamp
        rows = {file: _rows_after(trial_dir / file, iteration) for file in ("result.json", "progress.csv")}
        if not newer and not any(later for _, later in rows.values()):
            continue
        target.mkdir(parents=True, exist_ok=True)
        for path in newer:
            path.rename(target / path.name)
        for file, (kept, later) in rows.items():
            if later:
                write_atomic(target / file, "".join(kept[:1] if file == "progress.csv" else []) + "".join(later))
                write_atomic(trial_dir / file, "".join(kept))
        count = max(len(later) for _, later in rows.values())
        what = [f"{len(newer)} checkpoint(s) ({newer[0].name} to {newer[-1].name})"] if newer else []
        what += [f"the rows of {count} iteration(s) after it"] if count else []
        said.append(f"note: {name} continues from its checkpoint of iteration {iteration}, the last one Tune recorded "
                    f"before the sweep stopped; what it wrote after that, {' and '.join(what)}, would have been written "
                    f"again over it: moved to {target}")
    return said


def _rows_after(path: Path, iteration: int) -> tuple[list[str], list[str]]:
    """(the lines of a trial's result.json or progress.csv kept, the lines of iterations after `iteration`); the
    header of progress.csv is kept. A line that cannot be read is kept."""
    import csv

    try:
        lines = path.read_text().splitlines(keepends=True)
    except (OSError, UnicodeDecodeError):
        return [], []
    if path.suffix == ".csv":
        if not lines:
            return [], []
        header = next(csv.reader([lines[0]]), [])
        if "training_iteration" not in header:
            return lines, []
        column = header.index("training_iteration")
        kept, later = lines[:1], list[str]()
        for line in lines[1:]:
            values = next(csv.reader([line]), [])
            after = len(values) > column and values[column].isdigit() and int(values[column]) > iteration
            (later if after else kept).append(line)
        return kept, later
    kept, later = [], []
    for line in lines:
        try:
            number = json.loads(line).get("training_iteration")
        except (ValueError, AttributeError):
            number = None
        (later if isinstance(number, int) and number > iteration else kept).append(line)
    return kept, later

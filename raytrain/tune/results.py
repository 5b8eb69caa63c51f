"""Reading an experiment from storage: its metadata, trial states and results, PBT lineages.

Works during or after a run, from any machine that mounts the experiment folder; needs no Ray cluster.
What is written from it lives in `tune/report.py` (leaderboard, best.yaml, tables) and `tune/plots.py`.
"""

from __future__ import annotations

import json
import math
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from raytrain.errors import SweepError, UsageError
from raytrain.tune import TRIAL_KEY, state

SWEEP_FILE = "sweep.yaml"
META_FILE = "raytrain_sweep.json"
LEADERBOARD_FILE = "leaderboard.json"


@dataclass
class TrialSummary:
    trial_id: str
    name: str
    status: str
    iteration: int
    metric_last: float | None
    metric_best: float | None
    env_steps: int | None
    hyperparameters: dict[str, Any]
    checkpoint: str | None
    path: str
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def finite(value: Any) -> Any:
    """`value`, or None for a missing or NaN metric."""
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else value


@dataclass(frozen=True)
class StoredExperiment:
    """An experiment folder in a storage path: a sweep's, or the run folders of one `raytrain train` name."""

    name: str
    runs: int
    """Run folders of `raytrain train` in it; 0 for a sweep."""
    finished: bool
    """A sweep with its leaderboard (every train experiment counts as finished)."""
    mtime: float
    """When it last changed: a sweep's folder's; a train experiment's newest run folder's (`--dry-run`'s write probe
    touches the experiment folder itself)."""
    latest_run: str | None = None
    """A train experiment's newest run folder, by name (its start time)."""

    @property
    def what(self) -> str:
        if self.runs:
            return f"{self.runs} run{'s' if self.runs > 1 else ''} of `raytrain train`"
        return "a sweep" if self.finished else "a sweep that has not finished"


def experiments_in(storage: Path) -> list[StoredExperiment]:
    """The experiment folders directly in `storage` (a storage path given where one of them was meant), by name."""
    from raytrain.runs import run_folder_names

    found = []
    try:
        folders = sorted(storage.iterdir())
    except OSError:
        return []
    for folder in folders:
        try:
            finished = (folder / LEADERBOARD_FILE).is_file()
            if finished or (folder / META_FILE).is_file():
                found.append(StoredExperiment(folder.name, 0, finished, folder.stat().st_mtime))
            elif folder.is_dir() and (runs := run_folder_names(folder)):
                newest_run = max((folder / run).stat().st_mtime for run in runs)
                found.append(StoredExperiment(folder.name, len(runs), True, newest_run, runs[-1]))
        except OSError:  # a folder we may not read is no experiment of ours to name
            continue
    return found


def some_of(names: list[str], word: str, most: int = 6) -> str:
    """How many `word`s, and which, in a message: "3 sweeps: a, b, c" (the first `most` names, then "...")."""
    n = len(names)
    return f"{n} {word}{'s' if n > 1 else ''}: {', '.join(names[:most])}{', ...' if n > most else ''}"


def newest(experiments: list[StoredExperiment]) -> StoredExperiment:
    return max(experiments, key=lambda e: (e.mtime, e.name))


def file_given_for_results(path: Path, command: str | None = None) -> str | None:
    """For a sweep file or a train config given where its results were meant: what it is and where its newest
    results are (with `command` on them, e.g. `raytrain eval X`), read from the file's own storage path; None for
    any other file, or one that does not load. Without `command` (the tune commands), for a sweep file only."""
    from raytrain.config.kind import detect_kind
    from raytrain.config.source import read_yaml
    from raytrain.errors import ConfigError

    def use(folder: Path) -> str:
        return f"{folder} (`{command} {folder}`)" if command else str(folder)

    try:
        kind, _ = detect_kind(read_yaml(path))
        if kind == "sweep":
            from raytrain.config.sweep_load import load_sweep

            loaded = load_sweep(path, storage="skip")
            storage, name = Path(loaded.sweep.checkpoint.storage_path), loaded.name
            mine = [e for e in experiments_in(storage)
                    if not e.runs and re.fullmatch(re.escape(name) + r"(_\d+)?", e.name)]
            where = (f"the newest experiment of this sweep is {use(storage / newest(mine).name)}" if mine
                     else f"it has no experiment in {storage} yet (`raytrain tune {path}`)")
            return f"{path} is a sweep file, not its experiment folder: {where}"
        if kind == "train" and command:
            from raytrain.config.load import load_config
            from raytrain.runs import run_folder_names

            experiment = load_config(path).config.experiment
            folder = Path(experiment.storage_path) / str(experiment.name)  # set by the schema when not given
            runs = run_folder_names(folder) if folder.is_dir() else []
            where = (f"the latest run of this config is {use(folder / runs[-1])}" if runs
                     else f"it has no run in {folder} yet (`raytrain train {path}`)")
            return f"{path} is a train config, not a run folder or a checkpoint: {where}"
    except (ConfigError, OSError):
        return None
    return None


def _not_an_experiment(folder: Path) -> str | None:
    """What a train run folder, one of its checkpoints, a trial folder or a trial's checkpoint given as an
    experiment folder is, and what takes it; None for any other folder."""
    from raytrain.runs import STATE_FILE

    folder = folder.absolute()
    if (folder / "config.yaml").is_file() and (folder / "checkpoints").is_dir():
        return (f"{folder} is a run folder of `raytrain train`, not a sweep's experiment folder: continue it with "
                f"`raytrain train --resume {folder}`")
    if (folder / STATE_FILE).is_file() and (folder.parent.parent / "config.yaml").is_file():
        run = folder.parent.parent
        return (f"{folder} is a checkpoint of the run of `raytrain train` in {run}, not a sweep's experiment folder: "
                f"continue it with `raytrain train --resume {run}`")
    if found := sweep_above(folder):
        exp, what = found
        return f"{folder} is {what} of the sweep in {exp}: give its experiment folder, {exp}"
    from raytrain.runs import run_folder_names

    if runs := run_folder_names(folder):
        return (f"{folder} is an experiment folder of `raytrain train` ({len(runs)} run{'s' if len(runs) > 1 else ''}), "
                f"not a sweep's: continue its latest run with `raytrain train --resume {folder / runs[-1]}`")
    return None


def sweep_above(path: Path) -> tuple[Path, str] | None:
    """(experiment folder, "a trial" or "a trial's checkpoint") for a sweep's trial folder or trial checkpoint."""
    for exp, what in ((path.parent, "a trial"), (path.parent.parent, "a trial's checkpoint")):
        if (exp / META_FILE).is_file():
            return exp, what
    return None


def read_meta(exp_dir: Path) -> dict:
    """The experiment's raytrain metadata. UsageError (exit 2) when `exp_dir` is not an experiment folder."""
    exp_dir = Path(exp_dir)
    path = exp_dir / META_FILE
    if exp_dir.is_file():
        raise UsageError(file_given_for_results(exp_dir) or f"{exp_dir} is a file; give the experiment folder "
                         "(checkpoint.storage_path/<name>)")
    if not exp_dir.is_dir():
        raise UsageError(f"{exp_dir}: no such folder; give the experiment folder (checkpoint.storage_path/<name>)")
    found = [] if path.is_file() else experiments_in(exp_dir)
    if sweeps := [e for e in found if not e.runs]:
        others = len(found) - len(sweeps)
        raise UsageError(
            f"{exp_dir} is a storage path of {some_of([e.name for e in sweeps], 'sweep')}"
            + (f" (and {others} experiment{'s' if others > 1 else ''} of `raytrain train`)" if others else "")
            + f": give one, the newest being {exp_dir / newest(sweeps).name}"
        )
    if not path.is_file():
        raise UsageError(_not_an_experiment(exp_dir) or (
            f"{exp_dir} is not a raytrain experiment folder (no {META_FILE}); give the folder `raytrain tune` "
            "printed as its experiment folder (checkpoint.storage_path/<name>)"
        ))
    try:
        meta = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SweepError(f"{path} cannot be read: {exc}") from None
    if not isinstance(meta, dict) or not all(k in meta for k in ("name", "algorithm", "metric", "mode", "base")):
        raise SweepError(f"{path} is not raytrain's experiment metadata (name, algorithm, metric, mode, base)")
    return meta


def result_rows(trial_dir: Path) -> list[dict]:
    """The rows of a trial's result.json so far (a line being written is skipped)."""
    path = trial_dir / "result.json"
    if not path.is_file():
        return []
    rows = []
    for line in path.read_text().splitlines():
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                continue  # a line being written right now
    return rows


def metric_value(row: dict, key: str) -> Any:
    """`key` of a result row: a nested path `a/b/c`, else the flat key as written."""
    node: Any = row
    for part in key.split("/"):
        if not isinstance(node, dict) or part not in node:
            return row.get(key)
        node = node[part]
    return node


def _latest_checkpoint(trial_dir: Path) -> str | None:
    found = sorted(p for p in trial_dir.glob("checkpoint_*") if p.is_dir())
    return str(found[-1]) if found else None


def _trial_states(exp_dir: Path) -> dict[str, dict]:
    """trial folder name -> {trial_id, status, error} from Tune's newest experiment state file."""
    out = {}
    for trial, runtime in state.trials(exp_dir):  # the complete copy where a crash cut the file short
        logdir = trial.get("relative_logdir")
        if not logdir:
            continue
        error = runtime.get("error_filename")
        config = trial.get("config")
        spec = config.get(TRIAL_KEY) if isinstance(config, dict) else None
        out[logdir] = {
            "trial_id": trial.get("trial_id"),
            "status": trial.get("status", "UNKNOWN"),
            "error": str(exp_dir / logdir / error) if error else None,
            "overrides": spec.get("overrides", {}) if isinstance(spec, dict) else {},
        }
    return out


_WARNED: set[Path] = set()


def _params(path: Path) -> dict | None:
    """A trial's params.json (the config Tune gave it), or None where it cannot be read: said once per process, on
    stderr. One damaged file (empty, cut short) failed `tune status`, `plot` and `resume` with Python's
    JSONDecodeError and no file named, and hid the whole leaderboard."""
    try:
        params = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        why = exc.msg if isinstance(exc, json.JSONDecodeError) else getattr(exc, "strerror", None) or str(exc)
    else:
        if isinstance(params, dict):
            return params
        why = f"not a JSON object but {type(params).__name__}"
    if path not in _WARNED:
        _WARNED.add(path)
        print(f"warning: {path} cannot be read ({why}): its trial is shown with the hyperparameters Tune's state "
              "records", file=sys.stderr)
    return None


def summarize(exp_dir: str | Path) -> tuple[dict, list[TrialSummary]]:
    """The experiment's metadata and one summary per trial, best first."""
    exp_dir = Path(exp_dir).expanduser().absolute()  # a relative folder is fine; the paths shown are absolute
    meta = read_meta(exp_dir)
    metric, mode = meta["metric"], meta["mode"]
    states = _trial_states(exp_dir)
    trials = []
    for params in sorted(exp_dir.glob("*/params.json")):
        trial_dir = params.parent
        rows = result_rows(trial_dir)
        config = _params(params)
        last = rows[-1] if rows else {}
        # A folder the newest state does not list held a trial that `--restart-errored` replaced.
        recorded = states.get(trial_dir.name, {"status": "REPLACED" if states else "UNKNOWN"})
        trial_id = recorded.get("trial_id") or last.get("trial_id") or trial_dir.name.rsplit("_", 1)[-1]
        values = [v for v in (finite(metric_value(r, metric)) for r in rows) if v is not None]
        overrides = config.get(TRIAL_KEY, {}).get("overrides", {}) if config is not None else recorded.get("overrides", {})
        # The latest config of a PBT trial is in its last result.
        if isinstance(last.get("config"), dict) and TRIAL_KEY in last["config"]:
            overrides = last["config"][TRIAL_KEY].get("overrides", overrides)
        trials.append(
            TrialSummary(
                trial_id=trial_id,
                name=trial_dir.name,
                status=recorded["status"],
                iteration=int(last.get("training_iteration", 0) or 0),
                metric_last=values[-1] if values else None,
                metric_best=(max(values) if mode == "max" else min(values)) if values else None,
                env_steps=finite(last.get("num_env_steps_sampled_lifetime")),
                hyperparameters=overrides,
                checkpoint=_latest_checkpoint(trial_dir),
                path=str(trial_dir),
                error=recorded.get("error"),
            )
        )
    # A trial that failed before its first result (its env or its actors could not start) has no params.json:
    # Tune's state lists it, with its error.
    reported = {t.name for t in trials}
    for logdir, recorded in states.items():
        if logdir in reported:
            continue
        trial_dir = exp_dir / logdir
        trials.append(
            TrialSummary(
                trial_id=recorded.get("trial_id") or logdir.rsplit("_", 1)[-1],
                name=logdir,
                status=recorded["status"],
                iteration=0,
                metric_last=None,
                metric_best=None,
                env_steps=None,
                hyperparameters=recorded.get("overrides", {}),
                checkpoint=_latest_checkpoint(trial_dir) if trial_dir.is_dir() else None,
                path=str(trial_dir),
                error=recorded.get("error"),
            )
        )
    sign = -1 if mode == "max" else 1
    trials.sort(key=lambda t: (t.status == "REPLACED", t.metric_last is None, sign * (t.metric_last or 0)))
    return meta, trials


def pbt_lineage(exp_dir: Path, trial: TrialSummary) -> list[tuple[int, dict]]:
    """[(iteration, hyperparameters from then on), ...] along the trial's lineage.

    PBT's policy file of a trial holds the exploits of the trials it copied, then its own:
    [target tag, clone tag, target iteration, clone iteration, clone config, new config] per line.
    """
    policy = Path(exp_dir) / f"pbt_policy_{trial.trial_id}.txt"
    params_file = Path(trial.path) / "params.json"
    params = _params(params_file) if params_file.is_file() else None
    if params is None:  # it failed before its first result, or the file cannot be read
        return [(0, trial.hyperparameters)]
    lines = []
    if policy.is_file():
        for line in policy.read_text().splitlines():
            try:
                lines.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    if not lines:
        return [(0, params.get(TRIAL_KEY, {}).get("overrides", {}))]
    overrides = lambda cfg: cfg.get(TRIAL_KEY, {}).get("overrides", {})  # noqa: E731
    steps = [(0, overrides(lines[0][4]))]
    steps += [(int(entry[3]), overrides(entry[5])) for entry in lines]
    return steps

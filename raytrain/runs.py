"""Run folders: everything needed to reproduce, inspect and resume a training run.

Layout of `storage_path/<experiment.name>/<timestamp>/`:

    config.yaml          the resolved raytrain config (new names, overrides applied)
    rllib_config.json    the exact PPOConfig builder calls it became
    command.txt          the command line and working directory
    versions.json        raytrain, Ray, Python, torch, gymnasium versions and the host
    metrics.jsonl        one JSON object of scalar metrics per training iteration
    metrics.csv          the same as a table
    run.json             status (running, finished, interrupted, failed), last iteration, stop reason
    checkpoints/checkpoint_<iteration>/   RLlib checkpoint + raytrain_state.json + config.yaml
    config.<n>.yaml, rllib_config.<n>.json   after a resume: what the n-th start of the run used
    not_resumed/<time>/  after a resume: the checkpoints after the one it resumed from, which could not be read

`storage_path` is made absolute (`~` expanded) once, by `experiment_dir`, for both `train --dry-run` and
the real run, and the folder it gives is always inside `storage_path`.

Resume: `config.yaml` and `rllib_config.json` always hold what the latest start of the run used (the
resolved config with the `--resume` overrides); before they are replaced, the earlier ones are kept as
`config.<n>.yaml` and `rllib_config.<n>.json` (n = 1 for the first start, 2 for the first resume, ...),
matching the n-th command line in command.txt. They are written only once the resumed run has been built
from its checkpoint: a resume that fails before that changes nothing in the folder.

Checkpoints: written to `checkpoint_<iteration>.partial/`, every file and folder fsynced, then renamed to
`checkpoint_<iteration>/` (the rename is what makes it complete) and the parent fsynced. Only folders named
exactly `checkpoint_<digits>` with a readable state file count; one whose state file cannot be read is
skipped with a warning naming it. Old checkpoints are renamed to `checkpoint_<n>.deleting` before they are
deleted, so that a deletion cut short never leaves a half-deleted folder that still looks complete.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import math
import os
import platform
import re
import shlex
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from raytrain.errors import ConfigError, ConfigIssue, TrainError, UsageError
from raytrain.paths import inside

CHECKPOINT_PREFIX = "checkpoint_"
CHECKPOINT_NAME = re.compile(r"checkpoint_[0-9]+")


def checkpoint_number(path: Path) -> int | None:
    """The n of a folder named exactly `checkpoint_<n>` (raytrain's iteration, Tune's index), else None."""
    return int(path.name.removeprefix(CHECKPOINT_PREFIX)) if CHECKPOINT_NAME.fullmatch(path.name) else None
STATE_FILE = "raytrain_state.json"
STAMP_FORMAT = "%Y-%m-%d_%H-%M-%S"
STAMP_PLACEHOLDER = "<YYYY-MM-DD_HH-MM-SS>"
"""What `train --dry-run` shows for the run folder's last component (the start time, `_<n>` if taken)."""


def flatten(result: dict, prefix: str = "") -> dict[str, Any]:
    """Nested result dict -> {"a/b/c": scalar}; lists, strings of no interest and nested configs dropped."""
    out: dict[str, Any] = {}
    for key, value in result.items():
        name = f"{prefix}{key}"
        if key == "config" and not prefix:
            continue
        if isinstance(value, dict):
            out.update(flatten(value, name + "/"))
        elif isinstance(value, bool):
            out[name] = value
        elif isinstance(value, (int, float)) or type(value).__module__ == "numpy":
            try:
                out[name] = float(value) if isinstance(value, float) or "float" in type(value).__name__ else int(value)
            except (TypeError, ValueError):
                continue
        elif isinstance(value, str) and name in ("trial_id", "hostname", "node_ip"):
            out[name] = value
    return out


def versions() -> dict[str, str]:
    """Versions of everything that decides what a run does."""
    import raytrain

    info = {"raytrain": raytrain.__version__, "python": platform.python_version(), "host": platform.node()}
    for module in ("ray", "torch", "gymnasium", "numpy"):
        try:
            info[module] = __import__(module).__version__
        except Exception:  # pragma: no cover - a missing optional package
            info[module] = "not installed"
    return info


def absolute(path: str | os.PathLike[str]) -> Path:
    """`path` with `~` expanded and made absolute against the working directory (symlinks kept).

    Ray's storage layer (pyarrow) takes a path without a scheme only when it is absolute.
    """
    return Path(os.path.abspath(os.path.expanduser(os.fspath(path))))


def experiment_dir(storage_path: str, name: str, where: str | None = None) -> Path:
    """The absolute folder `storage_path/name` that holds an experiment's run folders.

    The one place a run's location is computed: `train --dry-run` prints it and `RunFolder.create` uses it.
    The schema already allows only a single path component as `experiment.name`; this checks it again and
    checks that the result, symlinks followed, is inside `storage_path`.

    Raises:
        ConfigError: `name` is not a single path component, or the folder would be outside storage_path.
    """
    storage = absolute(storage_path)
    bad = not name or name in (".", "..") or "/" in name or "\0" in name
    base = storage / name
    if bad or base.parent != storage or not inside(storage, base):
        raise ConfigError(
            [
                ConfigIssue(
                    where,
                    "experiment.name",
                    f"{name!r} would put the run folder outside experiment.storage_path {storage}; "
                    "use a single folder name (no '/', not '.' or '..', not a symlink out of storage_path)",
                )
            ]
        )
    return base


def fsync_dir(path: Path) -> None:
    """Make a folder's entries (new, renamed or removed names) durable."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_tree(root: Path) -> None:
    """fsync every file under `root`, then every folder, deepest first, `root` last."""
    folders = []
    for current, _dirs, files in os.walk(root):
        folders.append(Path(current))
        for name in files:
            path = Path(current) / name
            if path.is_symlink():
                continue
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
    for folder in reversed(folders):
        fsync_dir(folder)


def append_command(folder: Path, argv: list[str]) -> None:
    """Add the command line `argv` (shell-quoted), with the time and working directory, to folder/command.txt.

    The one writer of command.txt, for run folders and sweep experiment folders alike.
    """
    line = f"# {time.strftime('%Y-%m-%d %H:%M:%S')} in {os.getcwd()}\n{shlex.join(argv)}\n"
    with open(folder / "command.txt", "a") as fh:
        fh.write(line)


_STARTED = re.compile(r"^# \d{4}-\d\d-\d\d \d\d:\d\d:\d\d in (.+)$")


def started_in(path: Path) -> tuple[Path, Path] | None:
    """The run or sweep folder at or above `path` (a checkpoint, a trial) that has a command.txt, and the working
    directory of its first command as that records it; None when there is none."""
    for folder in [path, *list(path.parents)[:3]]:
        try:
            first = (folder / "command.txt").read_text().split("\n", 1)[0]
        except OSError:
            continue
        match = _STARTED.match(first)
        return (folder, Path(match.group(1))) if match else None
    return None


def where_it_imported(exc: ConfigError, path: Path) -> ConfigError:
    """`exc` with, for an env module that cannot be imported here, the folder the run at `path` was started in
    (where a module beside the config was found then), when that is not the working directory."""
    started = started_in(path)
    if started is None or started[1] == Path.cwd():
        return exc
    from raytrain.tune.results import META_FILE

    folder, start = started
    what = "sweep" if (folder / META_FILE).exists() else "run"
    for i, issue in enumerate(exc.issues):
        match = re.match(r"cannot import module '([\w.]+)'", issue.message)
        if issue.path != "environment.env" or match is None:
            continue
        top = match.group(1).split(".")[0]
        found = next((f"{top}{kind}" for kind in (".py", "/") if (start / f"{top}{kind}").exists()), None)
        there = f", where {found} is" if found else ""
        exc.issues[i] = dataclasses.replace(issue, message=(
            f"{issue.message}. This {what} was started in {start} (its command.txt){there}: run raytrain from there "
            f"(cd {shlex.quote(str(start))})"))
    return exc


def write_atomic(path: Path, data: str | bytes) -> None:
    """Write `data` to `path` so that a crash leaves either the old file or the whole new one: a hidden
    temporary beside it, fsynced, then renamed over it."""
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w" if isinstance(data, str) else "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    tmp.replace(path)


COPIED_IN_PART = "it is incomplete (copied or synced in part?)"
"""What a checkpoint that lacks one of the files or folders every checkpoint holds is."""

RLLIB_PARTS = {
    "learner_group/learner/rl_module": "the network's weights",
    "env_runner": "the env runner's connector states, observation filters among them",
}
"""The folders of RLlib's state that `Algorithm.save_to_path` writes in every checkpoint, and what each holds."""


def rllib_state_missing(checkpoint: Path) -> str | None:
    """`has no ..., ...` when `checkpoint` lacks a part of RLlib's state (`RLLIB_PARTS`), else None. RLlib's
    restore skips a part it does not find without a word: a checkpoint whose learner_group/ was lost (copied in
    part) was evaluated and resumed with a fresh network, exit 0."""
    for part, what in RLLIB_PARTS.items():
        if not (checkpoint / part).is_dir():
            return (f"has no {part} ({what}), which RLlib writes in every checkpoint: {COPIED_IN_PART}, and RLlib "
                    "would restore the rest without a word")
    return None


def read_state(checkpoint: Path) -> dict:
    """A checkpoint's raytrain state.

    Raises:
        ValueError: the state file is missing, unreadable, not JSON, or has no integer `iteration`.
    """
    try:
        state = json.loads((checkpoint / STATE_FILE).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"cannot read {STATE_FILE}: {exc}") from None
    if not isinstance(state, dict) or type(state.get("iteration")) is not int:
        raise ValueError(f"{STATE_FILE} has no integer 'iteration'")
    return state


def free_run_path(base: Path) -> Path:
    """The path a new run folder under `base` would get now (its start time, `_<n>` if taken); nothing is made.

    A Slurm job's run folder is named when the job is submitted, so that a requeued job finds its run again.
    """
    stamp = time.strftime(STAMP_FORMAT)
    for i in range(1000):
        path = base / (stamp if i == 0 else f"{stamp}_{i}")
        if not path.exists():
            return path
    raise TrainError(f"cannot find a free run folder name under {base}")


def run_folder_names(experiment: Path) -> list[str]:
    """The run folders of `raytrain train` in an experiment folder (storage_path/<name>), oldest first."""
    return sorted(d.name for d in experiment.iterdir() if (d / "config.yaml").is_file())


def run_of_checkpoints(path: Path) -> Path | None:
    """The run folder whose checkpoints folder `path` (absolute) is, else None."""
    return path.parent if path.name == "checkpoints" and (path.parent / "config.yaml").is_file() else None


def runs_held(path: str | Path, command: str) -> str | None:
    """The error for an experiment folder (storage_path/<experiment.name>, every `raytrain train` of that name
    made a run folder in it) given where `command` takes one run folder; None when `path` holds no runs."""
    p = absolute(path)
    if (run := run_of_checkpoints(p)) is not None:
        return f"{path} is the checkpoints folder of the run {run}: give the run folder, `{command} {run}`"
    runs = run_folder_names(p) if p.is_dir() else []
    if not runs:
        return None
    return (f"{path} holds {len(runs)} run folder{'s' if len(runs) > 1 else ''} of `raytrain train` "
            f"({'..., ' if len(runs) > 3 else ''}{', '.join(runs[-3:])}): give one, the latest being "
            f"`{command} {Path(path) / runs[-1]}`")


def _of_a_sweep(path: Path) -> str | None:
    """What a sweep's experiment folder, trial folder or trial checkpoint given as a run folder is, and the commands
    that take it; None for any other path."""
    from raytrain.tune.results import META_FILE, sweep_above

    if (path / META_FILE).is_file():
        return (f"{path} is a sweep's experiment folder, not a run folder of `raytrain train`: continue the sweep with "
                f"`raytrain tune resume {path}`")
    if found := sweep_above(path):
        exp, what = found
        return (f"{path} is {what} of the sweep in {exp}, not a run folder of `raytrain train`: its trials go on "
                f"with `raytrain tune resume {exp}`; `raytrain train {exp / 'best.yaml'}` trains the best trial's "
                f"config as a new run, and `raytrain eval {path}` plays it")
    return None


class RunFolder:
    """One run's folder on disk."""

    def __init__(self, path: Path):
        self.path = Path(path)

    # --- creation and discovery -------------------------------------------------------------
    @classmethod
    def create(cls, storage_path: str, name: str) -> RunFolder:
        """A new, empty run folder `experiment_dir(storage_path, name)/<start time>`; never reuses one."""
        base = experiment_dir(storage_path, name)
        try:
            base.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise TrainError(f"cannot create {base}: {exc.strerror}; check experiment.storage_path") from None
        stamp = time.strftime(STAMP_FORMAT)
        for i in range(1000):
            path = base / (stamp if i == 0 else f"{stamp}_{i}")
            try:
                path.mkdir()
                return cls(path)
            except FileExistsError:
                continue
        raise TrainError(f"cannot find a free run folder name under {base}")

    @classmethod
    def open(cls, path: str | Path) -> RunFolder:
        """An existing run folder (a relative path is taken from the working directory).

        Raises:
            UsageError: `path` is not a run folder.
        """
        folder = cls(absolute(path))
        if (folder.path / STATE_FILE).is_file():
            raise UsageError(
                f"{path} is a checkpoint, not a run folder; resume its run: --resume {folder.path.parent.parent}"
            )
        if not (folder.path / "config.yaml").is_file():
            if lost := config_lost(folder.path):
                raise UsageError(lost)
            if held := runs_held(path, "raytrain train --resume") or _of_a_sweep(folder.path):
                raise UsageError(held)
            raise UsageError(
                f"{path} is not a raytrain run folder (no config.yaml in {folder.path}); give the folder "
                "`raytrain train` printed, storage_path/<name>/<timestamp>"
            )
        return folder

    @property
    def checkpoints_dir(self) -> Path:
        return self.path / "checkpoints"

    def scan_checkpoints(self) -> tuple[list[Path], list[str]]:
        """Complete checkpoints, oldest first, and one line for each checkpoint skipped as unreadable.

        Complete: a folder named exactly `checkpoint_<digits>` (never `.partial` nor `.deleting`) whose
        state file reads as JSON with an integer iteration, and that holds RLlib's parts (`rllib_state_missing`).
        """
        if not self.checkpoints_dir.is_dir():
            return [], []
        found: list[tuple[int, str, Path]] = []
        skipped: list[str] = []
        for path in self.checkpoints_dir.iterdir():
            if not CHECKPOINT_NAME.fullmatch(path.name) or not path.is_dir():
                continue
            try:
                state = read_state(path)
            except ValueError as exc:
                skipped.append(f"warning: skipping checkpoint {path}: {exc}")
                continue
            if (incomplete := rllib_state_missing(path)) is not None:
                skipped.append(f"warning: skipping checkpoint {path}: it {incomplete}")
                continue
            found.append((state["iteration"], path.name, path))
        found.sort()
        return [p for _, _, p in found], sorted(skipped)

    def checkpoints(self) -> list[Path]:
        """Complete checkpoints, oldest first (see `scan_checkpoints`)."""
        return self.scan_checkpoints()[0]

    def latest_checkpoint(self, on_skip: Callable[[str], None] | None = None) -> Path | None:
        """The newest complete checkpoint; `on_skip` is told about each unreadable one passed over."""
        found, skipped = self.scan_checkpoints()
        for line in skipped:
            if on_skip is not None:
                on_skip(line)
        return found[-1] if found else None

    # --- writing ------------------------------------------------------------------------------
    def write_setup(self, config_yaml: dict, rllib_calls: dict, argv: list[str]) -> None:
        (self.path / "config.yaml").write_text(yaml.safe_dump(config_yaml, sort_keys=False))
        (self.path / "rllib_config.json").write_text(json.dumps(rllib_calls, indent=2, default=str) + "\n")
        self.append_command(argv)
        (self.path / "versions.json").write_text(json.dumps(versions(), indent=2) + "\n")

    def record_resume(self, config_yaml: dict, rllib_calls: dict, argv: list[str]) -> int:
        """Record a resumed start: keep the earlier config.yaml and rllib_config.json as
        `config.<n>.yaml` and `rllib_config.<n>.json`, write the new ones, append the command line.

        Returns:
            n, the number the earlier files were kept under.
        """
        n = 1
        while (self.path / f"config.{n}.yaml").exists() or (self.path / f"rllib_config.{n}.json").exists():
            n += 1
        for name, kept in (("config.yaml", f"config.{n}.yaml"), ("rllib_config.json", f"rllib_config.{n}.json")):
            if (self.path / name).is_file():
                # A copy first, then an atomic replace: config.yaml never goes missing, even if cut short.
                write_atomic(self.path / kept, (self.path / name).read_text())
        write_atomic(self.path / "config.yaml", yaml.safe_dump(config_yaml, sort_keys=False))
        write_atomic(self.path / "rllib_config.json", json.dumps(rllib_calls, indent=2, default=str) + "\n")
        self.append_command(argv)
        return n

    def append_command(self, argv: list[str]) -> None:
        append_command(self.path, argv)

    def read_config_yaml(self) -> str:
        return (self.path / "config.yaml").read_text()

    def set_status(self, **fields: Any) -> None:
        """Update run.json with `fields`; a field given as None is removed."""
        path = self.path / "run.json"
        status = self.status()
        status.update(fields)
        for name in [name for name, value in fields.items() if value is None]:
            del status[name]
        tmp = path.with_suffix(".tmp")
        try:
            tmp.write_text(json.dumps(status, indent=2, default=str) + "\n")
        except OSError:
            tmp.unlink(missing_ok=True)  # a full disk left it, empty
            raise
        tmp.replace(path)

    def status(self) -> dict:
        """run.json, {} where there is none.

        Raises:
            ValueError: run.json is no JSON object (damaged), said with its path.
        """
        path = self.path / "run.json"
        if not path.is_file():
            return {}
        try:
            status = json.loads(path.read_text())
        except UnicodeDecodeError:
            raise ValueError(f"{path}: is not UTF-8 text") from None
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}: not JSON ({exc.msg})") from None
        if not isinstance(status, dict):
            raise ValueError(f"{path}: a JSON object of the run's status, not {type(status).__name__}")
        return status

    def claim(self) -> bool:
        """Hold the folder for this process (`hold_folder`): run.json says `running` only once the algorithm is
        built, seconds after the start, and two resumes of one run started within those seconds both trained, each
        over the other's checkpoints and rows. False where another process holds it."""
        from raytrain.paths import hold_folder

        return hold_folder(self.path)

    def set_aside_after(self, checkpoint: Path, stamp: str) -> str | None:
        """Move the checkpoint folders numbered after `checkpoint`, which a resume from it passes over as
        unreadable, to `not_resumed/<stamp>/`: the resumed run writes those numbers again, and found one taken (a
        checkpoint was never overwritten), so its own was not saved at all. Returns a line saying so, or None."""
        number = checkpoint_number(checkpoint) or 0
        after = sorted(p for p in self.checkpoints_dir.iterdir() if (checkpoint_number(p) or 0) > number)
        if not after:
            return None
        target = self.path / SET_ASIDE / stamp
        target.mkdir(parents=True, exist_ok=True)
        for path in after:
            path.rename(target / path.name)
        return (f"note: {len(after)} checkpoint(s) after {checkpoint.name} that cannot be resumed from "
                f"({after[0].name}{' to ' + after[-1].name if len(after) > 1 else ''}) moved to {target}: the run "
                "writes those iterations again")

    def damaged(self) -> str | None:
        """What of the files a resume reads and writes again (run.json, metrics.jsonl) cannot be read, else None:
        found here, such a file failed the resume once Ray had started, with Python's error and no file named."""
        try:
            self.status()
        except (OSError, ValueError) as exc:
            return f"{exc}: it records the run's status only: delete it, or mend it"
        try:
            if (self.path / "metrics.jsonl").is_file():
                metrics_rows(self.path / "metrics.jsonl")
        except (OSError, ValueError) as exc:
            return f"{exc}: mend or delete that line (a row after the checkpoint resumed from is written again)"
        return None

    def trained_now(self) -> tuple[str | None, str | None]:
        """Whether a process trains in this folder right now, from the `running` status its run.json records:
        (what trains it on this machine, None) where that process is alive here; (None, a warning) where it
        ran on another machine, which cannot be told from here; (None, None) otherwise (a run that ended, or
        whose process died: a crash leaves `running` behind, and resuming is what it needs)."""
        try:
            status = self.status()
        except (OSError, ValueError):
            return None, None
        if status.get("status") != "running":
            return None, None
        return process_now(status, self.path / "run.json", "the run trains", "two runs in one folder overwrite each "
                           "other's checkpoints")

    def checkpoint_path(self, iteration: int) -> Path:
        return self.checkpoints_dir / f"{CHECKPOINT_PREFIX}{iteration:06d}"

    def commit_checkpoint(self, partial: Path, target: Path) -> Path:
        """Make the fully written checkpoint folder `partial` the complete checkpoint `target`.

        Every file and folder in it is fsynced before the rename, and the parent after it, so that a crash
        (even of the machine) leaves either no `target` or a complete one.
        """
        fsync_tree(partial)
        partial.rename(target)
        fsync_dir(target.parent)
        return target

    def prune_checkpoints(self, keep: int | None) -> list[Path]:
        """Delete the oldest complete checkpoints beyond `keep`; return what was removed.

        Each is first renamed out of the checkpoint names (`.deleting`), so a deletion cut short leaves
        nothing that looks complete; leftovers of such a deletion are removed here too.
        """
        if keep is None:
            return []
        found = self.checkpoints()
        removed = found[: max(0, len(found) - keep)]
        for path in removed:
            doomed = path.with_name(path.name + ".deleting")
            if doomed.exists():  # left by an earlier deletion cut short
                shutil.rmtree(doomed, ignore_errors=True)
            path.rename(doomed)
        if removed:
            fsync_dir(self.checkpoints_dir)
        for doomed in self.checkpoints_dir.glob(f"{CHECKPOINT_PREFIX}*.deleting"):
            shutil.rmtree(doomed, ignore_errors=True)
        return removed


def metrics_rows(path: Path) -> list[dict]:
    """The rows of a run's metrics.jsonl. The last line of a run killed while appending it is left out (that
    iteration is repeated).

    Raises:
        ValueError: a line before the last is no JSON object (`path:line: ...`), or the file is not UTF-8.
    """
    try:
        lines = path.read_text().splitlines()
    except UnicodeDecodeError:
        raise ValueError(f"{path}: is not UTF-8 text") from None
    numbered = [(n, line) for n, line in enumerate(lines, 1) if line.strip()]
    rows = []
    for i, (n, line) in enumerate(numbered):
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            if i == len(numbered) - 1:
                break
            raise ValueError(f"{path}:{n}: not a JSON line ({exc.msg})") from None
        if not isinstance(row, dict):
            raise ValueError(f"{path}:{n}: a row is a JSON object of one iteration's metrics, not {type(row).__name__}")
        rows.append(row)
    return rows


SET_ASIDE = "not_resumed"
"""The folder of a run folder that `RunFolder.set_aside_after` moves checkpoints into."""


def config_lost(path: Path) -> str | None:
    """For a run folder that has checkpoints and has lost its config.yaml: what to do (each checkpoint holds the
    config it was saved with); else None. Such a folder was said to be no run folder, and `eval` took its
    checkpoints/ for an experiment."""
    if (path / "config.yaml").exists() or not (path / "checkpoints").is_dir():
        return None
    found, _ = RunFolder(path).scan_checkpoints()
    if not found or not (found[-1] / "config.yaml").is_file():
        return None
    return (f"{path} is a run folder that has lost its config.yaml; its newest checkpoint holds the config it was "
            f"saved with: copy it back (cp {shlex.quote(str(found[-1] / 'config.yaml'))} {shlex.quote(str(path))}/), "
            "or give the checkpoint itself")


class MetricsWriter:
    """Appends per-iteration scalar metrics to metrics.jsonl and keeps metrics.csv in step with it."""

    def __init__(self, folder: RunFolder):
        self.jsonl = folder.path / "metrics.jsonl"
        self.csv = folder.path / "metrics.csv"
        self.rows: list[dict] = []
        self.columns: list[str] = []
        if self.jsonl.is_file():  # resuming: keep what is there
            self.rows = metrics_rows(self.jsonl)
            for row in self.rows:
                self._add_columns(row)

    def _add_columns(self, row: dict) -> bool:
        new = [k for k in row if k not in self.columns]
        self.columns += new
        return bool(new)

    def drop_after(self, iteration: int) -> None:
        """Forget rows past `iteration` (a resumed run repeats them from its checkpoint).

        Both files are rewritten from the rows kept, so that a line left torn by a killed run is gone.
        """
        if not self.rows and not self.jsonl.exists():
            return
        self.rows = [r for r in self.rows if r.get("training_iteration", 0) <= iteration]
        write_atomic(self.jsonl, "".join(json.dumps(r) + "\n" for r in self.rows))
        self._rewrite_csv()

    def append(self, row: dict) -> None:
        clean = {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in row.items()}
        self.rows.append(clean)
        with open(self.jsonl, "a") as fh:
            fh.write(json.dumps(clean) + "\n")
        if self._add_columns(clean) or not self.csv.exists():
            self._rewrite_csv()
        else:
            with open(self.csv, "a", newline="") as fh:
                csv.DictWriter(fh, fieldnames=self.columns).writerow(clean)

    def _rewrite_csv(self) -> None:
        tmp = self.csv.with_name(f".{self.csv.name}.tmp")
        with open(tmp, "w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=self.columns)
            writer.writeheader()
            writer.writerows(self.rows)
        tmp.replace(self.csv)


def process_now(record: dict, file: Path, doing: str, why: str) -> tuple[str | None, str | None]:
    """Whether the process that `record` (from `file`: its `pid`, `host` and `started`) names still runs:
    (it, None) where it is a live raytrain process on this machine; (None, a warning that `doing` there and
    `why` that matters) where it ran on another machine, which cannot be told from here; (None, None) else."""
    import socket

    pid, host, started = record.get("pid"), record.get("host"), record.get("started", "?")
    if not isinstance(pid, int) or pid == os.getpid():
        return None, None
    if host and host != socket.gethostname():
        return None, (f"warning: {file} says {doing} on {host} (pid {pid}, since {started}); if it still does, stop "
                      f"it first: {why}")
    if _is_raytrain_process(pid):
        return f"process {pid} (since {started})", None
    return None, None


def _is_raytrain_process(pid: int) -> bool:
    """Whether `pid` is alive here and runs raytrain (not another process that got the pid of one that died)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # alive, another user's
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return True  # no /proc to tell by: alive is all that is known
    return b"raytrain" in cmdline

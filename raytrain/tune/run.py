"""Run and resume sweeps; a live trial table while they run."""

from __future__ import annotations

import copy
import json
import os
import socket
import sys
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import yaml
from ray.tune import Callback

from raytrain.config.sweep_load import LoadedSweep
from raytrain.errors import SweepError
from raytrain.metrics import metric_text
from raytrain.runs import append_command, process_now, versions, write_atomic
from raytrain.tune import TRIAL_KEY, state
from raytrain.tune.plots import plot
from raytrain.tune.report import trial_table, write_best_config, write_leaderboard
from raytrain.tune.results import META_FILE, SWEEP_FILE, metric_value, read_meta, summarize

if TYPE_CHECKING:
    from ray.tune.experiment import Trial

    from raytrain.config.schema import RaytrainConfig
    from raytrain.training import RayCpus


class LiveTable(Callback):
    """Prints a table of trials (status, iteration, metric, hyperparameters) every `every_s` seconds."""

    def __init__(self, metric: str, every_s: float = 15.0):
        self.metric = metric
        self.every_s = every_s
        self._last_print = 0.0
        self._latest: dict[str, dict] = {}

    def on_trial_result(self, iteration: int, trials: list[Trial], trial: Trial, result: dict, **info: Any) -> None:
        self._latest[trial.trial_id] = result
        if time.monotonic() - self._last_print >= self.every_s:
            self.print_table(trials)

    def on_trial_complete(self, iteration: int, trials: list[Trial], trial: Trial, **info: Any) -> None:
        self.print_table(trials)

    def on_trial_error(self, iteration: int, trials: list[Trial], trial: Trial, **info: Any) -> None:
        self.print_table(trials)

    def print_table(self, trials: list[Trial]) -> None:
        from rich.console import Console

        self._last_print = time.monotonic()
        rows = []
        for t in trials:
            r = self._latest.get(t.trial_id, {})
            cells = [
                t.trial_id,
                t.status,
                str(r.get("training_iteration", "")),
                metric_text(metric_value(r, self.metric)),
                f"{int(r.get('num_env_steps_sampled_lifetime', 0)):,}" if r else "",
            ]
            rows.append((cells, t.config.get(TRIAL_KEY, {}).get("overrides", {})))
        columns = ("trial", "status", "iter", self.metric.rsplit("/", 1)[-1], "env steps")
        table = trial_table(f"trials ({time.strftime('%H:%M:%S')})", columns, rows)
        Console(stderr=True, width=None if sys.stderr.isatty() else 160).print(table)

    def __getstate__(self) -> dict[str, Any]:
        return {"metric": self.metric, "every_s": self.every_s, "_last_print": 0.0, "_latest": {}}


DRIVER_FILE = "driver.json"
"""The process that runs the sweep now (`pid`, `host`, `started`): written while it runs, removed when it ends."""


def driver_record(exp_dir: Path) -> dict:
    """What `driver.json` records of the sweep's driver; {} where there is none or it cannot be read."""
    try:
        record = json.loads((exp_dir / DRIVER_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


@contextmanager
def _driving(exp_dir: Path) -> Iterator[None]:
    """Record this process as the sweep's driver while the block runs (see `check_resume`).

    The record is created only where none is (O_EXCL), so of two drivers that chose one folder at the same time
    (two `raytrain tune` of one file started together both find its name free) only one goes on. A record left
    by a driver that died is replaced.

    Raises:
        SweepError: a live raytrain process on this machine drives the sweep in `exp_dir`; nothing was written.
    """
    exp_dir.mkdir(parents=True, exist_ok=True)
    path = exp_dir / DRIVER_FILE
    record = json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                         "started": time.strftime("%Y-%m-%d %H:%M:%S")}) + "\n"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        busy, _ = process_now(driver_record(exp_dir), path, "", "")
        if busy:
            raise SweepError(f"{exp_dir} is taken by another driver, {busy}, that chose it at the same time: run "
                             "the sweep again (it then takes the next free name) or give it --name; nothing was "
                             "written") from None
        write_atomic(path, record)
    else:
        with os.fdopen(fd, "w") as fh:
            fh.write(record)
    try:
        yield
    finally:
        release_driver(exp_dir)


class FitWatch(Protocol):
    """What watches Tune's `fit()` (the CLI's `LocalRayWatch`: a local Ray stopped under it)."""

    def during_fit(self) -> AbstractContextManager[None]: ...


def _fit(tuner: Any, exp_dir: Path, watch: FitWatch | None = None) -> None:
    """`tuner.fit()` (inside `watch.during_fit()`); a failure on a full disk is said as such, with the resume.

    Tune itself then wrote empty error files and failed reading them back: `EOFError: Ran out of input`, with no word
    of the disk.
    """
    try:
        with watch.during_fit() if watch is not None else nullcontext():
            tuner.fit()
    except Exception as exc:
        full = _disk_full(exp_dir, exc)
        if full is None:
            raise
        raise SweepError(f"{full} in {exp_dir}: free space there (or keep fewer checkpoints, checkpoint.num_to_keep), "
                         f"then `raytrain tune resume {exp_dir}`") from exc


def _disk_full(exp_dir: Path, exc: BaseException) -> str | None:
    """`No space left on device` (or the quota's words) where `exc`, or a trial's error file, says the disk of
    `exp_dir` filled up, or it has no space left now; else None."""
    import errno

    codes = (errno.ENOSPC, errno.EDQUOT)
    said = [os.strerror(code) for code in codes]
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, OSError) and seen.errno in codes:
            return os.strerror(seen.errno)
        seen = seen.__cause__ or seen.__context__
    for error in exp_dir.glob("*/error.txt"):
        try:
            text = error.read_text(errors="replace")
        except OSError:
            continue
        if found := next((words for words in said if words in text), None):
            return found
    try:
        if os.statvfs(exp_dir).f_bavail == 0:
            return said[0]
    except OSError:
        pass
    return None


def release_driver(exp_dir: Path) -> None:
    """Remove `driver.json` where it names this process: the sweep's driver is ending."""
    if driver_record(exp_dir).get("pid") == os.getpid():
        (exp_dir / DRIVER_FILE).unlink(missing_ok=True)


TUNE_SAVING = frozenset({"checkpoint", "sync_up_experiment_state", "save_to_dir"})
"""Tune's functions on the way to its experiment state file (`TuneController.checkpoint`, Ray 2.60)."""


def save_state_beside_a_blocked_tune(exp_dir: Path, as_of: dict[str, str] | None = None) -> str | None:
    """Save Tune's experiment state from this thread, with Tune's own save (`TuneController.checkpoint`), while
    Tune's loop in the main thread is held in a call to a GCS that a SIGTERM to every process stopped. None once
    saved; else why nothing was written: the main thread is in Tune's save, there is not one controller, or Tune's
    last saved state in `exp_dir` cannot be read.

    There, Tune's loop was seen held in `remove_placement_group`, cleaning up after a trial actor the signal ended,
    and once with a trial marked TERMINATED, as Tune's stop of its trials leaves them (its `cleanup`, which it also
    calls without its final save when a step raises): Ray's GCS client retries for 60 s and then ends the process. The state saved here is the trials' progress and checkpoints as Tune has them.
    A trial that has ended in Tune's memory since its last saved state (Tune's stop marks the trials it stops
    TERMINATED, and one whose actor the signal ended is ERROR) is saved with the status that state gave it, so
    `tune resume` continues it as it would have from that state; Tune's memory is put back after the save.
    `as_of` (trial id to status) stands for that state: the state saved before the signal, where Tune's own save
    since has a trial the signal ended as ERROR.
    """
    import gc
    import threading

    from ray.tune.execution.tune_controller import TuneController

    frame = sys._current_frames().get(threading.main_thread().ident or -1)
    while frame is not None:
        if frame.f_code.co_name in TUNE_SAVING:
            return f"Tune's loop is in its own save ({frame.f_code.co_name})"  # two writers of one file
        frame = frame.f_back
    # After the cheap check; `type`, not `isinstance`, which reads `__class__` and wakes lazy modules' warnings.
    controllers = [o for o in gc.get_objects() if issubclass(type(o), TuneController)]
    if len(controllers) != 1:
        return f"{len(controllers)} Tune controllers in this process, not one"
    controller = controllers[0]
    saved = state.statuses(exp_dir) if as_of is None else as_of
    if not saved:
        return "Tune's last saved state cannot be read"
    ended = {trial: trial.status for trial in controller.get_trials()
             if trial.status in state.ENDED and saved.get(trial.trial_id) != trial.status}
    try:
        for trial in ended:
            _set_saved_status(controller, trial, saved.get(trial.trial_id) or "PENDING")
        controller.checkpoint(force=True, wait=True)
    except Exception as error:  # noqa: BLE001 - the stop goes on as it would have, with the state as it last saved it
        return f"Tune's save failed: {type(error).__name__}: {error}"
    finally:
        for trial, status in ended.items():
            _set_saved_status(controller, trial, status)
    return None


def _set_saved_status(controller: Any, trial: Any, status: str) -> None:
    """The status Tune's next save writes for `trial`, leaving Tune's own sets of trials by status as they are."""
    trial.set_status(status)  # drops the trial's cached state
    controller._mark_trial_to_checkpoint(trial)  # noqa: SLF001 - else the save writes the state it cached before


def _write_meta(loaded: LoadedSweep, plan_: dict, argv: list[str]) -> Path:
    exp_dir = loaded.experiment_dir
    exp_dir.mkdir(parents=True, exist_ok=True)
    from raytrain.tune.jobs import job_sweep

    # Runs as it is, from here (the base config embedded, `set:` applied): a relative `base:` named a file beside
    # the sweep file, which is not here.
    written = (f"# raytrain tune: the sweep {loaded.name} as it ran, base config embedded\n"
               + yaml.safe_dump(job_sweep(loaded), sort_keys=False))
    (exp_dir / SWEEP_FILE).write_text(written)
    meta = {
        "name": loaded.name,
        "sweep_file": written,  # `resume` tells of an edited sweep.yaml, and puts this back
        "algorithm": loaded.sweep.search.algorithm,
        "metric": loaded.metric,
        "mode": loaded.sweep.search.mode,
        "base": loaded.base.config.to_yaml_dict(),
        "plan": plan_,
        "versions": versions(),
    }
    (exp_dir / META_FILE).write_text(json.dumps(meta, indent=2, default=str) + "\n")
    append_command(exp_dir, argv)
    return exp_dir


class StateBackup(Callback):
    """After each step of Tune's loop, copies the experiment state into `<name>.complete` once it is whole again.

    The copy is taken only from a file that parses as a whole state, so a copy Tune's background thread is
    still writing is skipped until the next step; the copy itself is written to a temporary name, fsynced
    and renamed, so it is never cut short.
    """

    def __init__(self) -> None:
        self._copied: tuple[str, int, int] | None = None

    def on_step_end(self, iteration: int, trials: list[Any], **info: Any) -> None:
        if not trials:
            return
        try:
            path = state.newest_state(Path(trials[0].remote_experiment_path))
            if path is None:
                return
            st = path.stat()
            seen = (path.name, st.st_mtime_ns, st.st_size)
            if seen == self._copied:
                return
            data = path.read_bytes()
            if state.parse(data) is None:
                return
            write_atomic(path.with_name(path.name + state.COPY_SUFFIX), data)
            self._copied = seen
        except OSError:  # never fail the sweep over its safety copy
            return

    def __getstate__(self) -> dict[str, Any]:
        return {"_copied": None}


# Tune saves its experiment state (which checkpoint each trial has) every 10 s or more by default; a
# driver killed in between resumes trials from older checkpoints, or from scratch early in a run. Save it
# every 2 s unless the user chose otherwise.
EXPERIMENT_STATE_PERIOD_S = "2"


def run_sweep(loaded: LoadedSweep, plan_: dict, argv: list[str], live_every_s: float = 15.0,
              watch: FitWatch | None = None) -> Path:
    """Start a new sweep (Ray must be connected). Returns the experiment folder."""
    import os

    os.environ.setdefault("TUNE_GLOBAL_CHECKPOINT_S", EXPERIMENT_STATE_PERIOD_S)

    from raytrain.tune.build import build, concurrency_unset
    from raytrain.tune.storage import check_storage_on_cluster

    exp_dir = loaded.experiment_dir
    if any(exp_dir.glob(state.STATE_GLOB)):  # LoadedSweep.take_free_name() avoids this
        raise SweepError(
            f"{exp_dir} already holds an experiment; continue it with `raytrain tune resume {exp_dir}` "
            "or start a new one with --name NEW_NAME (nothing was changed)"
        )
    check_storage_on_cluster(loaded.sweep.checkpoint.storage_path)
    with _driving(exp_dir):  # the folder is claimed before anything is written into it
        _write_meta(loaded, plan_, argv)
        if loaded.sweep.search.seed is not None:
            # PBT and PB2 draw their perturbations from Python's and NumPy's global generators.
            import random

            import numpy as np

            random.seed(loaded.sweep.search.seed)
            np.random.seed(loaded.sweep.search.seed)
        at_once = concurrency_unset(loaded, plan_)
        if at_once is not None:
            print(f"note: search.max_concurrent_trials is unset: {at_once} trial(s) at once, as many as this cluster "
                  f"holds (else, with {loaded.sweep.search.algorithm}, Tune starts them one at a time)", file=sys.stderr)
        tuner = build(plan_, callbacks=[LiveTable(loaded.metric, live_every_s), StateBackup()], at_once=at_once)
        _fit(tuner, exp_dir, watch)
    finish(exp_dir)
    return exp_dir


@dataclass(frozen=True)
class Resumable:
    """An experiment folder that `check_resume` found Tune can resume."""

    exp_dir: Path
    """Absolute."""
    base: RaytrainConfig
    """The experiment's base train config, as its trials started with it."""
    finished: int | None = None
    """How many trials there are when every trial the sweep was to run has finished (TERMINATED in Tune's
    state), so that a resume has nothing to do; None otherwise (one is running, paused, errored or not started)."""
    out_of_time: bool = False
    """Whether the sweep's time budget stopped it (`state.cut_by_the_budget`): Tune keeps the spent budget in its
    state, and a resume would stop its trials at once, so it has nothing to do either."""

    @property
    def meta_file(self) -> str:
        """Where the base config is written (raytrain_sweep.json), for errors."""
        return str(self.exp_dir / META_FILE)

    def check_cpus(self, ray: RayCpus) -> None:
        """Raises ConfigError when `ray` (a local Ray about to start, or the Ray just joined) cannot place one of
        the experiment's trials: Tune would wait forever."""
        from raytrain.training import TRIAL_ACTORS, too_few_cpus, trial_bundles

        error = too_few_cpus(trial_bundles(self.base), self.base, lambda key: self.meta_file, TRIAL_ACTORS, ray,
                             prefix="base.", advice="resume it on a Ray that has them (--address, --cluster); its "
                             "trials keep the config they started with", group=True)
        if error is not None:
            raise error


def check_resume(exp_dir: str | Path) -> Resumable:
    """The experiment folder, once it is known to be a sweep Tune can resume. Needs no Ray; writes nothing.

    Raises UsageError when the folder is not a raytrain experiment with Tune's experiment state, and
    ConfigError when the experiment's base config no longer passes raytrain's or RLlib's checks. The CPUs its
    trials need are checked by `Resumable.check_cpus`, once the Ray they will run on is known.
    """
    from ray import tune

    from raytrain.config.load import load_source
    from raytrain.config.source import Source
    from raytrain.errors import ConfigError, ConfigIssue, UsageError
    from raytrain.paths import hold_folder, probe_writable
    from raytrain.rllib.translate import build_ppo_config
    from raytrain.runs import where_it_imported

    # Absolute: Tune reads the folder through pyarrow, which takes a relative path for a URI without a scheme.
    exp_dir = Path(exp_dir).expanduser().resolve()
    meta = read_meta(exp_dir)
    busy, warning = process_now(driver_record(exp_dir), exp_dir / DRIVER_FILE,
                                "the sweep's driver runs", "two drivers of one sweep stop each other's trials")
    if busy:
        raise UsageError(f"{exp_dir} is being run right now, by {busy}: two drivers of one sweep stop each other's "
                         "trials and delete each other's checkpoints. Let it end, or stop it (Ctrl-C there, `raytrain "
                         "tune stop JOB` for a submitted one, or `kill` it: Tune saves its state), then resume; nothing "
                         "was changed")
    if warning:
        print(warning, file=sys.stderr)
    if exp_dir.is_dir() and not hold_folder(exp_dir):  # its driver.json comes seconds after its start
        raise UsageError(f"{exp_dir} is being run right now, by another raytrain process of this machine, which holds "
                         "the folder (it started moments ago): two drivers of one sweep stop each other's trials. Let "
                         "it end, or stop it, then resume; nothing was changed")
    if not tune.Tuner.can_restore(str(exp_dir)):
        raise UsageError(
            f"{exp_dir} has no Tune experiment state to resume from (no tuner.pkl): the sweep never "
            "started its trials; run it again with `raytrain tune SWEEP_FILE`"
        )
    cut = state.broken(exp_dir)
    if cut is not None and not cut[1]:
        raise UsageError(
            f"{cut[0]} is empty or cut short (the sweep was killed while Tune was copying it) and no complete "
            "copy of it was kept, so Tune would start the sweep over; nothing was changed. Its trials' "
            f"checkpoints stay in {exp_dir}; run the sweep again with `raytrain tune SWEEP_FILE --name NEW_NAME`"
        )
    meta_file = str(exp_dir / META_FILE)
    if not isinstance(meta.get("base"), dict):
        raise ConfigError([ConfigIssue(meta_file, "base", "is not a train config")])
    try:
        cfg = load_source(Source(copy.deepcopy(meta["base"]), {}, meta_file)).config
    except ConfigError as exc:
        raise where_it_imported(exc, exp_dir) from None
    if state.cut_by_the_budget(exp_dir):
        return Resumable(exp_dir, cfg, out_of_time=True)
    finished = state.finished(exp_dir, meta.get("plan"))
    if finished is not None:  # nothing will be built: RLlib's checks (seconds of imports) are not needed
        return Resumable(exp_dir, cfg, finished)
    problem = probe_writable(exp_dir)
    if problem:  # found once Ray had started, by the first write (command.txt), exit 1
        raise UsageError(f"cannot resume in {exp_dir}: {problem}; nothing was changed")
    try:
        build_ppo_config(cfg).validate()
    except Exception as exc:  # RLlib raises ValueError and friends
        raise ConfigError([ConfigIssue(meta_file, "base", f"RLlib rejects the experiment's base config: {exc}")]) from None
    if state.newest_state(exp_dir) is None:  # Tune would start the sweep over (Optuna's searcher fails instead)
        raise UsageError(
            f"{exp_dir} has no Tune experiment state to resume from (no {state.STATE_GLOB}): the sweep stopped "
            "before its trials started, so there is nothing to continue; nothing was changed. Run the sweep again "
            "with `raytrain tune SWEEP_FILE`"
        )
    return Resumable(exp_dir, cfg)


def resume_sweep(exp_dir: Path, restart_errored: bool, argv: list[str], watch: FitWatch | None = None) -> Path:
    """Continue an interrupted sweep from its checkpoints. `exp_dir` is what `check_resume` found resumable; Ray
    must be connected."""
    import os

    from ray import tune

    from raytrain.tune.storage import check_storage_on_cluster
    from raytrain.tune.trainable import RaytrainPPO

    os.environ.setdefault("TUNE_GLOBAL_CHECKPOINT_S", EXPERIMENT_STATE_PERIOD_S)
    check_storage_on_cluster(str(exp_dir))  # every node must see the experiment's checkpoints
    append_command(exp_dir, argv)
    repaired = state.repair(exp_dir)
    if repaired is not None:
        print(f"note: {repaired.name} was cut short when the sweep was killed; put back its complete copy "
              f"({repaired.name}{state.COPY_SUFFIX}, at most one step of Tune's loop older)", file=sys.stderr)
    for line in state.set_aside(exp_dir, restart_errored, time.strftime("%Y-%m-%d_%H-%M-%S")):
        print(line, file=sys.stderr)
    state.forget_pending_decisions(exp_dir)  # else a trial that failed while saving is ended after one iteration
    if (edited := _edited_sweep_file(exp_dir)) is not None:
        print(edited, file=sys.stderr)
    tuner = tune.Tuner.restore(
        str(exp_dir),
        trainable=RaytrainPPO,
        resume_unfinished=True,
        resume_errored=not restart_errored,
        restart_errored=restart_errored,
    )
    with _driving(exp_dir):
        _fit(tuner, exp_dir, watch)
    finish(exp_dir)
    return exp_dir


def _edited_sweep_file(exp_dir: Path) -> str | None:
    """A note when the experiment's sweep.yaml was changed after the sweep started: a resume runs the sweep as it
    started (Tune's saved state), and said nothing of the edit, so the file then disagreed with what ran. The
    edited file is kept beside it (`sweep.edited-<time>.yaml`) and the file as written at the start put back."""
    recorded = read_meta(exp_dir).get("sweep_file")
    path = exp_dir / SWEEP_FILE
    try:
        now = path.read_text()
    except (OSError, UnicodeDecodeError):
        return None
    if not isinstance(recorded, str) or now == recorded:
        return None
    kept = path.with_name(f"{path.stem}.edited-{time.strftime('%Y-%m-%d_%H-%M-%S')}{path.suffix}")
    path.rename(kept)
    write_atomic(path, recorded)
    return (f"note: {path} was changed after the sweep started; a resume continues the sweep as it started (Tune's "
            f"saved state), not the changed file: that file is now {kept.name}, and {SWEEP_FILE} is back as the sweep "
            f"started. To run the changed sweep, start it as a new one: raytrain tune {kept} --name NEW_NAME")


def finish(exp_dir: Path) -> None:
    """Leaderboard, best.yaml and plots."""
    _, trials = summarize(exp_dir)
    write_leaderboard(exp_dir, trials)
    if trials and trials[0].metric_last is not None:
        write_best_config(exp_dir, trials[0])
    try:
        plot(exp_dir)
    except Exception as exc:  # plots are a convenience; never lose a finished sweep over one
        print(f"warning: could not draw plots: {exc}", file=sys.stderr)

"""The driver step of a Slurm job (run by the batch script on the head node, with RAY_ADDRESS set).

    python -m raytrain.slurm.driver sweep FILE --experiment-dir DIR [--set K=V ...]
    python -m raytrain.slurm.driver resume DIR
    python -m raytrain.slurm.driver train [FILE] --run-dir RUN_DIR [--set K=V ...]

`sweep` runs the sweep in exactly DIR (the folder the job was submitted for, where its script and log
already are), `resume` continues it from Tune's saved state. SIGTERM (the time limit, a preemption,
scancel) becomes Tune's own graceful stop (SIGUSR1): the experiment state is saved, and the driver exits
143 so the job does not read as finished.

`train` trains into exactly RUN_DIR (named when the job was submitted; its script and log are in it): when
RUN_DIR holds a complete checkpoint (a requeued job, or `train --resume RUN_DIR --slurm`), the run continues
from the latest one, as `raytrain train --resume RUN_DIR [FILE]` would; otherwise a new run of FILE starts
there. SIGTERM saves a checkpoint and stops, as `raytrain train` does on Ctrl-C.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from raytrain.cli.common import TuneStopOnTerm

TERMINATED_RC = 143


# A second SIGTERM (the batch shell forwards one, Slurm sends its own) must not cut the save short.
_TERMINATED = TuneStopOnTerm(second_ends=False)


def _sweep(file: str, experiment_dir: str, overrides: list[str]) -> None:
    from raytrain.cli.common import argv, err, say
    from raytrain.cli.tune_cmd import _report
    from raytrain.config.sweep_load import load_sweep
    from raytrain.errors import UsageError
    from raytrain.ray_session import connect_ray
    from raytrain.tune.build import check, plan
    from raytrain.tune.run import run_sweep

    loaded = load_sweep(file, overrides, storage="probe")
    say(loaded.notices + loaded.warnings)
    if loaded.experiment_dir.resolve() != Path(experiment_dir).resolve():
        raise UsageError(f"the sweep's experiment folder is {loaded.experiment_dir}, not {experiment_dir} as when "
                         "the job was submitted (was the sweep file changed?); submit it again")
    plan_ = plan(loaded)
    say(check(loaded, plan_))
    where = connect_ray(None)
    _TERMINATED.install()  # after ray.init(), whose own SIGTERM handler would otherwise end the driver at once
    err.print(f"sweep {loaded.name}: {loaded.sweep.search.algorithm}, ranking on {loaded.metric} ({where})", markup=False)
    err.print(f"experiment folder: {loaded.experiment_dir}", markup=False)
    _report(run_sweep(loaded, plan_, argv()))


def _resume(experiment_dir: str) -> None:
    from raytrain.cli.common import argv
    from raytrain.cli.tune_cmd import _report
    from raytrain.ray_session import connect_ray
    from raytrain.tune.run import check_resume, resume_sweep

    exp_dir = check_resume(experiment_dir).exp_dir
    connect_ray(None)
    _TERMINATED.install()
    _report(resume_sweep(exp_dir, False, argv()))


@dataclass
class TrainStep:
    """What a train job's driver runs: `raytrain train` with these arguments, into `run_dir`."""

    words: list[str]
    """The equivalent `raytrain train ...` arguments (recorded in the run folder's command.txt)."""
    file: Path | None
    overrides: list[str]
    resume: Path | None
    """The run folder to continue (its latest complete checkpoint), or None for a new run."""
    run_dir: Path
    note: str


def plan_train(file: str | None, run_dir: str, overrides: list[str], restarts: int = 0) -> TrainStep | None:
    """Continue the run in `run_dir` if it holds a complete checkpoint, else start a new one of `file` there.

    None: nothing to do (a requeued job, `restarts` > 0, whose run had already finished).

    Raises:
        UsageError: no checkpoint to continue from and no file to start from.
    """
    from raytrain.errors import UsageError
    from raytrain.runs import RunFolder, absolute

    folder = RunFolder(absolute(run_dir))
    sets = [w for kv in overrides for w in ("--set", kv)]
    given = [file] if file is not None else []
    checkpoint = folder.latest_checkpoint() if (folder.path / "config.yaml").is_file() else None
    if checkpoint is not None:
        if restarts > 0 and folder.status().get("status") == "finished":
            return None
        return TrainStep(["train", "--resume", str(folder.path), *given, *sets], Path(file) if file else None,
                         list(overrides), folder.path, folder.path,
                         f"{folder.path} holds {checkpoint.name}: continuing the run from it")
    if file is None:
        raise UsageError(f"{folder.path} has no complete checkpoint to continue from, and the job names no config "
                         "file to start a new run from")
    return TrainStep(["train", file, *sets], Path(file), list(overrides), None, folder.path,
                     f"a new run in {folder.path}")


def _train(file: str | None, run_dir: str, overrides: list[str]) -> None:
    from raytrain.cli.common import err, handle_errors
    from raytrain.cli.train_cmd import run_train

    def decide() -> TrainStep | None:
        return plan_train(file, run_dir, overrides, int(os.environ.get("SLURM_RESTART_COUNT") or 0))

    step = handle_errors(decide)()
    if step is None:
        err.print(f"raytrain: the run in {run_dir} finished before the job was requeued: nothing to do", markup=False)
        return
    err.print(f"raytrain: {step.note}", markup=False)
    sys.argv = ["raytrain", *step.words]  # what command.txt records: the `raytrain train` this step is
    # A second SIGTERM (Slurm's own after the batch shell's, or the other way round) must not cut the
    # checkpoint short; Slurm's SIGKILL after KillWait still ends the driver.
    run_train(step.file, step.overrides, resume=step.resume, run_dir=None if step.resume else step.run_dir,
              second_term_ends=False)


def main(args: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m raytrain.slurm.driver")
    sub = parser.add_subparsers(dest="what", required=True)
    p = sub.add_parser("sweep")
    p.add_argument("file")
    p.add_argument("--experiment-dir", required=True)
    p.add_argument("--set", action="append", default=[])
    p = sub.add_parser("resume")
    p.add_argument("experiment_dir")
    p = sub.add_parser("train")
    p.add_argument("file", nargs="?")
    p.add_argument("--run-dir", required=True)
    p.add_argument("--set", action="append", default=[])
    ns = parser.parse_args(args)

    if ns.what == "train":
        # `raytrain train` turns SIGTERM into a checkpoint and a clean stop itself.
        return _exit_code(lambda: _train(ns.file, ns.run_dir, ns.set))

    from raytrain.cli.common import handle_errors

    terminated = _TERMINATED
    terminated.install()  # again after ray.init() (see _sweep)
    step = (lambda: _sweep(ns.file, ns.experiment_dir, ns.set)) if ns.what == "sweep" else (lambda: _resume(ns.experiment_dir))
    rc = _exit_code(handle_errors(step))
    return TERMINATED_RC if terminated.received else rc


def _exit_code(fn: Callable[[], object]) -> int:
    try:
        fn()
    except SystemExit as exc:  # typer.Exit from handle_errors, or typer's own exit
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except Exception as exc:  # click's Exit is not a SystemExit
        code = getattr(exc, "exit_code", None)
        if isinstance(code, int):
            return code
        raise
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""`raytrain train` and `raytrain eval`."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from raytrain.cli.common import (
    AddressOption,
    ClusterOption,
    SetOption,
    argv,
    err,
    exit_now,
    handle_errors,
    interrupt_on_signals,
    local_ray_lost_to_the_signal,
    out,
    say,
)
from raytrain.cli.slurm_cmd import SlurmOption
from raytrain.cli.slurm_cmd import submit as slurm_submit
from raytrain.metrics import count_text, metric_text

if TYPE_CHECKING:
    from raytrain.config.schema import RaytrainConfig
    from raytrain.training import IterationReport, TrainOutcome


EVAL_RETURN = "evaluation/env_runners/episode_return_mean"


def _progress_line(report: IterationReport, cfg: RaytrainConfig, started: float) -> str:
    m = report.metrics
    parts = [
        f"iter {report.iteration:>4}",
        f"return(last {cfg.experiment.return_window}) {metric_text(m.get(cfg.return_metric)):>7}",
        f"iter-mean {metric_text(m.get('env_runners/episode_return_mean')):>7}",
        f"steps {count_text(m.get('num_env_steps_sampled_lifetime')):>9}",
        f"{metric_text(report.steps_per_s):>7} steps/s",
        f"{time.perf_counter() - started:6.1f}s",
    ]
    if (evaluated := m.get(EVAL_RETURN)) is not None:  # RLlib repeats the last evaluation's until the next
        parts.insert(3, f"eval {metric_text(evaluated):>7}")
    for key, done in report.stop_progress.items():
        if done is not None:
            parts.append(f"{'eval ' if key.startswith('evaluation/') else ''}{key.rsplit('/', 1)[-1]} {done:.0f}%")
    if report.checkpoint:
        parts.append(f"checkpoint {report.checkpoint.name}")
    return " | ".join(parts)


def train(
    file: Annotated[Path | None, typer.Argument(help="Train config YAML (optional with --resume).")] = None,
    set_: SetOption = None,
    address: AddressOption = None,
    cluster: ClusterOption = None,
    dry_run: bool = typer.Option(False, "--dry-run", help="Validate and print what would run; start nothing."),
    resume: Path | None = typer.Option(None, "--resume", help="Continue the run in this folder from its latest checkpoint."),
    slurm: SlurmOption = None,
) -> None:
    """Train PPO from a YAML config on a local Ray (or the cluster at --address / RAY_ADDRESS / --cluster)."""
    if slurm is not None:
        _slurm(file, set_ or [], slurm, dry_run, address or cluster, resume)
        return
    run_train(file, set_ or [], address=address, cluster=cluster, dry_run=dry_run, resume=resume)


@handle_errors
def _slurm(
    file: Path | None, overrides: list[str], slurm: Path, dry_run: bool, conflicting: str | Path | None, resume: Path | None
) -> None:
    from raytrain.errors import UsageError

    if conflicting or (file is None and resume is None):
        raise UsageError("--slurm submits a run as a Slurm job that starts its own Ray: give CONFIG.yaml (a new run) "
                         "or --resume RUN_DIR (continue one), and leave out --address and --cluster")
    slurm_submit("train", file, overrides, slurm, dry_run, resume=resume)


def _warn(line: str) -> None:
    err.print(line, style="yellow", markup=False)


@handle_errors
def run_train(
    file: Path | None,
    overrides: list[str],
    *,
    address: str | None = None,
    cluster: Path | None = None,
    dry_run: bool = False,
    resume: Path | None = None,
    run_dir: Path | None = None,
    second_term_ends: bool = True,
) -> None:
    """`raytrain train` without --slurm: prepare (every check, exit 2), then print the plan or start the run.

    `run_dir` (a Slurm job's driver): a new run goes into exactly this folder, named when the job was
    submitted, instead of a new one under storage_path/name. `second_term_ends`: see `interrupt_on_signals`.
    """
    from raytrain import train_run

    started = time.perf_counter()
    prepared = train_run.prepare(
        file, overrides, address=address, cluster=cluster, resume=resume, run_dir=run_dir, notify=lambda line: say([line])
    )
    if dry_run:
        out.print(train_run.plan(prepared), markup=False)
        return
    if prepared.finished and prepared.resumed is not None and prepared.checkpoint is not None:
        (key, reached), run = prepared.finished, prepared.resumed.path
        err.print(f"{run} already reached {reached} at its latest checkpoint {prepared.checkpoint.name}: "
                  "nothing to resume, so nothing was started or changed; to train further, raise it: "
                  f"raytrain train --resume {run} --set stop.{key}=N", markup=False)
        out.print(str(run), markup=False)
        return
    cfg = prepared.cfg
    outcome = train_run.start(
        prepared,
        argv(),
        on_iteration=lambda report: err.print(_progress_line(report, cfg, started), markup=False),
        on_line=lambda line: err.print(line, markup=False),
        on_note=lambda text: err.print(text, style="dim", markup=False),
        on_connected=lambda: interrupt_on_signals(second_term_ends=second_term_ends),
        on_interrupted=_end_at_once_if_local_ray_lost,
    )
    _say_outcome(outcome)
    if outcome.reason == "interrupted":
        raise typer.Exit(130)


def _say_outcome(outcome: TrainOutcome) -> None:
    from raytrain.training import RAY_LOST

    err.print(f"{outcome.reason} after {outcome.iteration} iterations", style="bold", markup=False)
    if outcome.last_checkpoint:
        err.print(f"checkpoint: {outcome.last_checkpoint}", markup=False)
    out.print(str(outcome.run_dir), markup=False)
    if outcome.reason in ("interrupted", RAY_LOST) and outcome.last_checkpoint:
        err.print(f"resume with: raytrain train --resume {outcome.run_dir}", markup=False)
    elif outcome.reason in ("interrupted", RAY_LOST):  # before its first iteration ended (or no checkpoints)
        err.print("no checkpoint was saved, so there is nothing to resume: start the run again", markup=False)


def _end_at_once_if_local_ray_lost(outcome: TrainOutcome) -> None:
    """An interrupted run whose checkpoint is saved: when the signal went to every process of the command (systemd
    or Slurm stopping it), the local Ray's own processes got it too (`local_ray_lost`).
    Stopping the Algorithm, or letting go of the objects the interrupted iteration held, then talks to a raylet
    that is gone, and Ray's core worker ends the process with exit 1 and no word (as it did once, when the GCS
    restarted the env runner the signal had ended). So: say how the run ended, kill what is left of that Ray,
    and exit 130 now.

    A run whose local Ray stopped under it with no signal to this process (`RayLost`: `ray stop`, the OOM killer)
    ends the same way once its checkpoint is saved, with exit 1 (0 where its stop was reached in that iteration)."""
    from raytrain.ray_session import abandon_local_ray
    from raytrain.rllib.algorithm import remove_scratch_folders
    from raytrain.training import RAY_LOST

    if local_ray_lost_to_the_signal():
        err.print("the SIGTERM stopped the local Ray's own processes too (it went to every process of the command, "
                  "as systemd and Slurm send it): the checkpoint is saved, and Ray was not stopped in order",
                  markup=False)
        code = 130
    elif outcome.ray_lost:
        err.print(f"the local Ray this run started stopped under it ({', '.join(outcome.ray_lost)}: `ray stop` on "
                  "this machine, the OOM killer, or a signal to Ray's processes alone); the run ends here, before Ray "
                  "ends this process 60 s after its GCS, with no word and no checkpoint", markup=False)
        code = 1 if outcome.reason == RAY_LOST else 0
    else:
        return
    _say_outcome(outcome)
    remove_scratch_folders()
    abandon_local_ray()
    exit_now(code)


def eval_(
    checkpoint: Annotated[Path, typer.Argument(help="A checkpoint folder, or a run folder (its latest checkpoint); "
                                               "a sweep's trial checkpoint or trial folder, or its experiment folder "
                                               "(the best trial's checkpoint).")],
    episodes: int = typer.Option(10, "--episodes", "-n", min=1, help="Episodes to run."),
    explore: bool = typer.Option(False, help="Sample stochastic actions instead of the greedy ones."),
    seed: int | None = typer.Option(None, min=0, max=2**31 - 1, help="Seed the evaluation env (0 to 2**31-1)."),
    json_: bool = typer.Option(False, "--json", help="Print the result as JSON."),
) -> None:
    """Run fresh episodes with a checkpoint's policy: mean, std, min and max return."""
    _eval(checkpoint, episodes, explore, seed, json_)


@handle_errors
def _eval(checkpoint: Path, episodes: int, explore: bool, seed: int | None, json_: bool) -> None:
    from raytrain.evaluate import evaluate, plan_eval

    plan = plan_eval(checkpoint, seed, on_skip=_warn)  # not a checkpoint, bad config: exit 2 before Ray
    from raytrain.quiet import quiet_ray
    from raytrain.training import connect_for_build

    messages = quiet_ray()  # Ray's and RLlib's own warnings: off the terminal (--verbose prints them); eval writes nothing
    try:
        # After ray.init, whose SIGTERM handler ended eval with a native stack dump; before the wait for imports.
        connect_for_build(None, on_connected=interrupt_on_signals)
        result = evaluate(plan, episodes, explore)
    finally:
        if messages is not None:
            messages.close()
    summary = result.summary()
    if json_:
        typer.echo(json.dumps({**summary, "returns": result.returns}))
        return
    from rich.table import Table

    table = Table(title=f"{summary['episodes']} episodes of {summary['checkpoint']}")
    for col in ("return mean", "std", "min", "max", "length mean"):
        table.add_column(col, justify="right")
    table.add_row(*(f"{summary[k]:.2f}" for k in ("return_mean", "return_std", "return_min", "return_max", "length_mean")))
    out.print(table)


def register(app: typer.Typer) -> None:
    app.command("train")(train)
    app.command("eval")(eval_)

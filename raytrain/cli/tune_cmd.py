"""`raytrain tune FILE`, `raytrain tune resume|status|plot EXPERIMENT_DIR`, and submitted sweeps: logs|status|stop JOB."""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from typer.core import TyperGroup

from raytrain.cli.common import (
    AddressOption,
    ClusterOption,
    LocalRayWatch,
    SetOption,
    TuneStopOnTerm,
    argv,
    err,
    handle_errors,
    out,
    say,
)
from raytrain.cli.slurm_cmd import SlurmOption
from raytrain.cli.slurm_cmd import submit as slurm_submit
from raytrain.ray_session import cluster_address

if TYPE_CHECKING:
    from typer._click.core import Context  # the click that typer bundles, which TyperGroup is typed against

    from raytrain.config.cluster import ClusterConfig
    from raytrain.training import RayCpus
    from raytrain.tune.results import TrialSummary


class _FileMeansRun(TyperGroup):
    """`raytrain tune [OPTIONS] FILE ...` is `raytrain tune run ...`; subcommands and --help keep their meaning."""

    def parse_args(self, ctx: Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in self.get_help_option_names(ctx):
            args = ["run", *args]
        return super().parse_args(ctx, args)


ExperimentDirArgument = Annotated[Path, typer.Argument(help="The experiment folder (checkpoint.storage_path/name).")]

app = typer.Typer(
    cls=_FileMeansRun,
    help="Hyperparameter sweeps (PBT, PB2, ASHA, Optuna) through Ray Tune: raytrain tune FILE.",
    no_args_is_help=True,
    rich_markup_mode=None,
)


def _name_override(name: str | None) -> list[str]:
    """`--name` as an override of the sweep's `name`, its value taken as text; exit 2 naming the flag when it is
    not one folder name."""
    from raytrain.config.schema import folder_name
    from raytrain.config.source import override_text
    from raytrain.errors import UsageError

    if name is None:
        return []
    try:
        folder_name(name)
    except ValueError as exc:
        raise UsageError(f"--name {name!r}: {exc}") from None
    return [override_text("name", name)]


@app.command("run")
@handle_errors
def run(
    file: Annotated[Path, typer.Argument(help="Sweep YAML.")],
    set_: SetOption = None,
    address: AddressOption = None,
    cluster: ClusterOption = None,
    dry_run: bool = typer.Option(False, "--dry-run", help="Check the sweep and print what Tune would get; start nothing."),
    name: str | None = typer.Option(None, "--name", help="Experiment name (overrides the file's `name`)."),
    submit: bool = typer.Option(False, "--submit", help="With --cluster: run the sweep as a Ray Job on the head (this machine may disconnect)."),
    slurm: SlurmOption = None,
) -> None:
    """Run a sweep: live trial table, then a leaderboard, best.yaml and plots in the experiment folder."""
    import yaml

    if slurm is not None:
        if address or cluster or submit:
            from raytrain.errors import UsageError

            raise UsageError("--slurm starts its own Ray inside the Slurm job: leave out --address, --cluster and --submit")
        slurm_submit("tune", file, list(set_ or []) + _name_override(name), slurm, dry_run)
        return

    from raytrain.config.sweep_load import load_sweep
    from raytrain.tune.build import check, check_cpus, plan

    if submit:
        _submit(file, set_, cluster, name, address, dry_run)
        return
    address = cluster_address(address, cluster)  # before Ray is imported: it reads the auth settings then
    overrides = list(set_ or []) + _name_override(name)
    # Every check, the same for --dry-run and the real run, before Ray starts and before anything is written.
    loaded = load_sweep(file, overrides, storage="probe")
    moved = loaded.take_free_name()
    from raytrain.cluster.lifecycle import storage_warning

    outside = storage_warning(cluster, loaded.sweep.checkpoint.storage_path, "checkpoint.storage_path")
    say(loaded.notices + loaded.warnings + ([moved] if moved else []) + ([outside] if outside else []))
    plan_ = plan(loaded)
    say(check(loaded, plan_))
    from raytrain.ray_session import ray_address

    if ray_address(address) is None:  # a local Ray: its CPUs are known before it starts
        check_cpus(loaded)
    if dry_run:
        shown = json.loads(json.dumps(plan_, default=str))
        shown["param_space"]["raytrain"]["base"] = "<the base train config, see `raytrain config show`>"
        out.print(yaml.safe_dump(shown, sort_keys=False).rstrip(), markup=False)
        out.print(f"# experiment folder: {loaded.experiment_dir}", markup=False)
        return

    held = loaded.take_free_name(hold=True)  # made and held now: another sweep of this name may be starting
    if held:
        say([held])
        plan_ = plan(loaded)
    from raytrain.tune.run import run_sweep

    def started(where: str) -> None:
        from raytrain.tune.build import trial_count

        err.print(f"sweep {loaded.name}: {loaded.sweep.search.algorithm}, {trial_count(loaded)} trials, ranking on {loaded.metric} ({where})", markup=False)
        err.print(f"experiment folder: {loaded.experiment_dir}", markup=False)

    try:
        _drive(address, loaded.experiment_dir, lambda watch: run_sweep(loaded, plan_, argv(), watch=watch),
               lambda ray: check_cpus(loaded, ray), started)
    finally:
        loaded.unmake()  # the folders made to hold the name, where the sweep wrote nothing into them


UNFINISHED = ("RUNNING", "PENDING", "PAUSED")
"""A trial's statuses, as Tune last saved them, where it has not ended (`state.ENDED`): a sweep whose driver has
stopped with such trials was stopped before its end (unless its time budget ran out: `_out_of_time`)."""


def _drive(address: str | None, exp_dir: Path, sweep: Callable[[LocalRayWatch], Path], check: Callable[[RayCpus], object],
           started: Callable[[str], None] | None = None) -> None:
    """Connect to Ray (`started` is told where), check that its CPUs can place a trial (`check`, which raises
    ConfigError: a joined cluster's CPUs are known only now), then with Ray's own messages going to the
    experiment's ray.log, run `sweep` (given the watch that ends it where its local Ray stops under Tune's loop),
    and report on the experiment folder it returns."""
    from raytrain.quiet import quiet_ray
    from raytrain.ray_session import connect_ray
    from raytrain.training import connected_ray

    messages = quiet_ray()  # Ray's, Tune's and RLlib's own messages: into the experiment's ray.log
    try:
        where = connect_ray(address)
        term = TuneStopOnTerm(exp_dir=exp_dir).install()  # SIGTERM: Tune's own stop, as on Ctrl-C (after ray.init: see there)
        check(connected_ray(where))  # before anything is written
        if started is not None:
            started(where)
        if messages is not None:
            log = messages.log_to(exp_dir)
            err.print(f"Ray's own messages go to {log} (--verbose prints them here)", style="dim", markup=False)
        exp_dir = sweep(LocalRayWatch(exp_dir, term))  # `ray stop`, the OOM killer: the sweep ends with its state saved
    finally:
        if messages is not None:
            messages.close()
    trials = _report(exp_dir)
    if not term.received and _out_of_time(exp_dir, trials):
        return
    _stopped_early(exp_dir, trials, "SIGTERM" if term.received else None)


def _out_of_time(exp_dir: Path, trials: list[TrialSummary]) -> bool:
    """Whether the sweep's time budget (`time_budget_s`) stopped it, said if so (`state.cut_by_the_budget`). That is
    the sweep's own end, as its stop criteria are (exit 0), not an interruption: a sweep that ran out of time was
    reported as stopped by Ctrl-C (exit 130, "continue it with `raytrain tune resume`", which stopped at once: Tune
    keeps the spent budget in its state). `trials`: what `_report` read."""
    from raytrain.tune import state
    from raytrain.tune.results import read_meta

    cut = state.cut_by_the_budget(exp_dir)
    if not cut:
        return False
    try:
        budget = f" ({float(read_meta(exp_dir)['plan']['tune_config']['time_budget_s']):g} s)"
    except (KeyError, TypeError, ValueError):
        budget = ""
    paused = [t for t in trials if t.status in UNFINISHED]
    left = f", {len(paused)} of them left paused" if paused else ""
    say([f"warning: the sweep's time budget{budget} ran out: Tune stopped {len(cut) + len(paused)} of {len(trials)} "
         f"trials before their stop criteria{left}. The leaderboard ranks what each reached. Tune keeps the spent "
         "budget in its state, so `raytrain tune resume` has nothing to continue: to search further, run the sweep "
         "again with a larger time_budget_s (and a new --name)"])
    return True


def _stopped_early(exp_dir: Path, trials: list[TrialSummary], signal_name: str | None) -> None:
    """A sweep that Ctrl-C or SIGTERM stopped (Tune saved its state and returned) is not reported as done:
    exit 130 with the command that continues it. `trials`: what `_report` read."""
    unfinished = [t for t in trials if t.status in UNFINISHED]
    if not unfinished:
        return
    by = f" by {signal_name}" if signal_name else ""
    err.print(f"the sweep was stopped{by} before its end: {len(unfinished)} of {len(trials)} trials had not finished. "
              f"Tune saved its state: continue it with `raytrain tune resume {shlex.quote(str(exp_dir))}`",
              style="red", markup=False)
    raise typer.Exit(130)


def _submit(file: Path, set_: list[str] | None, cluster: Path | None, name: str | None, address: str | None, dry_run: bool) -> None:
    import yaml

    from raytrain.config.cluster import load_cluster
    from raytrain.config.sweep_load import load_sweep
    from raytrain.errors import UsageError
    from raytrain.tune import jobs

    if cluster is None or address:
        raise UsageError("--submit runs the sweep as a job on a cluster: give --cluster FILE (not --address)")
    cfg = load_cluster(cluster)
    overrides = list(set_ or []) + _name_override(name)
    # Every config error here, before anything reaches the cluster; the storage path is the cluster's.
    loaded = load_sweep(file, overrides, storage="skip")
    from raytrain.cluster.lifecycle import storage_warning

    outside = storage_warning(cluster, loaded.sweep.checkpoint.storage_path, "checkpoint.storage_path")
    say(loaded.notices + loaded.warnings + ([outside] if outside else []))
    from raytrain.tune.build import check, plan

    say(check(loaded, plan(loaded)))
    if dry_run:
        from raytrain.imports import working_directory_modules

        out.print(yaml.safe_dump(jobs.job_sweep(loaded), sort_keys=False).rstrip(), markup=False)
        out.print(f"# would run on the head of {cfg.name}: {cfg.python_path} -m raytrain tune {jobs.SWEEP_FILE}", markup=False)
        if shipped := working_directory_modules(loaded.import_paths()):
            out.print(f"# would take along from {Path.cwd()}: {', '.join(p.name for p in shipped)}", markup=False)
        return
    from raytrain.quiet import quiet_ray

    messages = quiet_ray()  # Ray's job client logs its upload at INFO; the job's own log is on the cluster
    try:
        job_id, shipped_names = jobs.submit(cfg, loaded)
    finally:
        if messages is not None:
            messages.close()
    err.print(f"submitted sweep {loaded.name} to cluster {cfg.name} as job {job_id}", markup=False)
    if shipped_names:
        err.print(f"  took along from {Path.cwd()}: {', '.join(shipped_names)} (the sweep's own code: the job runs in a folder of its own)", markup=False)
    err.print(f"  follow:  raytrain tune logs {job_id} --cluster {cluster}", markup=False)
    err.print(f"  status:  raytrain tune status {job_id} --cluster {cluster}", markup=False)
    err.print(f"  stop:    raytrain tune stop {job_id} --cluster {cluster}", markup=False)
    err.print(f"  results: {loaded.experiment_dir} (on the cluster's storage)", markup=False)
    out.print(job_id, markup=False)


def _not_a_folder(job_id: str, what: str) -> None:
    """A folder given where a submitted job's id goes (`tune stop results/my_sweep`): said what to do with it.
    It was told only that --cluster was needed."""
    from raytrain.errors import UsageError

    folder = Path(job_id).expanduser()
    if not folder.is_dir():
        return
    told = f"{what} takes the id of a job submitted with `raytrain tune --submit` (it printed it), not a folder"
    if what == "tune stop":
        from raytrain.runs import process_now
        from raytrain.tune.run import DRIVER_FILE, driver_record

        busy, _ = process_now(driver_record(folder), folder / DRIVER_FILE, "", "")
        if busy:
            raise UsageError(f"{told}. The sweep in {folder} runs here, in {busy}: Ctrl-C in its terminal, or `kill` it "
                             f"(SIGTERM), stops it with its state saved; `raytrain tune resume {folder}` continues it")
        raise UsageError(f"{told}. No sweep runs in {folder} now; `raytrain tune status {folder}` shows its trials")
    raise UsageError(f"{told}. A sweep run here prints to its terminal, and each trial's output is in the trial's "
                     f"folder; `raytrain tune status {folder}` shows its trials")


def _cluster_cfg(cluster: Path | None, what: str) -> ClusterConfig:
    from raytrain.config.cluster import load_cluster
    from raytrain.errors import UsageError

    if cluster is None:
        raise UsageError(f"{what} needs --cluster FILE (the cluster the job was submitted to)")
    return load_cluster(cluster)


@app.command()
@handle_errors
def logs(
    job_id: Annotated[str, typer.Argument(help="The job id `raytrain tune --submit` printed.")],
    cluster: ClusterOption = None,
    follow: bool = typer.Option(True, "--follow/--no-follow", help="Keep printing until the job ends."),
) -> None:
    """Print the output of a submitted sweep (and follow it until it ends)."""
    import sys

    from raytrain.tune import jobs

    _not_a_folder(job_id, "tune logs")
    cfg = _cluster_cfg(cluster, "tune logs")
    for chunk in jobs.follow_logs(cfg, job_id, follow):
        sys.stdout.write(chunk)
        sys.stdout.flush()
    if follow:
        state = jobs.status(cfg, job_id)
        err.print(f"job {job_id}: {state['status']}" + (f" ({state['message']})" if state["message"] else ""), markup=False)


@app.command()
@handle_errors
def stop(
    job_id: Annotated[str, typer.Argument(help="The job id `raytrain tune --submit` printed.")],
    cluster: ClusterOption = None,
) -> None:
    """Stop a submitted sweep cleanly: Tune saves its state; continue it later with `raytrain tune resume`."""
    from raytrain.tune import jobs

    _not_a_folder(job_id, "tune stop")
    cfg = _cluster_cfg(cluster, "tune stop")
    info = jobs.stop(cfg, job_id)
    err.print(f"job {job_id}: {info['status']}", markup=False)
    exp = info["metadata"].get("experiment_dir")
    if exp:
        err.print(f"continue it on the head with: raytrain tune resume {exp} --cluster {cluster}", markup=False)


@app.command()
@handle_errors
def resume(
    experiment_dir: ExperimentDirArgument,
    address: AddressOption = None,
    cluster: ClusterOption = None,
    restart_errored: bool = typer.Option(False, "--restart-errored", help="Start errored trials again from scratch (default: retry them from their last checkpoint)."),
) -> None:
    """Continue a sweep whose driver was killed: finished trials stay done, running ones continue from checkpoints."""
    address = cluster_address(address, cluster)
    from raytrain.ray_session import ray_address
    from raytrain.training import local_ray
    from raytrain.tune.run import check_resume, resume_sweep

    # before Ray starts and before anything is written; a local Ray's CPUs are known before it starts
    resumable = check_resume(experiment_dir)
    if resumable.out_of_time:
        say([f"warning: {resumable.exp_dir.name} ended when its time budget (time_budget_s) ran out, and Tune keeps "
             "the spent budget in its state: a resume would stop its trials at once, so nothing was started or "
             "changed. To search further, run the sweep again with a larger time_budget_s (raytrain tune SWEEP_FILE "
             "--set time_budget_s=SECONDS --name NEW_NAME)"])
        _report(resumable.exp_dir)
        return
    if resumable.finished is not None:
        say([f"every trial of {resumable.exp_dir.name} has finished ({resumable.finished} TERMINATED): nothing to "
             "resume, so nothing was started or changed; to search further, run a new sweep (raytrain tune "
             "SWEEP_FILE --name NEW_NAME)"])
        _report(resumable.exp_dir)
        return
    if ray_address(address) is None:
        resumable.check_cpus(local_ray())
    exp_dir = resumable.exp_dir
    _drive(address, exp_dir, lambda watch: resume_sweep(exp_dir, restart_errored, argv(), watch=watch), resumable.check_cpus)


@app.command()
@handle_errors
def status(
    target: Annotated[str | None, typer.Argument(metavar="EXPERIMENT_DIR|JOB_ID", help="The experiment folder, or with --cluster a job id (none: list the sweep jobs).")] = None,
    cluster: ClusterOption = None,
    json_: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """A sweep's trials read from storage (during or after the run), or a submitted sweep job's state."""
    from dataclasses import asdict

    from raytrain.tune.results import summarize

    if cluster is not None and (target is None or not Path(target).is_dir()):
        _job_status(cluster, target, json_)
        return
    if target is None:
        from raytrain.errors import UsageError

        raise UsageError("give the experiment folder (or --cluster FILE and a job id)")
    experiment_dir = Path(target)
    meta, trials = summarize(experiment_dir)
    if json_:
        best = trials[0] if trials and trials[0].metric_last is not None else None
        typer.echo(json.dumps({
            "name": meta["name"], "algorithm": meta["algorithm"], "metric": meta["metric"], "mode": meta["mode"],
            "trials": [asdict(t) for t in trials],
            "best": asdict(best) if best else None,
        }, indent=2, default=str))
        return
    from raytrain.tune.report import leaderboard_table

    out.print(leaderboard_table(meta, trials))
    if not trials:
        out.print(f"no trial of {experiment_dir} has started yet: Tune has saved no trial (a sweep starting, or "
                  "stopped before its first trial)", markup=False)
    unfinished = [t for t in trials if t.status in UNFINISHED]
    if unfinished and _not_driven(experiment_dir):
        from raytrain.tune import state

        if state.cut_by_the_budget(experiment_dir):  # Tune's stop there can leave a trial PAUSED
            out.print(f"the sweep ran out of its time budget (time_budget_s): {len(unfinished)} of {len(trials)} "
                      "trials were left paused, and Tune keeps the spent budget in its state, so there is nothing to "
                      "resume", markup=False)
            return
        out.print(f"the sweep is not running: {len(unfinished)} of {len(trials)} trials had not finished (their status "
                  f"is as Tune last saved it); continue it with `raytrain tune resume "
                  f"{shlex.quote(str(experiment_dir))}`", markup=False)


def _not_driven(exp_dir: Path) -> bool:
    """Whether no driver runs the sweep in `exp_dir`: none recorded, or the one recorded has ended on this machine
    (one on another machine, a submitted sweep's on its cluster's head, cannot be told from here)."""
    from raytrain.runs import process_now
    from raytrain.tune.run import DRIVER_FILE, driver_record

    record = driver_record(exp_dir)
    busy, elsewhere = process_now(record, exp_dir / DRIVER_FILE, "the sweep's driver runs", "")
    return not busy and not elsewhere


@app.command("plot")
@handle_errors
def plot_(experiment_dir: Annotated[Path, typer.Argument(help="The experiment folder.")]) -> None:
    """Redraw the PNG plots of a sweep into EXPERIMENT_DIR/plots."""
    from raytrain.errors import SweepError
    from raytrain.tune.plots import plot

    try:
        drawn = plot(experiment_dir)
    except OSError as exc:  # a file where plots/ goes, a read-only folder: Python's own error, no word of what to do
        where = exc.filename or Path(experiment_dir) / "plots"
        raise SweepError(f"cannot write the plots: {where}: {exc.strerror or exc} (the plots go to "
                         f"{Path(experiment_dir) / 'plots'}/, a folder: move what is there, or make the folder "
                         "writable)") from exc
    for path in drawn:
        out.print(str(path), markup=False)


def _job_status(cluster: Path, job_id: str | None, json_: bool) -> None:
    from raytrain.tune import jobs

    cfg = _cluster_cfg(cluster, "tune status JOB_ID")
    if job_id is None:
        rows = jobs.list_jobs(cfg)
        if json_:
            typer.echo(json.dumps(rows, indent=2))
            return
        for r in rows:
            out.print(f"{r['job_id']}  {r['status']:<10} {r['sweep']}", markup=False)
        return
    info = jobs.status(cfg, job_id)
    if json_:
        typer.echo(json.dumps(info, indent=2))
        return
    out.print(f"job {job_id}: {info['status']}" + (f" ({info['message']})" if info["message"] else ""), markup=False)
    exp = info["metadata"].get("experiment_dir")
    if exp:
        out.print(f"experiment: {exp}  (raytrain tune status {exp}, where the storage is mounted)", markup=False)


def _last_line(error_file: str | None) -> str:
    """What a trial failed with, the last line of its error.txt (Tune's traceback), and where the rest is."""
    if not error_file:
        return "see its folder"
    try:
        lines = [line.strip() for line in Path(error_file).read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return error_file
    return f"{lines[-1]} ({error_file})" if lines else error_file


def _report(exp_dir: Path) -> list[TrialSummary]:
    """Print the leaderboard and what the best trial left; return the trials read (best first)."""
    from raytrain.metrics import metric_text
    from raytrain.tune.report import leaderboard_table
    from raytrain.tune.results import summarize

    meta, trials = summarize(exp_dir)
    out.print(leaderboard_table(meta, trials))
    if trials and trials[0].metric_last is not None:
        best = trials[0]
        out.print(f"best trial: {best.name}: {meta['metric']} = {metric_text(best.metric_last)}", markup=False)
        out.print(f"best hyperparameters: {json.dumps(best.hyperparameters)}", markup=False)
        hint = f"  (raytrain eval {shlex.quote(str(best.checkpoint))})" if best.checkpoint else ""
        out.print(f"best checkpoint: {best.checkpoint}{hint}", markup=False)
        out.print(f"best config: {exp_dir / 'best.yaml'}  (raytrain train {exp_dir / 'best.yaml'})", markup=False)
    out.print(f"plots: {exp_dir / 'plots'}   tensorboard --logdir {exp_dir}", markup=False)
    out.print(str(exp_dir), markup=False)
    errored = [t for t in trials if t.status == "ERROR"]
    if errored:
        for t in errored:
            err.print(f"trial {t.name} failed: {_last_line(t.error)}", style="red", markup=False)
        from raytrain.errors import SweepError
        from raytrain.tune import state

        if state.cut_by_the_budget(exp_dir):  # a resume would stop them at once
            raise SweepError(f"{len(errored)} trial(s) failed, and the sweep's time budget (time_budget_s) ran out, "
                             "which Tune keeps spent in its state, so `raytrain tune resume` cannot retry them: run the "
                             "sweep again (a larger time_budget_s, a new --name)")
        raise SweepError(
            f"{len(errored)} trial(s) failed; retry them from their last checkpoint with `raytrain tune resume "
            f"{exp_dir}`, or from scratch with `--restart-errored`"
        )
    return trials

"""`raytrain slurm status|logs|cancel JOB`, and what `tune|train FILE --slurm SLURM.yaml` prints."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Annotated

import typer

from raytrain.cli.common import err, handle_errors, out, say

app = typer.Typer(help="Jobs submitted with `raytrain tune|train FILE --slurm SLURM.yaml`.", no_args_is_help=True,
                  rich_markup_mode=None)

JobArg = Annotated[str, typer.Argument(metavar="JOB", help="The Slurm job id `--slurm` printed.")]
SlurmOption = Annotated[
    Path | None,
    typer.Option("--slurm", help="Submit to Slurm as a batch job described by this Slurm YAML (see configs/slurm.yaml)."),
]


def submit(kind: str, file: Path | None, overrides: list[str], slurm_file: Path, dry_run: bool,
           resume: Path | None = None) -> None:
    """Check everything, then (unless --dry-run) write the script into the folder and sbatch it."""
    from raytrain.slurm import submit as slurm_submit

    if kind == "tune":
        assert file is not None  # tune's FILE argument is required
        sub = slurm_submit.prepare_sweep(file, overrides, slurm_file)
    else:
        sub = slurm_submit.prepare_train(file, overrides, slurm_file, resume)
    say(sub.notices)
    if dry_run:
        out.print(sub.script.rstrip(), markup=False)
        out.print(f"# would write {sub.script_path} and run: {shlex.join(sub.sbatch)}", markup=False)
        return
    job_id = slurm_submit.submit(sub)
    what = "sweep" if kind == "tune" else "training run"
    resumes = (" (it resumes the sweep)" if kind == "tune" else " (it continues the run)") if sub.resumes else ""
    err.print(f"submitted {what} {sub.job.name} as Slurm job {job_id}{resumes}", markup=False)
    err.print(f"  script:  {sub.script_path}", markup=False)
    err.print(f"  follow:  raytrain slurm logs {job_id}", markup=False)
    err.print(f"  status:  raytrain slurm status {job_id}", markup=False)
    err.print(f"  stop:    raytrain slurm cancel {job_id}   (the sweep saves its state; submit the same command again to resume)"
              if kind == "tune" else f"  stop:    raytrain slurm cancel {job_id}   (the run saves a checkpoint; continue it with "
              f"raytrain train --resume {shlex.quote(sub.job.folder)} --slurm {shlex.quote(str(slurm_file))})", markup=False)
    err.print(f"  results: {sub.job.folder}" if kind == "tune" else f"  run folder: {sub.job.folder}", markup=False)
    out.print(job_id, markup=False)


@app.command()
@handle_errors
def status(job_id: JobArg, json_: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """The job's state, nodes, elapsed time and log file (scontrol; sacct once Slurm has forgotten it)."""
    from raytrain.slurm import jobs

    info = jobs.status(job_id)
    if json_:
        typer.echo(json.dumps(info, indent=2))
        return
    out.print(f"job {job_id} ({info['name']}): {info['state']}"
              + (f" ({info['reason']})" if info.get("reason") not in (None, "None") else ""), markup=False)
    for key in ("nodes", "elapsed", "time_limit", "restarts", "exit_code", "output"):
        if info.get(key) not in (None, ""):
            out.print(f"  {key.replace('_', ' ')}: {info[key]}", markup=False)


@app.command()
@handle_errors
def logs(job_id: JobArg, follow: bool = typer.Option(True, "--follow/--no-follow", help="Keep printing until the job ends.")) -> None:
    """Print the job's output file (and follow it until the job ends)."""
    from raytrain.slurm import jobs

    for chunk in jobs.follow_log(job_id, follow):
        sys.stdout.write(chunk)
        sys.stdout.flush()
    if follow:
        err.print(f"job {job_id}: {jobs.status(job_id)['state']}", markup=False)


@app.command()
@handle_errors
def cancel(
    job_id: JobArg,
    now: Annotated[bool, typer.Option("--now", help="Plain scancel: Ray and the driver get SIGTERM together, so "
                                      "only what the driver manages to save before Ray is gone is kept.")] = False,
) -> None:
    """Cancel the job. The driver saves first (Tune's state, or a training run's checkpoint) while Ray still runs,
    then the job stops Ray and ends CANCELLED; the same `tune --slurm` command resumes it."""
    from raytrain.slurm import jobs

    jobs.check_job_id(job_id)
    if jobs.cancel(job_id, now=now):
        err.print(f"job {job_id}: the driver is saving and stopping; the job then ends CANCELLED "
                  f"(`raytrain slurm logs {job_id}` follows it)", markup=False)
    else:
        err.print(f"job {job_id}: cancelled (scancel)", markup=False)

"""`raytrain tune|train FILE --slurm SLURM.yaml`: every check first, then the script in the experiment folder,
then sbatch. Nothing is written or submitted when a check fails."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from raytrain.config.slurm import SlurmConfig, load_slurm
from raytrain.config.source import override_text
from raytrain.errors import UsageError
from raytrain.slurm import jobs
from raytrain.slurm.script import OUTPUT_PATTERN, SCRIPT_NAME, Job, batch_script, sbatch_argv

if TYPE_CHECKING:
    from raytrain.config.schema import RaytrainConfig
    from raytrain.training import RayCpus

JOBS_FILE = "slurm_jobs.txt"
"""One line per job submitted for a folder: `JOB_ID TIME`."""


@dataclass
class Submission:
    """A job ready to submit: its config, script, where the script goes, and the sbatch command line."""

    slurm: SlurmConfig
    job: Job
    script: str
    script_path: Path
    sbatch: list[str]
    notices: list[str]
    resumes: bool = False
    """The folder already holds this sweep or run: the job resumes it."""
    new_folder: bool = False
    """The folder is a new run folder named for this job: `submit` makes it, and refuses one that exists."""


def _header() -> str:
    import raytrain

    return f"raytrain {raytrain.__version__}, {time.strftime('%Y-%m-%d %H:%M:%S')}"


def _check_folder(folder: Path, where: str | None = None, key: str = "") -> None:
    """Refuse a job folder with `%`: the job's log goes there, and sbatch reads `%` in it as a pattern. `where`
    and `key` name the storage path that put it there (names cannot hold `%`); without them, a `--resume`d run."""
    if "%" not in str(folder):
        return
    message = (f"Slurm reads `%` in the job's log path {folder}/{OUTPUT_PATTERN} as a pattern (%j is the job id): "
               "choose a path without `%`")
    if where is None:
        raise UsageError(f"{folder}: {message}")
    from raytrain.errors import ConfigError, ConfigIssue

    raise ConfigError([ConfigIssue(where, key, message)])


def _running_jobs(folder: Path) -> list[str]:
    """Jobs recorded for `folder` that Slurm still has queued or running."""
    ids = []
    path = folder / JOBS_FILE
    if path.is_file():
        ids = [line.split()[0] for line in path.read_text().splitlines() if line.strip()]
    active = []
    for job_id in ids:
        try:
            if jobs.is_active(jobs.status(job_id)["state"]):
                active.append(job_id)
        except UsageError:
            continue
    return active


def _job_ray(cfg: SlurmConfig, slurm_file: Path) -> RayCpus:
    """The job's Ray as the CPU checks describe it (`cpus_per_node` is each node's `ray start --num-cpus`)."""
    from raytrain.training import RayCpus

    gpus = f" and {cfg.gpus_per_node} GPU{'s' if cfg.gpus_per_node != 1 else ''}" if cfg.gpus_per_node else ""
    return RayCpus(f"the job's Ray ({cfg.nodes} node{'s' if cfg.nodes > 1 else ''} of {cfg.cpus_per_node} CPUs{gpus})",
                   float(cfg.nodes * cfg.cpus_per_node), float(cfg.cpus_per_node),
                   f"raise nodes or cpus_per_node in {slurm_file}", gpus=float(cfg.nodes * cfg.gpus_per_node),
                   gpus_per_node=float(cfg.gpus_per_node), driver_gpus=float(cfg.gpus_per_node),
                   more_gpus=f"raise gpus_per_node in {slurm_file}",
                   more_custom="run it on a cluster whose nodes have it (a Slurm job's Ray has no custom resources)",
                   nodes=cfg.nodes)


def _idle_gpus(cfg: SlurmConfig, train: RaytrainConfig, slurm_file: Path) -> list[str]:
    """A warning when the job asks Slurm for GPUs that no actor of the config would use (GPUs are the
    allocation's scarcest part, and often what a partition charges for)."""
    from raytrain.training import trial_bundles

    if not cfg.gpus_per_node or any(bundle.get("GPU", 0.0) for bundle in trial_bundles(train)):
        return []
    return [f"warning: {slurm_file} asks for {cfg.gpus_per_node} GPU{'s' if cfg.gpus_per_node > 1 else ''} per node "
            "(gpus_per_node), but no actor of the config uses one: set learners.num_gpus_per_learner (or "
            "env_runners.num_gpus_per_env_runner), or gpus_per_node: 0"]


def _missing_python(cfg: SlurmConfig, slurm_file: Path) -> list[str]:
    """A warning when the Python the job runs on every node (`venv`'s, or `python`) is not at its path here: the
    job would fail there after its wait in the queue. Only a warning: a submit host may see other file systems."""
    if not (cfg.venv or cfg.python) or os.path.exists(cfg.python_path):
        return []
    key = "venv" if cfg.venv else "python"
    return [f"warning: {slurm_file}: {key}: {cfg.python_path} is not on this machine: every node of the job runs it, "
            "so it must be there at this path (a venv on the shared file system, or one made at this path on each "
            "node)"]


def _check_workdir(cfg: SlurmConfig, slurm_file: Path, folder: Path, import_paths: list[str]) -> None:
    """The user's modules that only the current directory holds must be where the job's driver runs.

    The driver runs in `workdir` (default: the job's folder), and Ray puts that first on every worker's path,
    as the current directory is here. A module found here (raytrain puts the current directory first) and
    neither in that folder nor installed would fail the job when it starts, after its wait in the queue.
    """
    import importlib.machinery

    from raytrain.imports import module_in, top_module

    here = Path.cwd()
    workdir = Path(cfg.workdir) if cfg.workdir else folder
    elsewhere = [p for p in sys.path if p not in ("", str(here))]
    for path in import_paths:
        name = top_module(path)
        if module_in(here, name) is None or module_in(workdir, name) is not None:
            continue  # installed (the job's Python has it, as every node has raytrain), or where the job runs
        if importlib.machinery.PathFinder.find_spec(name, elsewhere) is not None:
            continue
        where = f"in {cfg.workdir} (workdir)" if cfg.workdir else f"in the job's folder {folder} (workdir is not set)"
        raise UsageError(
            f"{slurm_file}: workdir: {path} is imported from the current directory {here}, but the job's driver runs "
            f"{where}, where there is no {name}: set `workdir: {here}` in {slurm_file} (every node must see that "
            f"folder at that path), or install {name} into the job's Python"
        )


@contextmanager
def _said_at_storage_path(slurm_file: Path, override: str | None) -> Iterator[None]:
    """An error about the Slurm file's storage_path, which joins the overrides as `override`, is said at that file's
    line: it was said of `--set checkpoint.storage_path=...`, which the user never typed."""
    from raytrain.config.source import read_yaml
    from raytrain.errors import ConfigError

    try:
        yield
    except ConfigError as exc:
        if override is None or not any(issue.where == f"--set {override}" for issue in exc.issues):
            raise
        where = read_yaml(slurm_file).where(("storage_path",))
        for issue in exc.issues:
            if issue.where == f"--set {override}":
                issue.where, issue.path = where, "storage_path"
        raise ConfigError(exc.issues) from None


def prepare_sweep(file: Path, overrides: list[str], slurm_file: Path) -> Submission:
    """Load and check the Slurm file and the sweep (as `raytrain tune` checks it); build the job's script."""
    from raytrain.config.sweep_load import load_sweep
    from raytrain.tune.build import check, check_cpus, plan

    cfg = load_slurm(slurm_file)
    overrides = list(overrides)
    if cfg.storage_path:
        overrides.insert(0, override_text("checkpoint.storage_path", cfg.storage_path))
    with _said_at_storage_path(slurm_file, overrides[0] if cfg.storage_path else None):
        loaded = load_sweep(file, overrides, storage="probe")
    notices = loaded.notices + loaded.warnings
    exp = loaded.experiment_dir
    resumes = (exp / "tuner.pkl").is_file()
    active = _running_jobs(exp)  # jobs recorded for this folder that Slurm still has queued or running
    if resumes:
        # The same sweep submitted again (after scancel, a time limit, a failure): the job continues it.
        from raytrain.tune.jobs import job_sweep

        stored = exp / "sweep.yaml"
        # As the job's driver records it (base config embedded), or as earlier versions did (the file as written).
        now = (job_sweep(loaded), loaded.sweep.model_dump(mode="json", exclude_none=True))
        if stored.is_file() and yaml.safe_load(stored.read_text()) not in now:
            raise UsageError(f"{exp} holds a different sweep of the same name; continue that one with the file it was "
                             "started from, or give this one another name (--name NEW_NAME)")
        if active:
            raise UsageError(f"job {', '.join(active)} still runs the sweep in {exp}: wait for it, or "
                             f"`raytrain slurm cancel {active[0]}` first")
        notices.append(f"notice: {exp} holds this sweep already: the job resumes it (finished trials stay done)")
    else:
        if active:
            # Submitted before and still queued (or just starting): its driver has not written Tune's state yet
            raise UsageError(f"job {', '.join(active)} is queued or running for the sweep in {exp}, and has not "
                             f"started its trials yet: wait for it, or `raytrain slurm cancel {active[0]}` first; to run "
                             "a second sweep beside it, give this one another name (--name NEW_NAME)")
        moved = loaded.take_free_name()
        if moved:
            notices.append(moved)
        exp = loaded.experiment_dir
    if cfg.nodes > 1 and loaded.sweep.failure.max_failures == 0:
        notices.append("notice: failure.max_failures is 0: a trial on a worker node that fails ends in error instead "
                       "of continuing from its checkpoint on the other nodes (set it to 2, say)")
    notices += check(loaded, plan(loaded))
    check_cpus(loaded, _job_ray(cfg, slurm_file))
    notices += _idle_gpus(cfg, loaded.base.config, slurm_file) + _missing_python(cfg, slurm_file)
    _check_workdir(cfg, slurm_file, exp, loaded.import_paths())
    _check_folder(exp, loaded.source.where(("checkpoint", "storage_path")), "checkpoint.storage_path")
    name_override = [override_text("name", loaded.name)]
    sets = [w for kv in [*overrides, *name_override] for w in ("--set", kv)]
    job = Job(
        kind="tune", name=loaded.name, folder=str(exp),
        start=["sweep", str(Path(file).resolve()), "--experiment-dir", str(exp), *sets],
        resume=["resume", str(exp)], state_file=str(exp / "tuner.pkl"),
        command=_command(), header=_header(),
    )
    script_path = exp / SCRIPT_NAME
    return Submission(cfg, job, batch_script(cfg, job), script_path, sbatch_argv(job, str(script_path)), notices, resumes)


def prepare_train(file: Path | None, overrides: list[str], slurm_file: Path, resume: Path | None = None) -> Submission:
    """Load and check the Slurm file and the train config (schema and RLlib's checks); build the job's script.

    A new run's folder (storage_path/name/<submit time>) is named here and made by `submit`; the script, the
    job's log and its token go into it. The job trains into exactly that folder, so a requeued job finds the
    run again and continues it from its latest complete checkpoint (the driver decides, when it starts).
    With `resume` (`train --resume RUN_DIR --slurm`), the job continues that run, as `train --resume` does.
    """
    from raytrain.config.load import load_config, load_source
    from raytrain.config.source import parse_yaml
    from raytrain.imports import user_paths
    from raytrain.paths import probe_writable
    from raytrain.rllib.translate import check_with_rllib
    from raytrain.runs import RunFolder, free_run_path
    from raytrain.train_run import storage_checked
    from raytrain.training import check_train_cpus

    cfg = load_slurm(slurm_file)
    overrides = list(overrides)
    notices: list[str] = []
    if resume is not None:
        # The run stays where it is: Slurm's storage_path names where new runs go, not this one.
        from raytrain.train_run import refuse_moving

        folder = RunFolder.open(resume)
        refuse_moving(folder.path, overrides)
        checkpoint = folder.latest_checkpoint(on_skip=notices.append)
        if checkpoint is None:
            raise UsageError(f"{folder.path} has no complete checkpoint to resume from (checkpoints/checkpoint_<n>/ "
                             "with a readable raytrain_state.json); submit a new run with `raytrain train CONFIG.yaml "
                             "--slurm ...`")
        problem = probe_writable(folder.path)
        if problem:
            raise UsageError(f"cannot resume in {folder.path}: {problem}")
        source_name = str(file) if file is not None else str(folder.path / "config.yaml")
        if file is None:
            loaded = load_source(parse_yaml(folder.read_config_yaml(), source_name), overrides)
        else:
            from raytrain.train_run import resumed_with_file

            loaded = load_config(file, overrides)
            notices += resumed_with_file(folder, loaded)
        active = _running_jobs(folder.path)
        if active:
            raise UsageError(f"job {', '.join(active)} still runs {folder.path}: wait for it, or "
                             f"`raytrain slurm cancel {active[0]}` first")
        run_dir = folder.path
        notices.append(f"notice: the job continues the run in {run_dir} from {checkpoint.name}")
    else:
        if cfg.storage_path:
            overrides.insert(0, override_text("experiment.storage_path", cfg.storage_path))
        assert file is not None  # `train --slurm` without FILE or --resume is refused before this
        with _said_at_storage_path(slurm_file, overrides[0] if cfg.storage_path else None):
            loaded = load_config(file, overrides)
            run_dir = free_run_path(storage_checked(loaded))
        source_name = str(file)
    notices += check_with_rllib(loaded.config, loaded.source, source_name,
                                then=lambda: check_train_cpus(loaded.config, loaded.source, _job_ray(cfg, slurm_file)))
    notices += _idle_gpus(cfg, loaded.config, slurm_file) + _missing_python(cfg, slurm_file)
    _check_workdir(cfg, slurm_file, run_dir, user_paths(loaded.config.environment.env))
    if resume is None:
        _check_folder(run_dir, loaded.source.where(("experiment", "storage_path")), "experiment.storage_path")
    else:
        _check_folder(run_dir)
    sets = [w for kv in overrides for w in ("--set", kv)]
    given = [str(Path(file).resolve())] if file is not None else []
    name = loaded.config.experiment.name
    assert name is not None  # validation always sets it (default: ppo_<env>)
    job = Job(kind="train", name=name, folder=str(run_dir),
              start=["train", *given, "--run-dir", str(run_dir), *sets], command=_command(), header=_header())
    script_path = run_dir / SCRIPT_NAME
    return Submission(cfg, job, batch_script(cfg, job), script_path, sbatch_argv(job, str(script_path)),
                      loaded.notices + loaded.warnings + notices, resumes=resume is not None,
                      new_folder=resume is None)


def _command() -> list[str]:
    from raytrain.cli.common import argv

    return argv()


def submit(sub: Submission) -> str:
    """Write the script (readable, 0644) into the folder, run sbatch, record the job id; returns it."""
    folder = Path(sub.job.folder)
    made = [p for p in (folder, *folder.parents) if not p.exists()]  # deepest first: what a failure takes back
    if sub.new_folder:
        folder.parent.mkdir(parents=True, exist_ok=True)
        try:
            folder.mkdir()
        except FileExistsError:
            raise UsageError(f"{folder} was made meanwhile by another run; submit again") from None
    else:
        folder.mkdir(parents=True, exist_ok=True)
    previous = sub.script_path.read_bytes() if sub.script_path.is_file() else None
    try:
        sub.script_path.write_text(sub.script)
        sub.script_path.chmod(0o644)
        job_id = jobs.sbatch(sub.sbatch)
    except BaseException:
        # Nothing was submitted: no folder that a later submission would take for an experiment, no script of a
        # job that never ran in place of the one that did.
        if previous is None:
            sub.script_path.unlink(missing_ok=True)
        else:
            sub.script_path.write_bytes(previous)
        for path in made:
            try:
                path.rmdir()
            except OSError:
                break  # something else is in it now: keep it, and what holds it
        raise
    with open(folder / JOBS_FILE, "a") as fh:
        fh.write(f"{job_id} {time.strftime('%Y-%m-%d %H:%M:%S')}\n")
    return job_id

"""Sweeps as Ray Jobs on a cluster's head (`raytrain tune ... --submit`): submit, follow, status, stop.

The driver of a submitted sweep runs on the head, so the machine that submitted it may disconnect. Jobs go
through the head's dashboard (Ray's job REST API, what `ray job submit` uses), with the cluster's token;
a dashboard that listens only on the head's loopback is reached through an SSH tunnel for each command.
"""

from __future__ import annotations

import contextlib
import shlex
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from raytrain.config.cluster import ClusterConfig
from raytrain.errors import ClusterError, SweepError

if TYPE_CHECKING:
    from ray.job_submission import JobDetails, JobSubmissionClient

    from raytrain.config.sweep_load import LoadedSweep
from raytrain.tune.results import SWEEP_FILE

JOB_PREFIX = "raytrain-tune-"


def submission_id(name: str) -> str:
    """Job ids name the sweep, so it is found on the dashboard's Jobs page."""
    return f"{JOB_PREFIX}{name}-{time.strftime('%Y%m%d-%H%M%S')}"


@contextlib.contextmanager
def dashboard_url(cfg: ClusterConfig) -> Iterator[str]:
    """The head's dashboard URL from this machine, through an SSH tunnel when it listens on the head's loopback."""
    from raytrain.cluster.lifecycle import is_local_address
    from raytrain.cluster.runner import SSHRunner

    d = cfg.head.dashboard
    if not d.enabled:
        raise ClusterError(f"cluster {cfg.name} runs without a dashboard (head.dashboard.enabled: false): jobs need it")
    # A head named by its address or alias may still be this machine: its loopback is reached directly.
    if not cfg.dashboard_tunneled or is_local_address(cfg.head.ip):
        yield cfg.dashboard_url
        return
    tunnel = SSHRunner(cfg.ssh).tunnel(cfg.head, d.tunnel_target, d.port, what="the dashboard",
                                       timeout_s=cfg.ssh.connect_timeout + 10)
    with tunnel as port:
        yield f"http://127.0.0.1:{port}"


@contextlib.contextmanager
def client(cfg: ClusterConfig) -> Iterator[JobSubmissionClient]:
    """A JobSubmissionClient for the cluster's head, authenticated with the cluster's token."""
    from raytrain.cluster.lifecycle import token_for_driver

    headers = {}
    if cfg.auth.mode == "token":
        headers["Authorization"] = f"Bearer {token_for_driver(cfg).read_text().strip()}"
    with dashboard_url(cfg) as url:
        from ray.job_submission import JobSubmissionClient

        try:
            yield JobSubmissionClient(url, headers=headers)
        except ConnectionError as e:
            raise ClusterError(f"cannot reach the dashboard of cluster {cfg.name} at {url}: {e}") from None


def job_sweep(loaded: LoadedSweep) -> dict[str, Any]:
    """The sweep as one self-contained YAML (base config embedded, overrides applied) for the job's folder."""
    data = loaded.sweep.model_dump(mode="json", exclude_none=True)
    data.pop("base", None)
    data.pop("set", None)  # already applied to the embedded config
    data["name"] = loaded.name
    data["train"] = loaded.base.config.to_yaml_dict()
    return data


def write_job_folder(folder: Path, loaded: LoadedSweep) -> list[str]:
    """The job's working directory: the sweep file, and the user's modules from the current directory.

    Ray unpacks it on the head as the driver's current directory and puts it on every worker's path, as
    the current directory is for a sweep started here. Returns the names of the modules taken along.
    """
    from raytrain.imports import working_directory_modules

    (folder / SWEEP_FILE).write_text(
        f"# raytrain tune --submit: the sweep {loaded.name}, base config embedded\n"
        + yaml.safe_dump(job_sweep(loaded), sort_keys=False)
    )
    shipped = []
    for module in working_directory_modules(loaded.import_paths()):
        if module.is_dir():
            shutil.copytree(module, folder / module.name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(module, folder / module.name)
        shipped.append(module.name)
    return shipped


def submit(cfg: ClusterConfig, loaded: LoadedSweep) -> tuple[str, list[str]]:
    """Submit the sweep as a Ray Job whose driver runs `raytrain tune` on the head.

    Returns its id and the user's modules the job took along from the current directory.
    """
    job_id = submission_id(loaded.name)
    with tempfile.TemporaryDirectory(prefix="raytrain-job-") as folder:
        shipped = write_job_folder(Path(folder), loaded)
        entrypoint = f"{shlex.quote(cfg.python_path)} -m raytrain tune {SWEEP_FILE}"
        with client(cfg) as jobs:
            try:
                submitted = jobs.submit_job(
                    entrypoint=entrypoint,
                    submission_id=job_id,
                    runtime_env={"working_dir": folder},
                    metadata={"raytrain_sweep": loaded.name, "experiment_dir": str(loaded.experiment_dir)},
                )
                return submitted, shipped
            except RuntimeError as e:
                raise SweepError(f"the head refused the job: {e}") from None


def status(cfg: ClusterConfig, job_id: str) -> dict[str, Any]:
    with client(cfg) as jobs:
        return _summary(job_id, _info(jobs, job_id, cfg))


def _summary(job_id: str, info: JobDetails) -> dict[str, Any]:
    return {
        "job_id": job_id,
        "status": str(info.status.value if hasattr(info.status, "value") else info.status),
        "message": info.message,
        "entrypoint": info.entrypoint,
        "start_time": info.start_time,
        "end_time": info.end_time,
        "metadata": info.metadata or {},
    }


def _info(jobs: JobSubmissionClient, job_id: str, cfg: ClusterConfig) -> JobDetails:
    try:
        return jobs.get_job_info(job_id)
    except RuntimeError as e:
        if "404" in str(e) or "does not exist" in str(e):
            known = [sid for j in jobs.list_jobs() if (sid := j.submission_id or "").startswith(JOB_PREFIX)]
            raise SweepError(f"no job {job_id} on cluster {cfg.name}; sweep jobs there: {', '.join(known) or 'none'}") from None
        raise


def list_jobs(cfg: ClusterConfig) -> list[dict[str, Any]]:
    with client(cfg) as jobs:
        rows = [j for j in jobs.list_jobs() if (j.submission_id or "").startswith(JOB_PREFIX)]
    return [{"job_id": j.submission_id, "status": str(j.status.value), "start_time": j.start_time,
             "sweep": (j.metadata or {}).get("raytrain_sweep", "")} for j in sorted(rows, key=lambda j: j.start_time or 0)]


def follow_logs(cfg: ClusterConfig, job_id: str, follow: bool = True) -> Iterator[str]:
    """The job's output so far and, with `follow`, until it ends."""
    import asyncio

    with client(cfg) as jobs:
        _info(jobs, job_id, cfg)
        if not follow:
            yield jobs.get_job_logs(job_id)
            return

        loop = asyncio.new_event_loop()
        try:
            agen = jobs.tail_job_logs(job_id).__aiter__()
            while True:
                try:
                    chunk = loop.run_until_complete(agen.__anext__())
                except StopAsyncIteration:
                    return
                yield chunk
        finally:
            loop.close()


def stop(cfg: ClusterConfig, job_id: str, timeout_s: float = 120) -> dict[str, Any]:
    """Stop the job (its `raytrain tune` gets SIGTERM and saves the experiment state); return its final status
    (one connection: over a tunnel, each one costs an SSH login)."""
    with client(cfg) as jobs:
        _info(jobs, job_id, cfg)
        jobs.stop_job(job_id)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            info = _info(jobs, job_id, cfg)
            if str(info.status.value) in ("STOPPED", "SUCCEEDED", "FAILED"):
                return _summary(job_id, info)
            time.sleep(0.5)
    raise SweepError(f"job {job_id} did not stop within {timeout_s:.0f} s")

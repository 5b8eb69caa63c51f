"""Slurm's commands, always as argv lists (no shell): sbatch, scontrol, sacct, scancel."""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

from raytrain.errors import ClusterError, UsageError

_JOB_ID = re.compile(r"^\d+(_\d+)?$")
ACTIVE_STATES = {"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED",
                 "RESIZING", "SUSPENDED", "STOPPED", "SIGNALING", "STAGE_OUT", "RESV_DEL_HOLD"}


def check_job_id(job_id: str) -> str:
    """A Slurm job id (`123`, or `123_4` for an array task); UsageError (exit 2) for anything else."""
    if not _JOB_ID.fullmatch(job_id):
        raise UsageError(f"{job_id!r} is not a Slurm job id (digits, e.g. 4242, as `raytrain tune --slurm` printed it)")
    return job_id


def run(argv: list[str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run one Slurm command; ClusterError when it is not installed here."""
    if shutil.which(argv[0]) is None:
        raise ClusterError(f"`{argv[0]}` is not on PATH: run raytrain on a machine of the Slurm cluster (a login node)")
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout)


def _failed(argv: list[str], res: subprocess.CompletedProcess[str]) -> ClusterError:
    tail = "\n  ".join((res.stderr or res.stdout).strip().splitlines()[-5:])
    return ClusterError(f"`{' '.join(argv)}` exited {res.returncode}:\n  {tail}")


def sbatch(argv: list[str]) -> str:
    """Submit; returns the job id (`sbatch --parsable` prints `ID` or `ID;CLUSTER`)."""
    res = run(argv)
    if res.returncode != 0:
        raise _failed(argv, res)
    job_id = res.stdout.strip().split(";", 1)[0]
    if not _JOB_ID.fullmatch(job_id):
        raise ClusterError(f"`{' '.join(argv)}` printed no job id: {res.stdout.strip()!r}")
    return job_id


def parse_scontrol(text: str) -> dict[str, str]:
    """`scontrol show job -o` (one line of KEY=VALUE words) as a dict. Values never hold spaces except the
    last keys' (Command, WorkDir, StdOut...), which run to the next KEY=."""
    out: dict[str, str] = {}
    for m in re.finditer(r"(?:^|\s)([A-Za-z][A-Za-z0-9_:/]*)=(.*?)(?=\s[A-Za-z][A-Za-z0-9_:/]*=|$)", text.strip()):
        out[m.group(1)] = m.group(2)
    return out


def status(job_id: str) -> dict[str, str | None]:
    """The job's state: from scontrol while Slurm remembers it, else from sacct (accounting)."""
    check_job_id(job_id)
    argv = ["scontrol", "show", "job", "-o", job_id]
    res = run(argv)
    if res.returncode == 0 and res.stdout.strip():
        info = parse_scontrol(res.stdout.splitlines()[0])
        return {
            "job_id": job_id, "name": info.get("JobName"), "state": info.get("JobState"),
            "reason": info.get("Reason"), "nodes": info.get("NodeList"), "num_nodes": info.get("NumNodes"),
            "elapsed": info.get("RunTime"), "time_limit": info.get("TimeLimit"), "restarts": info.get("Restarts"),
            "exit_code": info.get("ExitCode"), "output": info.get("StdOut"), "workdir": info.get("WorkDir"),
            "source": "scontrol",
        }
    argv2 = ["sacct", "-n", "-P", "-X", "-j", job_id, "--format=JobID,JobName,State,NodeList,NNodes,Elapsed,Timelimit,ExitCode,WorkDir"]
    if shutil.which("sacct"):
        res2 = run(argv2)
        rows = [r.split("|") for r in res2.stdout.splitlines() if r.strip()] if res2.returncode == 0 else []
        if rows and len(rows[0]) >= 9:
            r = rows[0]
            return {"job_id": job_id, "name": r[1], "state": r[2].split()[0], "reason": None, "nodes": r[3],
                    "num_nodes": r[4], "elapsed": r[5], "time_limit": r[6], "restarts": None, "exit_code": r[7],
                    "output": None, "workdir": r[8], "source": "sacct"}
    raise UsageError(f"Slurm knows no job {job_id} (scontrol forgets finished jobs after MinJobAge; sacct: "
                     f"{'no record' if shutil.which('sacct') else 'not installed'}). Its log is slurm-{job_id}.out in "
                     "the experiment folder")


def base_state(state: str | None) -> str:
    """`RUNNING` of `RUNNING`, `CANCELLED+` or `CANCELLED by 0`; "" for no state."""
    words = (state or "").split()
    return words[0].rstrip("+") if words else ""


def is_active(state: str | None) -> bool:
    return base_state(state) in ACTIVE_STATES


def cancel(job_id: str, now: bool = False) -> bool:
    """Cancel the job; True when its driver was asked to save first.

    A running job's batch shell alone gets the script's cancel signal (`scancel --batch`): the driver saves
    while Ray still runs on every node, then the script stops Ray and cancels the job. With `now`, or a job
    whose script is not running (pending, requeued), a plain scancel: every step gets SIGTERM at once.

    Raises:
        UsageError: the job is no longer queued or running (before the call, or by the time Slurm answers).
        ClusterError: scancel failed for another reason.
    """
    from raytrain.slurm.script import CANCEL_SIGNAL

    def ended(state: str | None) -> UsageError:
        return UsageError(f"job {job_id} is {state or 'gone'}: not queued or running, nothing to cancel")

    check_job_id(job_id)
    state = status(job_id)["state"]
    if not is_active(state):
        raise ended(state)
    if not now and base_state(state) == "RUNNING":
        if run(["scancel", "--batch", f"--signal={CANCEL_SIGNAL}", job_id]).returncode == 0:
            return True
        state = status(job_id)["state"]
        if not is_active(state):  # it ended meanwhile
            raise ended(state)
        # Slurm refused the signal (the job left RUNNING meanwhile): cancel it plainly, as asked.
    argv = ["scancel", job_id]
    res = run(argv)
    if res.returncode != 0:
        state = status(job_id)["state"]
        raise ended(state) if not is_active(state) else _failed(argv, res)
    return False


def follow_log(job_id: str, follow: bool, poll_s: float = 1.0) -> Iterator[str]:
    """The job's output file, then (with `follow`) what is appended until the job leaves the queue."""
    info = status(job_id)
    path = info.get("output")
    if not path:
        raise UsageError(f"Slurm does not say where job {job_id} writes its output; look for slurm-{job_id}.out "
                         "in the experiment folder")
    log = Path(path)
    waited = 0.0
    while not log.exists():
        if not follow or not is_active(status(job_id)["state"]):
            raise UsageError(f"job {job_id} has no output file yet ({log}); state {info['state']}")
        time.sleep(poll_s)
        waited += poll_s
    with open(log, errors="replace") as fh:
        while True:
            chunk = fh.read()
            if chunk:
                yield chunk
            if not follow:
                return
            if not is_active(status(job_id)["state"]):
                rest = fh.read()
                if rest:
                    yield rest
                return
            time.sleep(poll_s)

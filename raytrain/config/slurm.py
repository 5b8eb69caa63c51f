"""The Slurm file of `raytrain tune|train ... --slurm FILE`: the allocation, the nodes' Python, storage, auth."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import ConfigDict, Field, ValidationInfo, field_validator, model_validator

from raytrain.config.cluster import AbsolutePath, _has_control, check_env
from raytrain.config.yaml_bools import RefuseBoolsForNumbers

# Values below end up in `#SBATCH` lines (which sbatch parses itself) or in the batch script; each is
# checked here for what it can mean, and quoted again where the script is assembled (raytrain.slurm.script).
_SLURM_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$")
_JOB_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.+-]{0,127}$")
_SBATCH_OPTION = re.compile(r"^--[a-z][a-z0-9-]*(=[A-Za-z0-9_.,:/@%+=-]+)?$")
_GPU_TYPE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$")
# Slurm's --time formats: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S (and UNLIMITED).
_TIME = re.compile(r"^(?:(?P<d>\d+)-(?P<dh>\d+)(?::(?P<dm>\d+)(?::(?P<ds>\d+))?)?|(?P<a>\d+)(?::(?P<b>\d+)(?::(?P<c>\d+))?)?)$")

# Options raytrain writes itself: an extra line repeating one would silently win or conflict.
OWNED_OPTIONS = {
    "job-name": "job_name", "nodes": "nodes", "ntasks-per-node": "(one task per node, always)",
    "ntasks": "(one task per node, always)", "cpus-per-task": "cpus_per_node", "gres": "gpus_per_node",
    "gpus": "gpus_per_node", "gpus-per-node": "gpus_per_node", "time": "time_limit", "partition": "partition",
    "account": "account", "qos": "qos", "output": "(the job's log goes to the experiment folder)",
    "error": "(the job's log goes to the experiment folder)", "requeue": "requeue", "no-requeue": "requeue",
    "signal": "signal_grace_s", "chdir": "(the job runs in the experiment folder)",
    "no-kill": "(always set: a failed worker node leaves the job running on the others)",
    "open-mode": "(append: a requeued job adds to the same log)", "parsable": "(when it submits)",
}

BREAKING_OPTIONS = {
    "export": "the job's steps need the environment raytrain gives them (RAY_AUTH_*, PATH): set variables with `env:`",
    "array": "one job drives one experiment: an array would start as many drivers on the same folder; submit each sweep "
             "on its own",
    "test-only": "nothing would be queued, and raytrain would record a job that never runs: `--dry-run` shows the job",
    "wrap": "raytrain submits its own batch script",
    "wait": "sbatch would not return until the job ends",
    "cpus-per-gpu": "it conflicts with --cpus-per-task, which raytrain writes (set cpus_per_node)",
    "uid": "the job would run as another user, who cannot read the cluster's token",
    "gid": "the job would run with another group, which cannot read the cluster's token",
}
"""Options whose job raytrain's script cannot run, and why."""

SBATCH_OPTIONS = frozenset("""
account acctg-freq array batch bb bbf begin chdir cluster-constraint clusters comment constraint container
container-id contiguous core-spec cores-per-socket cpu-freq cpus-per-gpu cpus-per-task deadline delay-boot dependency
distribution error exclude exclusive export export-file extra extra-node-info get-user-env gid gpu-bind gpu-freq gpus
gpus-per-node gpus-per-socket gpus-per-task gres gres-flags help hint hold ignore-pbs input job-name kill-on-invalid-dep
licenses mail-type mail-user mcs-label mem mem-bind mem-per-cpu mem-per-gpu mincpus network nice no-kill no-requeue
nodefile nodelist nodes ntasks ntasks-per-core ntasks-per-gpu ntasks-per-node ntasks-per-socket open-mode output
overcommit oversubscribe parsable partition power prefer priority profile propagate qos quiet reboot requeue
reservation segment signal sockets-per-node spread-job switches test-only thread-spec threads-per-core time time-min
tmp tres-bind tres-per-task uid usage use-min-nodes verbose version wait wait-all-nodes wckey wrap
""".split())
"""sbatch's long options (Slurm 23-24). sbatch also takes a prefix of one (getopt_long), and a few other names."""

SBATCH_ALIASES = {"tasks-per-node": "ntasks-per-node", "workdir": "chdir"}
"""Other names sbatch takes for an option (--workdir: Slurm before 17.11)."""


def sbatch_option(name: str) -> str:
    """The sbatch option `--name` is, as sbatch reads it: itself, or the option an alias stands for.

    Raises:
        ValueError: `name` is an abbreviation sbatch would take for an option (`--outp` is --output): every
            check of the options raytrain writes itself was passed by one.
    """
    if name in SBATCH_OPTIONS:
        return name
    if name in SBATCH_ALIASES:
        return SBATCH_ALIASES[name]
    begun = sorted(option for option in SBATCH_OPTIONS | set(SBATCH_ALIASES) if option.startswith(name))
    if begun:
        what = f"--{begun[0]}" if len(begun) == 1 else "one of " + ", ".join(f"--{o}" for o in begun)
        raise ValueError(f"--{name} is an abbreviation, which sbatch takes for {what}: write the whole option name")
    return name  # an option of a newer Slurm: sbatch itself refuses a name it does not know


def time_limit_seconds(value: str) -> int | None:
    """Seconds of a Slurm time limit (None for UNLIMITED). Raises ValueError for another format."""
    if value.upper() in ("UNLIMITED", "INFINITE"):
        return None
    m = _TIME.fullmatch(value)
    if not m:
        raise ValueError(f"{value!r} is not a Slurm time limit: write MINUTES, MM:SS, HH:MM:SS, D-HH, D-HH:MM or "
                         "D-HH:MM:SS (e.g. 2:00:00 for two hours), or UNLIMITED")
    g = {k: int(v) for k, v in m.groupdict().items() if v is not None}
    if "d" in g:
        return g["d"] * 86400 + g["dh"] * 3600 + g.get("dm", 0) * 60 + g.get("ds", 0)
    if "c" in g:
        return g["a"] * 3600 + g["b"] * 60 + g["c"]
    return g["a"] * 60 + g.get("b", 0)


class _Section(RefuseBoolsForNumbers):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, allow_inf_nan=False)


class SlurmAuthConfig(_Section):
    """Ray token authentication inside the job."""

    mode: Literal["token", "disabled"] = "token"
    """`token` (default): the job makes its own token (0600, in the experiment folder) and every Ray process and the driver need it. `disabled`: anyone who reaches the nodes' ports controls the job's Ray."""


class SlurmConfig(_Section):
    """A Slurm allocation for one raytrain sweep or training run: `raytrain tune|train FILE --slurm SLURM.yaml`."""

    job_name: str | None = None
    """Slurm job name (`#SBATCH --job-name`); default: `raytrain-<experiment name>`."""
    partition: str | None = None
    """Partition(s) (`--partition`), comma-separated; default: the cluster's default partition."""
    account: str | None = None
    """Account to charge (`--account`)."""
    qos: str | None = None
    """Quality of service (`--qos`)."""
    nodes: int = Field(1, ge=1, le=10000)
    """Nodes of the allocation: Ray's head on the first, a worker on each of the others."""
    cpus_per_node: int = Field(1, ge=1)
    """CPUs per node (`--cpus-per-task`, one task per node); Ray's `--num-cpus` on every node."""
    gpus_per_node: int = Field(0, ge=0)
    """GPUs per node (`--gres=gpu:N`); Ray's `--num-gpus` on every node."""
    gpu_type: str | None = None
    """GPU type in the gres (`--gres=gpu:TYPE:N`), e.g. `a100`."""
    time_limit: str | None = None
    """Wall time (`--time`): MINUTES, HH:MM:SS, D-HH:MM:SS, ...; default: the partition's."""
    signal_grace_s: int = Field(120, ge=10, le=65535)
    """Seconds before the time limit at which the job is told to stop (`--signal=B:TERM@N`): the driver saves Tune's state in that time."""
    requeue: bool = True
    """Submit requeueable (`--requeue`): after a preemption or node failure Slurm runs the job again and the sweep resumes."""
    extra_sbatch: list[str] = Field(default_factory=list)
    """More `#SBATCH` options, each one `--option` or `--option=value` (letters, digits and `_.,:/@%+=-`), e.g. `--mem=16G`."""
    python: AbsolutePath | None = None
    """Absolute path of the Python with raytrain and Ray on every node (default: the `python` of `venv`, else `python3` on PATH)."""
    venv: AbsolutePath | None = None
    """Absolute path of a virtualenv with raytrain and Ray, the same on every node (a shared one, or the same path on each)."""
    storage_path: AbsolutePath | None = None
    """Absolute path on the shared file system for checkpoints and results (sets the sweep's `checkpoint.storage_path` or the train config's `experiment.storage_path`)."""
    workdir: AbsolutePath | None = None
    """Absolute path the driver runs in on the head node (default: the experiment folder); Ray puts it first on every worker's path, so the folder of your env's module (`env: my_envs:Walk`), on shared storage."""
    env: dict[str, str] = Field(default_factory=dict)
    """Extra environment variables for the driver and every Ray process (not RAY_AUTH_*, RAY_ADDRESS, SLURM*, nor a name the job's script uses itself)."""
    head_port: int = Field(6379, gt=0, lt=65536)
    """Ray's GCS port on the first node."""
    start_timeout_s: float = Field(180, gt=0, le=7 * 86400)
    """Seconds the job waits for every node's Ray to be alive before it gives up (naming the missing nodes)."""
    auth: SlurmAuthConfig = Field(default_factory=SlurmAuthConfig)
    """Authentication of the job's Ray."""

    @field_validator("partition")
    @classmethod
    def _partition(cls, value: str | None) -> str | None:
        if value is not None and not all(_SLURM_NAME.fullmatch(p) for p in value.split(",")):
            raise ValueError("must be partition names (letters, digits and `_.-`, at most 64), separated by commas")
        return value

    @field_validator("account", "qos")
    @classmethod
    def _name(cls, value: str | None) -> str | None:
        if value is not None and not _SLURM_NAME.fullmatch(value):
            raise ValueError("must be a name of letters, digits and `_.-` (at most 64), not starting with `.` or `-`")
        return value

    @field_validator("job_name")
    @classmethod
    def _job_name(cls, value: str | None) -> str | None:
        if value is not None and not _JOB_NAME.fullmatch(value):
            raise ValueError("must be letters, digits and `_.+-` (at most 128), not starting with `.`, `+` or `-`")
        return value

    @field_validator("gpu_type")
    @classmethod
    def _gpu_type(cls, value: str | None) -> str | None:
        if value is not None and not _GPU_TYPE.fullmatch(value):
            raise ValueError("must be a GPU type name: letters, digits and `_.-`")
        return value

    @field_validator("time_limit")
    @classmethod
    def _time(cls, value: str | None) -> str | None:
        if value is not None:
            time_limit_seconds(value)
        return value

    @field_validator("extra_sbatch")
    @classmethod
    def _extra(cls, value: list[str]) -> list[str]:
        for option in value:
            if _has_control(option):
                raise ValueError(f"{option!r}: an #SBATCH option must be one line (no newlines, tabs or control characters)")
            if option.startswith("#"):
                raise ValueError(f"{option!r}: give the option only (`--mem=16G`), raytrain writes `#SBATCH` itself")
            if not _SBATCH_OPTION.fullmatch(option):
                raise ValueError(f"{option!r}: must be `--option` or `--option=value` with a long option name and a value "
                                 "of letters, digits and `_.,:/@%+=-` (no spaces or quotes)")
            given = option[2:].split("=", 1)[0]
            try:
                key = sbatch_option(given)
            except ValueError as exc:
                raise ValueError(f"{option!r}: {exc}") from None
            named = f"--{key}" if key == given else f"--{key} (--{given} is sbatch's other name for it)"
            if key in OWNED_OPTIONS:
                field = OWNED_OPTIONS[key]
                hint = f"set `{field}` instead" if not field.startswith("(") else f"raytrain sets it {field}"
                raise ValueError(f"{option!r}: raytrain writes {named} itself; {hint}")
            if key in BREAKING_OPTIONS:
                raise ValueError(f"{option!r}: a job with {named} cannot run raytrain's batch script: "
                                 f"{BREAKING_OPTIONS[key]}")
        return value

    @field_validator("storage_path")
    @classmethod
    def _storage(cls, value: str | None) -> str | None:
        if value is not None and "%" in value:
            raise ValueError("holds `%`, which Slurm reads as a pattern in the job's log path below it (%j is the job "
                             "id): choose a path without `%`")
        return value

    @field_validator("env")
    @classmethod
    def _env(cls, value: dict[str, str]) -> dict[str, str]:
        check_env(value)
        from raytrain.slurm.script import script_names

        names = script_names()
        owned = [k for k in value if k in names or k.startswith(("SLURM", "BASH_"))]
        if owned:
            raise ValueError(f"{owned}: the job's script uses these names itself (an `export` of them replaced its own "
                             "values: AUTH_MODE turned token authentication off, JOB_DIR moved the token), or Slurm or "
                             "bash sets them: choose other names")
        return value

    @model_validator(mode="after")
    def _checks(self, info: ValidationInfo) -> SlurmConfig:
        if (info.context or {}).get("fields_only"):
            return self  # load_slurm reports these itself, each with its file:line
        problems = self.problems()
        if problems:
            raise ValueError("; ".join(f"{'.'.join(path)}: {message}" for path, message in problems))
        return self

    def problems(self) -> list[tuple[tuple[str, ...], str]]:
        """What no single field shows, as (key path, message): `load_slurm` reports them with file:line."""
        out: list[tuple[tuple[str, ...], str]] = []
        if self.python and self.venv:
            out.append((("venv",), "give `python` or `venv`, not both"))
        if self.time_limit is not None:
            limit = time_limit_seconds(self.time_limit)
            if limit is not None and limit <= self.signal_grace_s:
                out.append((("time_limit",), f"{self.time_limit} ({limit} s) must be longer than signal_grace_s "
                                             f"({self.signal_grace_s} s), the time the job keeps to save its state"))
        if self.gpu_type and not self.gpus_per_node:
            out.append((("gpu_type",), "needs gpus_per_node >= 1"))
        return out

    @property
    def python_path(self) -> str:
        if self.venv:
            return f"{self.venv.rstrip('/')}/bin/python"
        return self.python or "python3"

    @property
    def gres(self) -> str | None:
        """`gpu:N` or `gpu:TYPE:N`, None without GPUs."""
        if not self.gpus_per_node:
            return None
        return f"gpu:{self.gpu_type}:{self.gpus_per_node}" if self.gpu_type else f"gpu:{self.gpus_per_node}"


def load_slurm(path: str | Path, overrides: list[str] | None = None) -> SlurmConfig:
    """Read and check a Slurm file. Raises ConfigError with file:line for every problem."""
    from pydantic import ValidationError

    from raytrain.config.load import pydantic_issues
    from raytrain.config.source import apply_overrides, read_yaml
    from raytrain.errors import ConfigError, ConfigIssue

    source = read_yaml(path)
    apply_overrides(source, overrides or [])
    try:
        cfg = SlurmConfig.model_validate(source.data, context={"fields_only": True})
    except ValidationError as exc:
        from raytrain.config.kind import wrong_kind

        raise wrong_kind(source, "slurm") or ConfigError(pydantic_issues(exc, source, SlurmConfig)) from None
    issues = [ConfigIssue(source.where(path), ".".join(path), message) for path, message in cfg.problems()]
    if issues:
        raise ConfigError(issues)
    return cfg

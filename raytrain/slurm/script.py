"""The batch script of a Slurm job (pure: values in, text out; nothing is run or written here).

Every value from a config or the command line reaches the script through one seam, `_assign`/`_array`,
which quotes it with shlex.quote; the bash code around it only ever expands those variables in double
quotes. `#SBATCH` lines hold only values the Slurm file's schema allowed (sbatch parses them itself).
"""

from __future__ import annotations

import functools
import inspect
import math
import re
import shlex
from dataclasses import dataclass, field

from raytrain.config.slurm import SlurmConfig

SCRIPT_NAME = "slurm_job.sh"
OUTPUT_PATTERN = "slurm-%j.out"
TOKEN_NAME = ".ray_auth_token"
CANCEL_SIGNAL = "USR2"
"""What `raytrain slurm cancel` sends to the batch shell alone (`scancel --batch`): the driver saves while Ray
still runs on every node, then Ray stops and the job cancels itself. A plain scancel signals every step at once."""

@dataclass
class Job:
    """What one batch job runs: the driver's arguments, where its files go, and when it resumes."""

    kind: str
    """`tune` or `train`."""
    name: str
    """The experiment name (the default job name is `raytrain-<name>`)."""
    folder: str
    """Absolute folder of the script, the job's log and its token (the experiment folder of a sweep)."""
    start: list[str]
    """Arguments of `python -m raytrain.slurm.driver` for a first run."""
    resume: list[str] | None = None
    """Its arguments when `state_file` exists (a requeued or resubmitted job)."""
    state_file: str | None = None
    """The file whose presence means the folder holds a run to continue (Tune's tuner.pkl)."""
    command: list[str] = field(default_factory=list)
    """The raytrain command line that made the script (a comment in it)."""
    header: str = ""
    """A first comment line (raytrain's version, the date)."""


def _assign(name: str, value: str | int | float) -> str:
    """The seam: `NAME=VALUE` with the value quoted for bash."""
    return f"{name}={shlex.quote(str(value))}"


def _array(name: str, words: list[str]) -> str:
    return f"{name}=(" + " ".join(shlex.quote(str(w)) for w in words) + ")"


def _comment(text: str) -> str:
    """One comment line: control characters (a newline would end the comment) shown escaped."""
    return "# " + "".join(c if 32 <= ord(c) != 127 else repr(c)[1:-1] for c in text)


def sbatch_options(cfg: SlurmConfig, job: Job) -> list[str]:
    """The `#SBATCH` options, in the order an admin expects them."""
    opts = [f"--job-name={cfg.job_name or 'raytrain-' + job.name}", f"--nodes={cfg.nodes}", "--ntasks-per-node=1",
            f"--cpus-per-task={cfg.cpus_per_node}"]
    if cfg.gres:
        opts.append(f"--gres={cfg.gres}")
    if cfg.time_limit:
        opts.append(f"--time={cfg.time_limit}")
    for key in ("partition", "account", "qos"):
        if getattr(cfg, key):
            opts.append(f"--{key}={getattr(cfg, key)}")
    opts.append("--requeue" if cfg.requeue else "--no-requeue")
    # A failed worker node leaves the job running on the others (Slurm would otherwise end it, and a requeued
    # job waits for as many nodes again); the first node's failure still ends it (and requeues it).
    opts.append("--no-kill")
    opts.append(f"--signal=B:TERM@{cfg.signal_grace_s}")
    opts.append("--open-mode=append")  # a requeued job adds to the same log
    return opts + list(cfg.extra_sbatch)


def sbatch_argv(job: Job, script_path: str) -> list[str]:
    """`sbatch` itself: the log and the working folder given as arguments (a path may hold spaces), no shell."""
    return ["sbatch", "--parsable", f"--output={job.folder}/{OUTPUT_PATTERN}", f"--chdir={job.folder}", script_path]


def ray_bin(cfg: SlurmConfig) -> str:
    py = cfg.python_path
    return py.rsplit("/", 1)[0] + "/ray" if py.startswith("/") else "ray"


_BASH_OWN = frozenset({"IFS", "ENV", "BASH_ENV", "SHELLOPTS", "BASHOPTS", "CDPATH", "GLOBIGNORE", "PS4", "SECONDS",
                       "RANDOM", "LINENO", "POSIXLY_CORRECT", "PROMPT_COMMAND", "TMOUT"})
"""What bash reads or sets itself and changes how the script runs (PATH and the like stay the user's to set)."""


@functools.cache
def script_names() -> frozenset[str]:
    """Every variable the batch script assigns or expands (its values, its body's own), and bash's own: a Slurm
    file's `env:` of one of them is exported after the values and replaced the script's."""
    source = inspect.getsource(batch_script) + BODY
    assigned = re.findall(r"(?:^|[\s;(])(?:local\s+|export\s+)?([A-Za-z_]\w*)(?:\[[^\]]*\])?\+?=", BODY, re.M)
    return frozenset({*re.findall(r"\$\{?[#!]?([A-Za-z_]\w*)", BODY), *assigned,
                      *re.findall(r"_(?:assign|array)\(\"([A-Za-z_]\w*)\"", source),
                      *re.findall(r"\bfor\s+([A-Za-z_]\w*)\s+in\b", BODY),
                      *re.findall(r"\b(?:read|mapfile)\s+(?:-\w+\s+)*([A-Za-z_]\w*)", BODY)}) | _BASH_OWN


def batch_script(cfg: SlurmConfig, job: Job) -> str:
    """The whole batch script for `job` under `cfg`'s allocation."""
    lines = ["#!/bin/bash"]
    if job.header:
        lines.append(_comment(job.header))
    if job.command:
        lines.append(_comment("made by: " + shlex.join(job.command)))
    lines.append(_comment(f"log: {job.folder}/{OUTPUT_PATTERN} (sbatch --output)"))
    lines += [f"#SBATCH {opt}" for opt in sbatch_options(cfg, job)]
    lines += [
        "",
        "# Ray inside the allocation: the head on the first node, a worker on each other node (one srun step",
        "# each, --block so that ending the step stops Ray), then the driver on the head node.",
        "set -uo pipefail",
        "",
        "# ---- values (each quoted once, here) ----",
        _assign("JOB_DIR", job.folder),
        _assign("WORKDIR", cfg.workdir or job.folder),
        _assign("PYTHON", cfg.python_path),
        _assign("RAY", ray_bin(cfg)),
        _assign("HEAD_PORT", cfg.head_port),
        _assign("NUM_GPUS", cfg.gpus_per_node),
        _assign("DEFAULT_CPUS", cfg.cpus_per_node),
        _assign("START_TIMEOUT_S", math.ceil(cfg.start_timeout_s)),  # whole seconds: bash's $(( )) takes integers
        _assign("AUTH_MODE", cfg.auth.mode),
        _assign("STATE_FILE", job.state_file or ""),
        _array("START", job.start),
        _array("RESUME", job.resume or []),
        "export RAY_USAGE_STATS_ENABLED=0",
    ]
    lines += [f"export {_assign(k, v)}" for k, v in cfg.env.items()]
    lines.append(BODY)
    return "\n".join(lines) + "\n"


BODY = r'''
say() { echo "raytrain[$(date +%H:%M:%S)]: $*" >&2; }
RAY_STEPS=()
DRIVER=""

stop_ray() {
    # Ending a `ray start --block` step stops that node's Ray (raylet, workers, and on the head the GCS).
    local pid i
    for pid in "${RAY_STEPS[@]}"; do kill -TERM "$pid" 2>/dev/null; done
    for i in $(seq 1 60); do
        local alive=0
        for pid in "${RAY_STEPS[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
        [ "$alive" = 0 ] && break
        sleep 0.5
    done
    for pid in "${RAY_STEPS[@]}"; do kill -KILL "$pid" 2>/dev/null; done
    RAY_STEPS=()
}

CANCELLING=0

stop_driver() {
    # SIGTERM: the driver saves Tune's state (or a training run's checkpoint) and stops its trials.
    if [ -n "$DRIVER" ]; then
        kill -TERM "$DRIVER" 2>/dev/null
        wait "$DRIVER" 2>/dev/null
        say "driver exited with $?"
        DRIVER=""
    fi
}

on_exit() {
    trap - EXIT TERM INT USR2
    stop_driver
    say "stopping Ray on every node"
    stop_ray
    if [ "$AUTH_MODE" = token ]; then rm -f "$RAY_AUTH_TOKEN_PATH"; fi
    if [ "$CANCELLING" = 1 ]; then
        # Everything is saved and stopped: the job ends CANCELLED, as a plain scancel would have left it.
        say "cancelling job $SLURM_JOB_ID"
        scancel "$SLURM_JOB_ID"
    fi
}

on_term() {
    # The time limit (--signal=B:TERM@grace, to this shell only), a preemption or a plain scancel (which
    # signals Ray on every node at the same time): the driver saves what it can and stops; a requeued or
    # resubmitted job then resumes from there.
    say "SIGTERM: asking the driver to save its state and stop"
    stop_driver
    exit 143
}

on_cancel() {
    # `raytrain slurm cancel` (scancel --batch --signal=USR2: this shell only): Ray keeps running on every
    # node while the driver saves; then on_exit stops Ray and cancels the job.
    trap '' USR2
    CANCELLING=1
    say "cancel requested: asking the driver to save its state and stop while Ray still runs"
    stop_driver
    exit 143
}
trap on_exit EXIT
trap on_term TERM INT
trap on_cancel USR2

if [ "$AUTH_MODE" = token ]; then
    # A token for this run of the job only, readable by its owner alone; never on a command line.
    export RAY_AUTH_MODE=token RAY_AUTH_TOKEN_PATH="$JOB_DIR/.ray_auth_token"
    if ! (umask 077 && "$PYTHON" -c 'import secrets; print(secrets.token_hex(32))' > "$RAY_AUTH_TOKEN_PATH.new" \
          && mv -f "$RAY_AUTH_TOKEN_PATH.new" "$RAY_AUTH_TOKEN_PATH"); then
        say "cannot write the job's token in $JOB_DIR"; exit 1
    fi
else
    export RAY_AUTH_MODE=disabled
fi

mapfile -t NODES < <(scontrol show hostnames "$SLURM_JOB_NODELIST")
HEAD="${NODES[0]}"
WORKERS=("${NODES[@]:1}")
CPUS="${SLURM_CPUS_PER_TASK:-$DEFAULT_CPUS}"
# The head's address, once Ray's temp folder there is found usable (a site's per-job TMPDIR can be too long for
# Ray's Unix sockets, which Ray finds only once its GCS is up).
if [ "${SLURMD_NODENAME:-}" = "$HEAD" ]; then
    HEAD_IP="$("$PYTHON" -m raytrain.slurm.wait --this-ip --ray-temp-dir)"
else
    HEAD_IP="$(srun --nodes=1 --ntasks=1 --nodelist="$HEAD" "$PYTHON" -m raytrain.slurm.wait --this-ip --ray-temp-dir)"
fi || { say "Ray cannot start on $HEAD (see the line above): nothing was started"; exit 1; }
ADDRESS="$HEAD_IP:$HEAD_PORT"
say "job $SLURM_JOB_ID (restart ${SLURM_RESTART_COUNT:-0}): nodes ${NODES[*]}, head $HEAD ($ADDRESS), $CPUS CPUs per node"

# Every node writes its trials' checkpoints into the job's folder, and the driver here reads them: it must be
# one folder on a file system all nodes share, not one per node. Checked before Ray starts.
OTHERS=()
for node in "${NODES[@]}"; do [ "$node" = "${SLURMD_NODENAME:-}" ] || OTHERS+=("$node"); done
if [ "${#OTHERS[@]}" -gt 0 ]; then
    MARKER="$JOB_DIR/.raytrain_shared_check"
    TOKEN="$SLURM_JOB_ID.${SLURM_RESTART_COUNT:-0}.$RANDOM$RANDOM"
    if ! printf %s "$TOKEN" > "$MARKER"; then
        say "cannot write in the job's folder $JOB_DIR"; exit 1
    fi
    srun --nodes="${#OTHERS[@]}" --ntasks="${#OTHERS[@]}" --ntasks-per-node=1 --kill-on-bad-exit=0 \
        --nodelist="$(IFS=,; echo "${OTHERS[*]}")" "$PYTHON" -m raytrain.slurm.wait --shared "$MARKER" "$TOKEN"
    SHARED=$?
    rm -f "$MARKER"
    if [ "$SHARED" != 0 ]; then
        say "the job's folder is not shared by every node (see the lines above): nothing was started"; exit 1
    fi
fi

srun --nodes=1 --ntasks=1 --nodelist="$HEAD" \
    "$RAY" start --head --block --node-ip-address="$HEAD_IP" --port="$HEAD_PORT" --num-cpus="$CPUS" \
    --num-gpus="$NUM_GPUS" --include-dashboard=false --disable-usage-stats &
RAY_STEPS+=($!)

# Workers join once the head's GCS accepts connections.
deadline=$((SECONDS + START_TIMEOUT_S))
until (exec 3<>"/dev/tcp/$HEAD_IP/$HEAD_PORT") 2>/dev/null; do
    if [ "$SECONDS" -ge "$deadline" ] || ! kill -0 "${RAY_STEPS[0]}" 2>/dev/null; then
        say "Ray's head on $HEAD did not come up at $ADDRESS (see the lines above)"; exit 1
    fi
    sleep 0.2
done
# One step per worker node: a node that fails ends its own step only (the job is --no-kill), and Tune
# retries the trials it ran on the other nodes from their checkpoints (failure.max_failures).
for node in "${WORKERS[@]}"; do
    srun --nodes=1 --ntasks=1 --nodelist="$node" \
        "$RAY" start --address="$ADDRESS" --block --num-cpus="$CPUS" --num-gpus="$NUM_GPUS" --disable-usage-stats &
    RAY_STEPS+=($!)
done

export RAY_ADDRESS="$ADDRESS"
if ! "$PYTHON" -m raytrain.slurm.wait --address "$ADDRESS" --timeout "$START_TIMEOUT_S" -- "${NODES[@]}"; then
    exit 1
fi

cd "$WORKDIR" || { say "cannot enter $WORKDIR"; exit 1; }
if [ -n "$STATE_FILE" ] && [ -e "$STATE_FILE" ] && [ "${#RESUME[@]}" -gt 0 ]; then
    say "$STATE_FILE exists: resuming (finished trials stay done, the others continue from their checkpoints)"
    "$PYTHON" -m raytrain.slurm.driver "${RESUME[@]}" &
else
    "$PYTHON" -m raytrain.slurm.driver "${START[@]}" &
fi
DRIVER=$!
wait "$DRIVER"
RC=$?
DRIVER=""
say "driver exited with $RC"
exit "$RC"
'''

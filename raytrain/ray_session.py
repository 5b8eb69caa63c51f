"""This process's Ray session: the driver's auth environment, then the one door to `ray.init`.

Ray reads RAY_AUTH_MODE and RAY_AUTH_TOKEN_PATH when it is imported, so `cluster_address` must run before
anything imports Ray. Every `ray.init` of raytrain goes through `init_ray` (`connect_ray` for a command's
driver), so that starting or joining Ray has one place to change and one place for a test to watch.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from raytrain.errors import RayAddressError, RayAuthError, RayTempDirError, RayUnreachableError, TrainError

_stopping = False
"""Set once this process begins stopping the local Ray it started (its exit): what ends then is not lost."""


def cluster_address(address: str | None, cluster: Path | None) -> str | None:
    """The address to connect to; with a cluster YAML also sets the auth environment of this driver.

    Call it before anything imports Ray: Ray reads RAY_AUTH_MODE and RAY_AUTH_TOKEN_PATH on import. An address as
    typed (`address`, else RAY_ADDRESS) is checked here too, so a malformed one is said before a command's other
    checks (RLlib's take seconds) and with --dry-run as in the real run.

    Raises:
        RayAddressError: the address (`address`, else RAY_ADDRESS) is not HOST:PORT of a host and a port.
        UsageError: both an address and a cluster YAML are given.
        ClusterError: this machine is not a node of the cluster, or its token is missing.
    """
    if cluster is None:
        check_address(address)
        return address
    from raytrain.cluster.lifecycle import driver_env
    from raytrain.config.cluster import load_cluster
    from raytrain.errors import UsageError

    if address:
        raise UsageError("give --address or --cluster, not both")
    env = driver_env(load_cluster(cluster))
    os.environ.update(env)
    return env["RAY_ADDRESS"]


def init_ray(address: str | None = None, **options: Any) -> bool:
    """Join the Ray cluster at `address`, or start a local Ray (None), unless this process has a session.

    `options` go to `ray.init` as they are (`include_dashboard`, `logging_level`, `log_to_driver`, ...).
    A process keeps the session it has: a test's, or the one a command started before calling in.

    Returns:
        True when this call initialized Ray, False when a session was there already.

    Raises:
        RayAddressError: the address to join is not one as typed (not HOST:PORT, a port out of range, a host
            that is neither an IP address nor a hostname).
        RayUnreachableError: nothing answers at the address to join (`address`, else RAY_ADDRESS, which
            `ray.init` reads too), found in seconds; Ray itself would retry it for minutes.
    """
    import atexit

    import ray

    if ray.is_initialized():
        return False
    joining = check_address(address)
    if joining:
        problem = gcs_unreachable(joining)
        if problem is not None:
            raise RayUnreachableError(joining, problem)
        refused = auth_refused(joining)
        if refused is not None:
            raise RayAuthError(joining, refused)
    # Not `address=None` for a local Ray: Ray then joins the cluster a `ray start` on this machine last recorded
    # (/tmp/ray/ray_current_cluster), even one long stopped; "local" starts a new one, as the README promises.
    if joining:
        ray.init(address=joining, **options)
        return True
    problem = ray_temp_dir_problem()
    if problem is not None:
        raise RayTempDirError(problem)
    with _in_a_process_group_of_their_own():
        ray.init(address="local", **options)
        _start_reaper()
    # Ray registers its shutdown when it is imported, so this runs just before it; once per process.
    atexit.unregister(_end_local_ray)
    atexit.register(_end_local_ray)
    return True


SOCKET_PATH_MAX = 107
"""The longest path of a Unix socket on Linux, in bytes (`sun_path` holds 108 with its NUL); Ray checks the same."""


def ray_temp_dir_problem(pid: int | None = None, *, set_where: str = "") -> str | None:
    """Why a Ray head started by this process (`pid`: by another, whose pid is not known yet) cannot work under
    its temp folder, or None when it can.

    Ray keeps a session folder under `$RAY_TMPDIR/ray`, else `$TMPDIR/ray` (Linux), else `/tmp/ray`, with its
    Unix sockets in it. Ray finds a folder it cannot write, or a socket path over Linux's 107 bytes, only after
    the GCS is up, and fails with an OSError (exit 1). A Slurm site's per-job TMPDIR is often that long. Checked
    here first, from the same variables, with the longest socket path this process's Ray would use
    (`<folder>/session_<date>_<time>_<microseconds>_<pid>/sockets/plasma_store`): nothing is started or written.
    For a `pid` not known yet, the longest this machine gives (`largest_pid`). `set_where`: where the user sets
    RAY_TMPDIR, said in the advice (" in the Slurm file's `env:`").
    """
    from ray._common.utils import get_default_ray_temp_dir

    set_in = [name for name in ("RAY_TMPDIR", "TMPDIR") if name in os.environ]  # Ray's order
    value = os.environ[set_in[0]] if set_in else "/tmp"
    said = f"{set_in[0]}={value!r}" if set_in else "/tmp, neither RAY_TMPDIR nor TMPDIR being set"
    do = (f"set RAY_TMPDIR{set_where} (Ray reads it before TMPDIR) to a short folder this user can write, e.g. "
          "`RAY_TMPDIR=/tmp`; nothing was started")
    if not os.path.isabs(value):
        return f"Ray's temp folder comes from {said}, which is not an absolute path: {do}"
    folder = get_default_ray_temp_dir()
    longest = os.path.join(folder, f"session_0000-00-00_00-00-00_000000_{os.getpid() if pid is None else pid}", "sockets", "plasma_store")
    size = len(os.fsencode(longest))
    if size > SOCKET_PATH_MAX:
        return (f"Ray's temp folder {folder} (from {said}) is too long for the Unix sockets Ray makes in it: "
                f"{os.path.join(folder, 'session_<date>_<pid>', 'sockets', 'plasma_store')} would be {size} bytes, "
                f"and Linux allows {SOCKET_PATH_MAX}: {do}")
    existing = Path(folder)
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        return f"Ray's temp folder {folder} cannot be made: {existing} is not a folder (from {said}): {do}"
    if not os.access(existing, os.W_OK | os.X_OK):
        why = "is on a read-only file system" if _read_only(existing) else "is not writable by this user"
        return f"Ray's temp folder {folder} cannot be written: {existing} {why} (from {said}): {do}"
    return None


def largest_pid() -> int:
    """The largest process id this machine gives (`/proc/sys/kernel/pid_max` less one; Linux's limit if unknown)."""
    try:
        return int(Path("/proc/sys/kernel/pid_max").read_text()) - 1
    except (OSError, ValueError):
        return 4194303


def _read_only(folder: Path) -> bool:
    try:
        return bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    except OSError:
        return False


@contextmanager
def _in_a_process_group_of_their_own() -> Iterator[None]:
    """The local Ray's processes started inside the block (GCS, raylet, monitors, dashboard, and the raylet's
    agents with the raylet) share one process group, apart from this process's.

    `timeout`, `kill -TERM -- -PGID` and a shell's `kill %1` send their signal to the command's whole process
    group. In it, Ray's processes began their own shutdown under the driver, and `train`'s save of its last
    iteration raced the raylet's end (Ray's core worker ends a driver whose raylet is gone: exit 1, no word). Apart,
    the signal reaches only the driver, which saves and then stops its Ray in order. The raylet puts its workers in
    groups of their own already.

    Ray has no setting for this: its process starter (`ray._private.services.ConsolePopen`, Ray 2.60, which
    pyproject pins) gets a `setpgid` ahead of Ray's own pre-exec step, for this block only. The first process
    started leads the group and the others join it.
    """
    from ray._private import services

    popen = services.ConsolePopen
    leader = 0  # the group's leader once the first process is started; 0 before: a group of its own

    class Apart(popen):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, preexec_fn: Any = None, **kwargs: Any) -> None:
            nonlocal leader
            group = leader

            def apart() -> None:
                try:
                    os.setpgid(0, group)
                except OSError:  # that group has no process left: one of its own
                    os.setpgid(0, 0)
                if preexec_fn is not None:
                    preexec_fn()

            super().__init__(*args, preexec_fn=apart, **kwargs)
            leader = leader or self.pid

    services.ConsolePopen = Apart  # type: ignore[misc]
    try:
        yield
    finally:
        services.ConsolePopen = popen  # type: ignore[misc]


def _start_reaper() -> None:
    """Start Ray's own reaper in the local Ray's process group, where it ends the group when this process dies.

    Ray starts its processes with the kernel's kill-on-parent-death (`PR_SET_PDEATHSIG`, its "fate sharing"), so
    they end with the driver even out of its group. The raylet's two agents are the raylet's children, though, and
    when it was killed they waited 60 s for a GCS that was gone before they ended. In the driver's group, a
    `kill -9 -- -PGID` had ended them at once. The reaper (`ray/_private/ray_process_reaper.py`, which Ray starts
    itself where the kernel cannot share fates) reads a pipe from this process; when this process dies, it sends
    the group SIGTERM and a second later SIGKILL. Ray's shutdown ends it last, as it ends its own reaper. Call it
    inside `_in_a_process_group_of_their_own`.
    """
    from ray._private import ray_constants, services

    node = _local_ray()
    script = Path(services.__file__).with_name("ray_process_reaper.py")
    info = services.start_ray_process([sys.executable, "-u", str(script)], ray_constants.PROCESS_TYPE_REAPER,
                                      pipe_stdin=True, fate_share=False)
    node.all_processes[ray_constants.PROCESS_TYPE_REAPER] = [info]


def _stop_local_monitor() -> None:
    """Kill the autoscaler monitor of the local Ray this process started, ahead of Ray's shutdown.

    `ray.shutdown()` stops the raylet and the GCS first and then sends the monitor SIGTERM. The monitor's
    handler reports its end to the GCS, which is gone by then, so it never exits on its own and Ray kills
    it after a fixed one-second wait, one second added to the end of every command. A local single-node
    Ray's monitor has nothing to save (its autoscaler has no nodes to launch), so it is killed at once
    here, as Ray would after that second; the rest of the shutdown is Ray's own. Ray 2.60's Node API
    (`kill_monitor`), which pyproject pins.
    """
    global _stopping
    _stopping = True
    node = _local_ray()
    if node is not None:
        node.kill_monitor(check_alive=False)


def _end_local_ray() -> None:
    """At this process's exit, just before Ray's own shutdown (atexit): the monitor first (`_stop_local_monitor`),
    then Ray's shutdown here, without its half-second wait when nothing could still be printed.

    Ray's exit handler, `ray.shutdown(_exiting_interpreter=True)`, sleeps 0.5 s first "to make sure that log
    messages finish printing": the lines of Ray's workers (and of the raylet's and GCS's error files) that its
    log monitor forwards to the driver. When every file the log monitor forwards is still empty (a `raytrain
    train` with no env runner or learner actors starts no worker process at all), no line can be on its way,
    and the shutdown is Ray's `ray.shutdown()` as a script calls it; Ray's own handler then finds nothing to do.
    Otherwise Ray's handler runs as it always does, wait included.
    """
    import ray

    _stop_local_monitor()
    node = _local_ray()
    if node is not None and nothing_left_to_print(Path(node.get_logs_dir_path())):
        ray.shutdown()


FORWARDED_LOGS = ("worker*", "java-worker*", "raylet*.err", "gcs_server*.err", "events/event_AUTOSCALER.log",
                  "tpu_logs/**/*")
"""What Ray 2.60's log monitor forwards to the driver from a node's log folder (`LogMonitor.update_log_filenames`:
the workers' output, the raylet's and GCS's errors, autoscaler events), as globs; also `runtime_env*.log` where
RAY_RUNTIME_ENV_LOG_TO_DRIVER_ENABLED is set, and `monitor.log`, of which the driver prints only the autoscaler's
event summaries."""


def nothing_left_to_print(logs: Path) -> bool:
    """Whether every file in Ray's log folder `logs` that Ray's log monitor forwards to the driver is empty (or
    none exists), so that no line of them can still be on its way to this process's output."""
    patterns: tuple[str, ...] = FORWARDED_LOGS
    if os.environ.get("RAY_RUNTIME_ENV_LOG_TO_DRIVER_ENABLED", "0") not in ("", "0"):  # Ray reads it as an int
        patterns += ("runtime_env*.log",)
    for pattern in patterns:
        for path in logs.glob(pattern):
            try:
                if path.is_file() and path.stat().st_size > 0:
                    return False
            except OSError:
                return False
    try:
        return ":event_summary:" not in (logs / "monitor.log").read_text(errors="replace")
    except FileNotFoundError:
        return True
    except OSError:
        return False


def local_ray_lost() -> bool:
    """Whether the local Ray this process started has lost one of its own processes (GCS, raylet, monitors,
    dashboard): none ends on its own while the session lasts.

    A SIGTERM sent to every process of the command (systemd stopping a unit, which signals its whole control
    group; Slurm ending a job step) reaches them with the driver; Ray blocks only SIGINT in them. A signal to the
    command's process group does not: they are in a group of their own (`_in_a_process_group_of_their_own`). The
    monitors end at once; the GCS and the raylet begin a slow shutdown, and the driver waits for them: 9 s in
    `ray.shutdown()`, 60 s in Tune's cleanup, after which Ray ends the process with "Failed to connect to GCS
    within 60 seconds".

    Once this process's exit has begun stopping that Ray (the monitor first), what ends is not lost: a watch
    that woke late on a busy machine took the monitor's end at a normal exit for a signal's work.
    """
    node = _local_ray()
    return not _stopping and node is not None and bool(_ended(node))


def local_ray_core_lost(*, probe: bool = False) -> list[str]:
    """Where the local Ray this process started can no longer serve it: what is wrong, each as `raylet ended
    (SIGTERM)`, `dashboard ended (exit 15)`, `its GCS does not answer` or `its raylet is stopping (its GCS has
    the node dead)`. Otherwise (that Ray whole, or only its dashboard or a monitor ended; this process's exit has
    begun stopping it; it started none) empty.

    The GCS and the raylet are what a driver cannot do without: Ray's core worker ends it 60 s after its GCS is gone
    ("Failed to connect to GCS within 60 seconds", exit 1), and at once where it puts an object with its raylet's
    object store gone. A SIGTERM to Ray's processes (`ray stop`) ends the dashboard and the log monitor at once, but
    the GCS and the raylet linger in their shutdown for a minute or more with the GCS answering nobody; a raylet
    SIGTERMed alone tells its GCS at once that its node is dead (its actors die then), and lingers too. So where any
    process of that Ray ended, at least every `GCS_PROBE_EVERY_S` besides, and on `probe`, the GCS is asked whether
    the node is alive (0.3 ms).
    """
    global _gcs_probed_at, _core_lost
    import time

    from ray._private import ray_constants

    node = _local_ray()
    if _stopping or node is None:
        return []
    if _core_lost:  # once lost, lost: the next probe may not be due, and a GCS that answers again is a new one
        return list(_core_lost)
    ended = _ended(node)
    wrong = [f"{kind} ended ({how})" for kind, how in ended]
    if {ray_constants.PROCESS_TYPE_GCS_SERVER, ray_constants.PROCESS_TYPE_RAYLET} & {kind for kind, _ in ended}:
        _core_lost = wrong
    elif probe or ended or time.monotonic() - _gcs_probed_at >= GCS_PROBE_EVERY_S:
        said = _gcs_says(node)
        _gcs_probed_at = time.monotonic()
        if said:
            _core_lost = [*wrong, said]
    return list(_core_lost)


GCS_PROBE_EVERY_S = 10.0
"""How often `local_ray_core_lost` asks a local Ray's GCS whether it answers when none of its processes ended."""

GCS_PROBE_TIMEOUT_S = 5.0
"""How long it waits for the answer: a GCS that answers nobody for that long is taken for gone."""

_gcs_probed_at = float("-inf")
_core_lost: list[str] = []


def _gcs_says(node: Any) -> str | None:
    """None where the GCS of Ray's `node` answers within `GCS_PROBE_TIMEOUT_S` that the node is alive; else what
    is wrong: `its GCS does not answer`, `its raylet is stopping (its GCS has the node dead)`."""
    from ray._raylet import NodeID

    try:
        alive = node.get_gcs_client().check_alive([NodeID.from_hex(node.node_id)], timeout=GCS_PROBE_TIMEOUT_S)
    except Exception:  # Ray's RpcError (cancelled, timed out, unavailable): no answer, whatever the cause
        return "its GCS does not answer"
    return None if alive and alive[0] else "its raylet is stopping (its GCS has the node dead)"


def _ended(node: Any) -> list[tuple[str, str]]:
    """The processes Ray's `node` started that have ended: (kind, how), `("raylet", "SIGTERM")`, `("gcs_server",
    "exit 1")`."""
    import signal

    ended = []
    for kind, infos in node.all_processes.items():
        for info in infos:
            code = info.process.poll() if info.process is not None else None
            if code is None:
                continue
            try:
                how = signal.Signals(-code).name if code < 0 else f"exit {code}"
            except ValueError:
                how = f"signal {-code}"
            ended.append((kind, how))
    return ended


def started_local_ray() -> bool:
    """Whether this process started the Ray it is connected to (`ray.init()` with no cluster to join)."""
    return _local_ray() is not None


def _local_ray() -> Any:
    """Ray's record of the local Ray this process started (its `Node`), or None."""
    if "ray" not in sys.modules:
        return None
    import ray

    node = ray._private.worker._global_node
    return node if node is not None and node.head else None


def abandon_local_ray() -> None:
    """After `local_ray_lost`: kill what is left of that Ray (at once: there is nothing to save) and take Ray's
    own shutdown, which would wait for the GCS, off the exit handlers.

    The whole process group of Ray's processes (`_in_a_process_group_of_their_own`) first, in one signal: the
    raylet's agents are in it too, the raylet's children, which Ray does not list. Killed before it had killed them
    (its own SIGTERM handler does, within milliseconds), the raylet left them waiting 60 s for a GCS that was gone;
    the reaper that would end them (`_start_reaper`) had the same SIGTERM. Then Ray's own kill, which reaps them.
    """
    import atexit
    import signal

    import ray

    node = ray._private.worker._global_node
    if node is not None:
        for group in _process_groups(node) - {os.getpgrp()}:  # never this process's own
            try:
                os.killpg(group, signal.SIGKILL)
            except OSError:
                pass
        node.kill_all_processes(check_alive=False, allow_graceful=False)
    atexit.unregister(_end_local_ray)
    atexit.unregister(ray._private.worker.shutdown)


def _process_groups(node: Any) -> set[int]:
    """The process groups of the processes still running of Ray's `node`."""
    groups = set()
    for process in _processes(node):
        if process.poll() is None:
            try:
                groups.add(os.getpgid(process.pid))
            except OSError:
                pass
    return groups


def _processes(node: Any) -> list[Any]:
    """The processes Ray's `node` started and records (`Node.all_processes`), as `Popen`s: GCS, raylet, monitors,
    dashboard, reaper."""
    return [info.process for infos in node.all_processes.values() for info in infos if info.process is not None]


def ray_address(address: str | None) -> str | None:
    """The Ray cluster a command joins: `address`, else RAY_ADDRESS; None means a local Ray started here."""
    return address or os.environ.get("RAY_ADDRESS") or None


def check_address(address: str | None) -> str | None:
    """The Ray cluster to join (`ray_address`), checked as typed.

    Raises:
        RayAddressError: it is not HOST:PORT of a host and a port; says so of RAY_ADDRESS where it came from there.
    """
    joining = ray_address(address)
    malformed = address_malformed(joining) if joining else None
    if joining and malformed is not None:
        raise RayAddressError(joining, malformed, from_env=not address)
    return joining


LOCAL_RAY = "local Ray"
"""What `connect_ray` returns when it started a local Ray."""


def connect_ray(address: str | None, num_cpus: int | None = None) -> str:
    """Connect to the cluster at `address` (or RAY_ADDRESS), or start a local Ray. Returns a description.

    A local Ray starts no worker processes ahead of time: Ray pre-starts one per CPU, each importing Ray
    and competing for the CPUs with start-up, and none of them ever ran anything of raytrain's (trials,
    env runners and learners are actors, and Ray 2.60 gives every actor a process of its own).

    Raises:
        RayAddressError: `address` is not HOST:PORT of a host and a port (as typed).
        RayUnreachableError: nothing answers at `address` (found in seconds).
        TrainError: Ray cannot join the cluster at `address` for another reason.
    """
    from raytrain.quiet import worker_runtime_env

    address = check_address(address)
    if address:
        try:
            joined = init_ray(address, logging_level="WARNING", runtime_env=worker_runtime_env())
        except (RayAddressError, RayUnreachableError, RayAuthError):
            raise
        except Exception as exc:  # Ray raises ConnectionError, RuntimeError, ... here
            raise TrainError(
                f"cannot connect to the Ray cluster at {address}: {exc}. Check that it is up "
                "(`ray status --address ...`) and that this machine runs the same Ray and Python versions."
            ) from None
        return f"Ray cluster at {address}" if joined else "existing Ray session"
    started = init_ray(None, num_cpus=num_cpus, include_dashboard=False, logging_level="WARNING",
                       _system_config={"enable_worker_prestart": False, "prestart_worker_first_driver": False},
                       runtime_env=worker_runtime_env())
    return LOCAL_RAY if started else "existing Ray session"


def gcs_unreachable(address: str, timeout_s: float = 5.0) -> str | None:
    """Why the GCS that `ray.init(address=address)` would join cannot be reached, or None when it answers.

    Ray itself keeps retrying an address where nothing answers (a typo, a stopped head) for minutes, printing
    its own warnings on the terminal. A TCP connect to the address Ray would use (`localhost` resolved the way
    Ray resolves it) answers within `timeout_s`. Ray Client addresses (`ray://`) are left to Ray.
    """
    import socket

    from ray._private.services import canonicalize_bootstrap_address, parse_address

    if address.startswith("ray://"):
        return None
    malformed = address_malformed(address)
    if malformed is not None:
        return malformed
    try:
        bootstrap = canonicalize_bootstrap_address(address)
    except Exception as exc:  # ConnectionError: "auto" and no Ray recorded on this machine
        return str(exc)
    if bootstrap is None:  # "local", or "auto" with no cluster recorded: Ray starts one
        return None
    host, port = parse_address(bootstrap)  # checked by address_malformed as it was typed
    try:
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError as exc:
        return f"nothing answers at {bootstrap} ({exc})"
    return None


def auth_refused(address: str) -> str | None:
    """Why the GCS at `address` (which answers) refuses this driver's auth, or None when it takes it.

    A token-auth cluster joined without its token: Ray's `ray.init` prints native `InvalidAuthToken` warnings for
    about 20 s and then fails with "Failed to connect". The driver's auth is what `ray.init` would use to join
    (RAY_AUTH_MODE; for `auto`, token auth where a token file exists), and one GCS client connects with it, its
    native warning line kept off the terminal. Ray Client addresses (`ray://`) are left to Ray.
    """
    from ray._private.authentication.authentication_token_setup import (
        ensure_token_if_auth_enabled,
        maybe_enable_token_auth_if_token_available,
    )
    from ray._private.services import canonicalize_bootstrap_address
    from ray._raylet import GcsClient  # type: ignore[attr-defined]
    from ray.exceptions import AuthenticationError

    if address.startswith("ray://"):
        return None
    bootstrap = canonicalize_bootstrap_address(address)
    if bootstrap is None:
        return None
    if address == "auto":  # as ray.init: only a cluster found on this machine turns token auth on by itself
        maybe_enable_token_auth_if_token_available(warn_if_disabled=False)
    try:
        ensure_token_if_auth_enabled(None, create_token_if_missing=False)  # Ray's native client aborts without one
    except AuthenticationError as exc:
        return str(exc)
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "wb") as devnull:
            os.dup2(devnull.fileno(), 2)
            try:
                GcsClient(address=bootstrap)
            except AuthenticationError as exc:
                return str(exc)
            except Exception:  # anything else: ray.init reports it
                return None
    finally:
        os.dup2(saved, 2)
        os.close(saved)
    return None


def address_malformed(address: str) -> str | None:
    """Why `address` is not a Ray address as typed (not HOST:PORT, a port out of range, a host that is neither
    an IP address nor a hostname), or None. `auto` and `local` are Ray's words; a Ray Client address is
    `ray://HOST:PORT`."""
    from ray._private.services import parse_address

    from raytrain.config.cluster import check_hostname_or_ip

    if address in ("auto", "local"):
        return None
    parsed = parse_address(address.removeprefix("ray://"))  # Ray's own split: None where it finds no HOST:PORT; IPv6 brackets dropped
    if parsed is None:
        return "not HOST:PORT"
    host, port = parsed
    if not (port.isascii() and port.isdigit() and 1 <= int(port) <= 65535):
        return f"the port {port!r} is not a number from 1 to 65535"
    try:
        check_hostname_or_ip(host)
    except ValueError:
        return f"the host {host!r} is not an IP address or a hostname"
    return None

"""check / up / down / status / exec of a cluster, through a Runner.

The library returns values and raises ClusterError; the CLI prints. Nothing here decides how to print.
"""

from __future__ import annotations

import json
import os
import secrets
import stat
import time
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from raytrain.cluster import plan
from raytrain.cluster.runner import CommandResult, Runner, Secret
from raytrain.config.cluster import ClusterConfig, NodeConfig
from raytrain.errors import ClusterError, ConfigError, ConfigIssue

T = TypeVar("T")
R = TypeVar("R")
Node = dict[str, Any]
"""A node as the head's GCS lists it: ip, alive, resources, hostname."""


def parallel(fn: Callable[[T], R], items: Iterable[T]) -> list[R]:
    """fn over items in threads, results in the order of items."""
    items = list(items)
    if not items:
        return []
    with ThreadPoolExecutor(max_workers=min(16, len(items))) as pool:
        return list(pool.map(fn, items))


def _quiet(text: str) -> None:
    """An `on_step` that shows nothing."""


@dataclass
class CheckReport:
    versions: dict[str, dict[str, str]] = field(default_factory=dict)
    """node -> {python, ray, hostname}"""
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def local_token_path(cfg: ClusterConfig) -> Path:
    """The cluster's token on this machine."""
    return Path(os.path.expanduser("~"), cfg.token_path)


def check(cfg: ClusterConfig, runner: Runner, *, nodes: list[NodeConfig] | None = None, ports: bool = True) -> CheckReport:
    """The preflight, in parallel on all (or the given) nodes: SSH, versions, head ports, shared storage."""
    report = CheckReport()
    nodes = list(cfg.nodes if nodes is None else nodes)
    here = plan.this_machine()  # first: the probes' threads then find it made (a dry run lists them in order)
    results = parallel(lambda n: runner.run(n, plan.probe(cfg), timeout=cfg.ssh.connect_timeout + 30), nodes)
    report.versions["(this machine)"] = here
    reachable = []
    for node, res in zip(nodes, results):
        if not res.ok:
            report.problems.append(f"cannot run Python on {res.describe()}")
            continue
        try:
            info = json.loads(res.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            report.problems.append(f"unexpected output from {res.describe()}")
            continue
        report.versions[node.node_name] = info
        reachable.append(node)
    # Ray refuses a Python whose version differs in any digit (RAY_DEFAULT_PYTHON_VERSION_MATCH_LEVEL=patch),
    # or only in major.minor when that variable is `minor` (set it under `env:` to allow patch differences).
    minor_only = str(cfg.env.get("RAY_DEFAULT_PYTHON_VERSION_MATCH_LEVEL", "patch")) == "minor"

    def python_of(v: dict[str, str]) -> str:
        return v["python"].rsplit(".", 1)[0] if minor_only else v["python"]

    differing = {n: v for n, v in report.versions.items() if (python_of(v), v["ray"]) != (python_of(here), here["ray"])}
    if differing:
        table = "\n".join(f"    {n}: Python {v['python']}, Ray {v['ray']}" for n, v in report.versions.items())
        report.problems.append(
            f"Python/Ray versions differ between nodes ({', '.join(differing)}); every node and this machine "
            f"need the same Ray and Python {'minor ' if minor_only else ''}version (Ray refuses otherwise):\n{table}\n"
            f"    install ray=={here['ray']} with Python {python_of(here)} on {', '.join(differing)} (or set "
            "`python:`/`venv:` to one that has it)"
        )
    # Ports `ray start` will bind: the head's own and every pinned one (on each node to be started).
    to_probe = [n for n in reachable if plan.ports_to_check(cfg, n) and (ports or n is not cfg.head)]
    results = parallel(lambda n: runner.run(n, plan.ports_free(cfg, plan.ports_to_check(cfg, n)), timeout=30), to_probe)
    for node, res in zip(to_probe, results):
        busy = json.loads(res.stdout.strip() or "[]") if res.ok else []
        if busy:
            where = "on the head" if node is cfg.head else "there"
            report.problems.append(
                f"{node.node_name}: port(s) {', '.join(map(str, busy))} already in use {where} (another Ray? "
                "`raytrain cluster status`; or pin other ports under `ports:`)"
            )
    if cfg.storage.path and (cfg.head in reachable or cfg.head not in nodes):
        report.problems += _check_storage(cfg, runner, cfg.storage.path, [n for n in reachable if n is not cfg.head])
    return report


def _check_storage(cfg: ClusterConfig, runner: Runner, path: str, workers: list[NodeConfig]) -> list[str]:
    marker = plan.Marker(path)
    # On a share that `up` mounts itself the directory may be created; anywhere else it must exist (a typo
    # would otherwise become a new, unshared directory on the head).
    res = runner.run(cfg.head, plan.write_marker(marker, create=cfg.storage.nfs is not None), timeout=30)
    if res.returncode == plan.MISSING_DIR_RC:
        return [f"storage.path {path} does not exist on the head ({cfg.head.node_name}): create it on the shared "
                "(NFS) mount, or fix storage.path"]
    if not res.ok:
        return [f"storage.path {path} is not writable on the head: {res.describe()}"]
    try:
        results = parallel(lambda n: runner.run(n, plan.read_marker(marker), timeout=30), workers)
        bad = [n.node_name for n, r in zip(workers, results) if not r.ok or not marker.seen_in(r.stdout)]
    finally:
        runner.run(cfg.head, plan.remove_marker(marker), timeout=30)
    if bad:
        fix = f"Mount the shared (NFS) directory at {path} on every node."
        if cfg.storage.nfs is not None:
            fix = (f"`raytrain cluster up` mounts {plan.nfs_share(cfg)} at {cfg.storage.mount_point} where nothing "
                   "is mounted yet: is another file system mounted there?")
        return [
            f"storage.path {path} is not the same shared directory on {', '.join(bad)}: a marker written on the "
            f"head is not there. {fix}"
        ]
    return []


def _alive(cfg: ClusterConfig, runner: Runner) -> list[Node] | None:
    """The nodes the head's GCS knows, None when it cannot be asked (the head is down or unreachable)."""
    res = runner.run(cfg.head, plan.list_nodes(cfg), timeout=60)
    if not res.ok:
        return None
    try:
        nodes: list[Node] | None = json.loads(res.stdout.strip().splitlines()[-1])  # None when the GCS port is closed
    except (ValueError, IndexError):
        return None
    return nodes


def _private_folder(path: Path) -> None:
    """Create `path` and each missing folder above it under $HOME, every one 0700 whatever the umask."""
    home = Path(os.path.expanduser("~"))
    folder = home
    for part in path.relative_to(home).parts:
        folder = folder / part
        try:
            os.mkdir(folder, 0o700)
        except FileExistsError:
            continue
        os.chmod(folder, 0o700)  # mkdir's mode is cut by the umask
    os.chmod(path, 0o700)


def check_token_file(path: Path) -> None:
    """Refuse a token file that others could read or replace (ConfigError, exit 2, with the `chmod` to run)."""
    st = path.stat()
    if not stat.S_ISREG(st.st_mode):
        raise ConfigError([ConfigIssue(str(path), "", "the cluster's token is not a regular file: remove it and run "
                                       "`raytrain cluster up` again")])
    if st.st_uid != os.getuid():
        raise ConfigError([ConfigIssue(str(path), "", f"the cluster's token belongs to user id {st.st_uid}, not to you: "
                                       "anyone who can change it can read what Ray trusts")])
    if st.st_mode & 0o077:
        raise ConfigError([ConfigIssue(
            str(path), "", f"the cluster's token is readable by group or others (mode {stat.S_IMODE(st.st_mode):04o}); "
            f"whoever reads it controls the cluster. Run `chmod 600 {path}` (and consider a new token: delete the "
            "file and run `raytrain cluster up --restart`)")])


def token_for_driver(cfg: ClusterConfig) -> Path:
    """The token file a driver or a job client on this machine uses: ClusterError when there is none yet,
    ConfigError when others could read it."""
    path = local_token_path(cfg)
    if not path.exists():
        raise ClusterError(f"no token for cluster {cfg.name} at {path}: run `raytrain cluster up` from this machine first")
    check_token_file(path)
    return path


def read_token(cfg: ClusterConfig) -> str:
    """The cluster's token from this machine, refused when others could read it."""
    path = local_token_path(cfg)
    check_token_file(path)
    return path.read_text().strip()


def ensure_token(cfg: ClusterConfig) -> str:
    """The cluster's token, created once (0600, in 0700 folders) on this machine."""
    path = local_token_path(cfg)
    if not path.exists():
        _private_folder(path.parent)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(secrets.token_hex(32))
    return read_token(cfg)


@dataclass
class MountResult:
    """What the mount step did on one node."""

    node: str
    action: str
    """`mounted`, `already mounted`, `would mount` (dry run) or `nfs server` (uses the export in place)."""
    detail: str

    def __str__(self) -> str:
        return f"{self.node}: {self.action} {self.detail}"


def mount_storage(cfg: ClusterConfig, runner: Runner, *, on_step: Callable[[str], None] = _quiet) -> list[MountResult]:
    """Mount `storage.nfs` on every node where nothing is mounted at the mount point yet, in parallel.

    Nodes where something is mounted there are left alone (and what is mounted is reported). Raises
    ClusterError naming every node that failed, with the exact command, its exit code and stderr.
    """
    nfs = cfg.storage.nfs
    if nfs is None:
        return []
    point, share = cfg.storage.mount_point, plan.nfs_share(cfg)

    def one(node: NodeConfig) -> MountResult | CommandResult:
        if plan.is_nfs_server(cfg, node):
            return MountResult(node.node_name, "nfs server", f"(uses {nfs.export} in place)")
        probe = runner.run(node, plan.nfs_probe(cfg), timeout=cfg.ssh.connect_timeout + 30)
        if probe.ok:
            mounted = "; ".join(probe.stdout.strip().splitlines()) or "?"
            return MountResult(node.node_name, "already mounted", f"{point} ({mounted})")
        if probe.returncode != 1:  # findmnt exits 1 when nothing is mounted there
            return probe
        res = runner.run(node, plan.nfs_mount(cfg), timeout=cfg.ssh.connect_timeout + nfs.mount_timeout_s)
        if not res.ok:
            return res
        return MountResult(node.node_name, "would mount" if runner.dry_run else "mounted", f"{share} at {point}")

    on_step(f"storage: mounting {share} at {point} where it is not mounted yet")
    results = parallel(one, cfg.nodes)
    done = [r for r in results if isinstance(r, MountResult)]
    for r in done:
        on_step(f"  {r}")
    failed = [r for r in results if isinstance(r, CommandResult)]
    if failed:
        undone = unmount_storage(cfg, runner, done)
        others = f"\n  (unmounted again where this run had mounted it: {', '.join(undone)})" if undone else ""
        raise ClusterError(
            f"could not mount the NFS share {share} at {point}, nothing was started:\n  "
            + "\n  ".join(r.describe() for r in failed) + others
        )
    return done


def unmount_storage(cfg: ClusterConfig, runner: Runner, mounts: list[MountResult]) -> list[str]:
    """Unmount the share where `mount_storage` mounted it (never what was mounted before): `up` leaves the
    nodes as it found them when it refuses. Returns the names of the nodes unmounted."""
    by_name = {n.node_name: n for n in cfg.nodes}
    mine = [by_name[m.node] for m in mounts if m.action == "mounted" and m.node in by_name]
    results = parallel(lambda n: runner.run(n, plan.nfs_unmount(cfg), timeout=cfg.ssh.connect_timeout + 30), mine)
    return [r.node for r in results if r.ok]


@dataclass
class UpReport:
    already_up: bool
    nodes: list[Node]
    seconds: float
    commands: list[tuple[str, str]] = field(default_factory=list)
    """What a dry run recorded instead of running it (empty when the commands ran)."""
    mounts: list[MountResult] = field(default_factory=list)
    """What the NFS mount step did per node (empty without `storage.nfs`)."""
    versions: dict[str, dict[str, str]] = field(default_factory=dict)
    """node name -> {python, ray, hostname}, from the preflight (the nodes it checked)."""


def up(cfg: ClusterConfig, runner: Runner, *, restart: bool = False, preflight: bool = True,
       on_step: Callable[[str], None] = _quiet) -> UpReport:
    """Start the head, then every worker in parallel once the head's GCS answers; wait until all are alive. All or nothing.

    With `storage.nfs`, first mounts the share on every node where it is not mounted yet (before the
    preflight checks that storage.path is shared). On a cluster that is up, starts nothing; on one whose
    head is up but some workers are not (a worker host rebooted), starts just those workers.
    """
    t0 = time.perf_counter()
    mounts = mount_storage(cfg, runner, on_step=on_step)
    to_start, running = _nodes_to_start(cfg, runner, restart=restart, on_step=on_step)
    if not to_start:
        return UpReport(True, running, time.perf_counter() - t0, mounts=mounts)
    versions = _preflight(cfg, runner, to_start, mounts, on_step) if preflight else {}
    _install_token(cfg, runner, to_start)
    nodes = _start(cfg, runner, to_start, on_step)
    return UpReport(False, nodes, time.perf_counter() - t0, runner.recorded(), mounts, versions)


def _nodes_to_start(cfg: ClusterConfig, runner: Runner, *, restart: bool,
                    on_step: Callable[[str], None]) -> tuple[list[NodeConfig], list[Node]]:
    """The nodes `up` starts, and the nodes the head's GCS lists (empty when it is down).

    Every node when the cluster is down (or stopped first with `restart`); else the workers that are not alive.
    """
    # A dry run shows how a stopped cluster is started: it does not ask whether this one runs.
    nodes = None if runner.dry_run else _alive(cfg, runner)
    if nodes is None:
        return list(cfg.nodes), []
    if restart:
        on_step("--restart: stopping the running cluster first")
        down(cfg, runner)
        _wait_ports_free(cfg, runner)
        return list(cfg.nodes), []
    alive_ips = {n["ip"] for n in nodes if n["alive"]}
    missing = [w for w in cfg.workers if w.ip not in alive_ips]
    if missing:
        on_step(f"the head is up; starting the missing worker(s): {', '.join(w.node_name for w in missing)}")
    return missing, nodes


def _preflight(cfg: ClusterConfig, runner: Runner, nodes: list[NodeConfig], mounts: list[MountResult],
               on_step: Callable[[str], None]) -> dict[str, dict[str, str]]:
    """`check` on the nodes to start (the head's ports only if it is one): their versions, or ClusterError
    listing every problem, after unmounting the share where this `up` mounted it."""
    on_step("preflight: ssh, versions, ports, storage on every node")
    report = check(cfg, runner, nodes=nodes, ports=cfg.head in nodes)
    if not report.ok:
        undone = unmount_storage(cfg, runner, mounts)
        note = f"\n  (the NFS share was unmounted again on {', '.join(undone)})" if undone else ""
        raise ClusterError("preflight failed, nothing was started:\n  " + "\n  ".join(report.problems) + note)
    return report.versions


def _install_token(cfg: ClusterConfig, runner: Runner, nodes: list[NodeConfig]) -> None:
    if cfg.auth.mode != "token":
        return
    # Made (on this machine) only when a command really runs: a dry run creates no token.
    token = Secret(lambda: ensure_token(cfg) + "\n")
    results = parallel(lambda n: runner.run(n, plan.install_token(cfg), stdin=token, timeout=cfg.ssh.connect_timeout + 30), nodes)
    failed = [r for r in results if not r.ok]
    if failed:
        raise ClusterError("could not install the auth token, nothing was started:\n  " + "\n  ".join(r.describe() for r in failed))


def _start(cfg: ClusterConfig, runner: Runner, nodes: list[NodeConfig], on_step: Callable[[str], None]) -> list[Node]:
    """`ray start` on the head (when it is one of `nodes`) and on the workers in parallel, the workers as soon as
    the head's GCS accepts connections (as the Slurm job does); wait until every node is alive and return the
    GCS's list. On any failure, stops Ray again where this ran `ray start`, once every `ray start` has ended."""
    # Every node this ran `ray start` on, failed ones included: a `ray start` that exits non-zero
    # (or times out) may already have started a raylet or the GCS.
    attempted: list[NodeConfig] = []
    workers = [n for n in nodes if n is not cfg.head]
    try:
        # Leaving the pool waits for the head's `ray start` to end, so a failure stops only what has started.
        with ThreadPoolExecutor(max_workers=1) as pool:
            head_start: Future[CommandResult] | None = None
            if cfg.head in nodes:
                on_step(f"starting the head on {cfg.head.node_name}")
                attempted.append(cfg.head)
                head_start = pool.submit(runner.run, cfg.head, plan.start_head(cfg), timeout=cfg.start_timeout_s)
                overlap = bool(workers) and not runner.dry_run  # a dry run lists the head's command first
                if not (overlap and _wait_gcs(cfg, runner, head_start)):
                    wait([head_start])  # the workers start once the head's `ray start` has ended
                if head_start.done():
                    _head_started(head_start.result())
            if workers:
                on_step(f"starting {len(workers)} worker(s) in parallel")
            attempted += workers
            results = parallel(lambda n: runner.run(n, plan.start_worker(cfg, n), timeout=cfg.start_timeout_s), workers)
            if head_start is not None:
                _head_started(head_start.result())
        failed = [r for r in results if not r.ok]
        if failed:
            raise ClusterError("worker(s) failed to start:\n  " + "\n  ".join(r.describe() for r in failed))
        return _wait_alive(cfg, runner)
    except BaseException as exc:
        if attempted:
            why = "interrupted" if isinstance(exc, KeyboardInterrupt) else "failed"
            on_step(f"{why}: stopping Ray on {', '.join(n.node_name for n in attempted)}")
            stops = parallel(lambda n: runner.run(n, plan.stop(cfg), timeout=70), list(reversed(attempted)))
            for res in stops:
                for note in (n for n in res.stderr.splitlines() if n.startswith("note: ")) if res.ok else ():
                    on_step(f"{res.node}: {note.removeprefix('note: ')}")
                if not res.ok:
                    said = (res.stderr or res.stdout).strip().splitlines()[-1:] or ["(no output)"]
                    on_step(f"could not stop Ray on {res.node}: `ray stop` exited {res.returncode}: {said[0]} "
                            "(`raytrain cluster down` tries again)")
        raise


def _head_started(res: CommandResult) -> None:
    if not res.ok:
        raise ClusterError(f"the head failed to start: {res.describe()}")


def _wait_gcs(cfg: ClusterConfig, runner: Runner, head_start: Future[CommandResult]) -> bool:
    """True as soon as the head's GCS port accepts connections; False once the head's `ray start` has ended
    or `start_timeout_s` has passed without that."""
    deadline = time.monotonic() + cfg.start_timeout_s
    while not head_start.done() and time.monotonic() < deadline:
        # Short rounds, so that a head whose start fails is noticed within about 2 s.
        if runner.run(cfg.head, plan.gcs_answers(cfg, wait_s=2), timeout=cfg.ssh.connect_timeout + 10).ok:
            return True
    return False


def _wait_ports_free(cfg: ClusterConfig, runner: Runner, timeout_s: float = 30) -> None:
    """After a stop, wait until the head's ports are released (processes can take a moment to exit)."""
    wanted = plan.ports_to_check(cfg, cfg.head)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        res = runner.run(cfg.head, plan.ports_free(cfg, wanted), timeout=30)
        if res.ok and json.loads(res.stdout.strip() or "[]") == []:
            return
        time.sleep(0.5)


def _wait_alive(cfg: ClusterConfig, runner: Runner) -> list[Node]:
    deadline = time.monotonic() + cfg.start_timeout_s
    nodes: list[Node] | None = None
    while time.monotonic() < deadline:
        nodes = _alive(cfg, runner)
        if nodes is not None and {n.ip for n in cfg.nodes} <= {x["ip"] for x in nodes if x["alive"]}:
            return nodes
        time.sleep(0.5)
    alive = {x["ip"] for x in nodes or [] if x["alive"]}
    missing = [n.node_name for n in cfg.nodes if n.ip not in alive]
    raise ClusterError(f"timed out after {cfg.start_timeout_s:g} s waiting for {', '.join(missing)} to join")


def down(cfg: ClusterConfig, runner: Runner) -> list[CommandResult]:
    """Stop the workers (in parallel), then the head."""
    results = parallel(lambda n: runner.run(n, plan.stop(cfg), timeout=120), cfg.workers)
    results.append(runner.run(cfg.head, plan.stop(cfg), timeout=120))
    return results


@dataclass
class Status:
    head_reachable: bool
    nodes: list[dict[str, Any]]
    """Each defined node: name, host, ip, state (alive / dead / not joined), resources."""
    extra: list[Node]
    """Nodes the cluster has that the file does not define."""
    dashboard_url: str
    address: str


def _versions(cfg: ClusterConfig, runner: Runner) -> list[dict[str, str]]:
    results = parallel(lambda n: runner.run(n, plan.probe(cfg), timeout=cfg.ssh.connect_timeout + 20), cfg.nodes)
    out: list[dict[str, str]] = []
    for res in results:
        try:
            out.append(json.loads(res.stdout.strip().splitlines()[-1]) if res.ok else {"error": "unreachable"})
        except (ValueError, IndexError):
            out.append({"error": "no answer"})
    return out


def status(cfg: ClusterConfig, runner: Runner, *, known: list[Node] | None = None,
           versions: list[dict[str, str]] | None = None) -> Status:
    """The cluster as its head sees it. `known` (the head's node list) and `versions` (per node of the file)
    may be given when the caller has just read them (`up`), to spare the SSH round trips."""
    if known is None or versions is None:
        with ThreadPoolExecutor(max_workers=1) as pool:
            probed = pool.submit(_versions, cfg, runner) if versions is None else None
            known = _alive(cfg, runner) if known is None else known
            versions = probed.result() if probed is not None else versions
    assert versions is not None
    by_ip: dict[str, Node] = {}
    for n in known or []:
        # A node that rejoined has an alive and a dead entry: alive wins.
        if n["ip"] not in by_ip or n["alive"]:
            by_ip[n["ip"]] = n
    rows = []
    for node, version in zip(cfg.nodes, versions):
        listed = by_ip.get(node.ip)
        state = "alive" if listed and listed["alive"] else "dead" if listed else "not joined"
        rows.append({
            "name": node.node_name, "host": node.host, "ip": node.ip, "role": "head" if node is cfg.head else "worker",
            "state": state if known is not None else "unknown (head unreachable or down)",
            "resources": (listed or {}).get("resources", {}),
            "python": version.get("python", version.get("error")),
            "ray": version.get("ray", version.get("error")),
        })
    defined = {n.ip for n in cfg.nodes}
    extra = [n for n in by_ip.values() if n["ip"] not in defined]
    url = cfg.dashboard_url if cfg.head.dashboard.enabled else "(dashboard disabled)"
    return Status(known is not None, rows, extra, url, cfg.address)


def not_up(cfg: ClusterConfig, st: Status, file: str) -> str | None:
    """Why `st` is not the cluster of `file` up (its head answers and every node it defines is alive), else None:
    `cluster status` then exits 1, so a script can wait for the cluster."""
    if not st.head_reachable:
        return (f"cluster {cfg.name} is not up: its head {cfg.head.host} does not answer (down or unreachable): "
                f"`raytrain cluster up {file}` starts it")
    missing = [f"{n['name']} {n['state']}" for n in st.nodes if n["state"] != "alive"]
    if not missing:
        return None
    alive = len(st.nodes) - len(missing)
    return (f"cluster {cfg.name} is not up: {alive} of its {len(st.nodes)} nodes alive ({', '.join(missing)}): "
            f"`raytrain cluster up {file}` starts the missing ones")


def exec_(cfg: ClusterConfig, runner: Runner, command: str, nodes: list[NodeConfig]) -> list[CommandResult]:
    return parallel(lambda n: runner.run(n, command), nodes)


def is_local_address(ip: str) -> bool:
    """Whether `ip` belongs to this machine (binding to an address works only where it is configured)."""
    import socket

    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.bind((ip, 0))
        return True
    except OSError:
        return False


def storage_warning(cluster: Path | None, storage_path: str, key: str) -> str | None:
    """A warning when a run joined with `--cluster FILE` keeps its checkpoints outside the cluster file's shared
    `storage.path`: a trial on another node, or a resume there, could not read them (Tune's own check stops a
    multi-node sweep whose path is not shared, once Ray has started). None without a cluster or a storage.path."""
    if cluster is None:
        return None
    from raytrain.config.cluster import load_cluster
    from raytrain.paths import inside

    shared = load_cluster(cluster).storage.path
    if not shared or inside(shared, storage_path):
        return None
    return (f"warning: {key} {storage_path} is outside the shared storage.path {shared} of {cluster}: checkpoints "
            f"written there are not where the other nodes look; to keep them on the share: --set {key}={shared}")


def driver_env(cfg: ClusterConfig) -> dict[str, str]:
    """What a driver on this machine needs to join the cluster: address, auth mode, token path.

    A Ray driver runs on a node of the cluster (it talks to its local raylet), so this machine must be
    one of the cluster's nodes (usually the head).
    """
    if not any(n.local or is_local_address(n.ip) for n in cfg.nodes):
        raise ClusterError(
            f"this machine is not a node of cluster {cfg.name} ({', '.join(n.ip for n in cfg.nodes)}), and a Ray "
            f"driver must run on one: run the command on the head, e.g. `ssh {cfg.head.host} raytrain ...`, "
            f"or through `raytrain cluster exec {cfg.name}.yaml --node {cfg.head.node_name} -- raytrain ...`"
        )
    env = {"RAY_ADDRESS": cfg.address, "RAY_AUTH_MODE": cfg.auth.mode}
    if cfg.auth.mode == "token":
        env["RAY_AUTH_TOKEN_PATH"] = str(token_for_driver(cfg))
    return env

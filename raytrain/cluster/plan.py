"""What to run where: the exact shell commands for each node, built from a ClusterConfig (nothing here runs them).

Each command carries the answer a node gives where all is well, so that a dry run, which runs nothing,
answers like a stopped cluster that passes every check, and the code reading the answers has no dry-run case.
"""

from __future__ import annotations

import functools
import ipaddress
import json
import platform
import posixpath
import shlex
import textwrap
import uuid
from dataclasses import dataclass, field

from raytrain.config.cluster import EXPORT_PATH, OPTIONS_RE, ClusterConfig, NFSConfig, NodeConfig, check_single_host
from raytrain.errors import ConfigError

# Ray's version from its installed metadata: importing Ray itself takes a second or more per node.
PROBE = (
    "import json, platform, socket, sys\nfrom importlib import metadata\n"
    "try:\n    v = metadata.version(\"ray\")\nexcept Exception as e:\n    v = \"missing: \" + str(e)\n"
    "print(json.dumps({\"python\": platform.python_version(), \"ray\": v, \"hostname\": socket.gethostname()}))"
)

# SO_REUSEADDR: only a listening socket counts as "in use", not connections in TIME_WAIT left by a Ray that
# just stopped (Ray's own servers bind the same way).
PORT_FREE = (
    "import json, socket, sys\n"
    "busy = []\n"
    "for p in map(int, sys.argv[1:]):\n"
    "    s = socket.socket()\n"
    "    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
    "    try:\n        s.bind((\"\", p))\n    except OSError:\n        busy.append(p)\n    finally:\n        s.close()\n"
    "print(json.dumps(busy))"
)

# Connects to HOST:PORT until something accepts, for at most WAIT_S seconds: exit 0 once it does, else 1.
PORT_ANSWERS = (
    "import socket, sys, time\n"
    "host, port, end = sys.argv[1], int(sys.argv[2]), time.monotonic() + float(sys.argv[3])\n"
    "while True:\n"
    "    try:\n        socket.create_connection((host, port), timeout=1).close()\n        sys.exit(0)\n"
    "    except OSError:\n"
    "        if time.monotonic() >= end:\n            sys.exit(1)\n"
    "        time.sleep(0.2)"
)


# The stop of one cluster's Ray on a node (argv: the cluster's GCS address, then `ray stop`'s command line).
# `ray stop` stops every Ray on the machine, by process names. Where none but this cluster's runs (the usual case),
# it is run, then what it missed of a Ray started moments before: a raylet's agents that are still importing (their
# command line is not yet `ray::...`, so `ray stop` passes them by) outlive it, waiting for a GCS that is gone.
# Where another Ray runs too (a local `ray.init()` of `raytrain train` beside a head on `localhost`, another
# cluster's node), `ray stop` would stop it as well: then only this cluster's processes are stopped. They are those
# whose command line names its GCS address or one of its sessions (every process of a `ray start` names its session),
# and their children (`ray::` workers, the dashboard's modules); the rest are another Ray's, or not known to be this
# cluster's, and are left as they are. The processes are read from /proc (Ray's own psutil is not importable outside
# Ray). They get SIGTERM and, once a grace period has passed, SIGKILL; exit 1 naming any that survive that. The text
# holds none of the words `ray stop` looks for in command lines (tests/unit): it would stop this script and its shell
# first.
STOP = textwrap.dedent("""\
    import ipaddress, os, re, signal, subprocess, sys, time
    # Joined here: `ray stop` finds processes by words in their command line, this one's and its shell's included.
    MARKS = tuple("/" + "/".join(p) for p in (("ray", "dashboard", "agent.py"), ("ray", "dashboard", "dashboard.py"),
                                              ("ray", "_private", "runtime_env", "agent", "main.py")))
    TITLE, CLIENT = "ray" + ":" * 2, ".".join(("ray", "util", "client", "server"))
    SESSION = re.compile(r"session_[0-9]{4}-[0-9]{2}-[0-9]{2}_[0-9]{2}-[0-9]{2}-[0-9]{2}_[0-9]+_[0-9]+")
    GCS = re.compile(r"--gcs[-_]address=([^ ]+)")
    def address(text):
        host, _, port = text.rpartition(":")
        try:
            ip = ipaddress.ip_address(host.strip("[]"))
            return (getattr(ip, "ipv4_mapped", None) or ip, int(port))
        except ValueError:
            return text
    OURS = address(sys.argv[1])
    def processes():
        found = {}
        for pid in filter(str.isdigit, os.listdir("/proc")):
            if int(pid) in (os.getpid(), os.getppid()):
                continue
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    args = f.read().decode(errors="replace").split("\\0")
                with open(f"/proc/{pid}/stat") as f:
                    stat = f.read()
            except OSError:
                continue
            end = stat.rfind(")")
            comm, (state, ppid) = stat[stat.find("(") + 1:end], stat[end + 2:].split()[:2]
            if state == "Z":
                continue
            text = " ".join(args)
            gcs = {address(a) for a in GCS.findall(text)}
            if CLIENT in text:
                gcs |= {address(a) for a in re.findall(r"--address=([^ ]+)", text)}
            served = re.search(r"--gcs_server_port=([0-9]+)", text), re.search(r"--node-ip-address=([^ ]+)", text)
            if comm == "gcs_server" and all(served):
                gcs.add(address(served[1][1] + ":" + served[0][1]))
            ray = (comm in ("raylet", "gcs_server") or args[0].startswith(TITLE) or any(a.endswith(MARKS) for a in args))
            found[int(pid)] = (int(ppid), ray, gcs, set(SESSION.findall(text)))
        return found
    def owners(found):
        # Each process: True (this cluster's), False (another Ray's) or None (not known), children as their parent.
        sessions = set().union(*(s for _, _, gcs, s in found.values() if OURS in gcs))
        own = {pid: True if OURS in gcs or s & sessions else False if gcs or s else None
               for pid, (_, _, gcs, s) in found.items()}
        def owner(pid):
            seen = set()
            while pid in found and own[pid] is None and pid not in seen:
                seen.add(pid)
                pid = found[pid][0]
            return own.get(pid)
        return {pid: owner(pid) for pid in found}
    def left(found, only_ours):
        said = owners(found)
        return [pid for pid, (_, ray, _, _) in found.items() if said[pid] is True or (ray and not only_ours)]
    found = processes()
    said = owners(found)
    other = sorted(set().union(*(found[pid][3] for pid in found if said[pid] is False))) or \\
        sorted(pid for pid in found if said[pid] is False)
    if other:
        print(f"note: another Ray runs here too ({', '.join(map(str, other))}), which `ray stop` would stop as well: "
              "stopped only this cluster's processes", file=sys.stderr)
        rc, grace = 0, 10
    else:
        rc, grace = subprocess.run(sys.argv[2:]).returncode, 3
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in left(processes(), bool(other)):
            try:
                os.kill(pid, sig)
            except OSError:
                pass
        end = time.monotonic() + grace
        while left(processes(), bool(other)) and time.monotonic() < end:
            time.sleep(0.1)
        grace = 3
    alive = left(processes(), bool(other))
    if alive:
        print("still running after the stop: " + ", ".join(map(str, alive)), file=sys.stderr)
    sys.exit(1 if alive else rc)
""")


class Shell(str):
    """A shell word made here from quoted parts (only `"$HOME"` is left for the node's shell to expand)."""


class Command(str):
    """A command line, with what it answers on a node where all is well: a dry run's answer."""

    dry_stdout: str
    dry_returncode: int

    def __new__(cls, text: str, *, dry_stdout: str = "", dry_returncode: int = 0) -> Command:
        command = super().__new__(cls, text)
        command.dry_stdout, command.dry_returncode = dry_stdout, dry_returncode
        return command


def line(*words: str) -> str:
    """The one seam where a command line is assembled: every word is quoted unless it is a `Shell` word."""
    return " ".join(w if isinstance(w, Shell) else shlex.quote(str(w)) for w in words)


def _home(*parts: str) -> Shell:
    """`"$HOME"/PARTS`: the home directory expanded on the node, the rest quoted."""
    return Shell('"$HOME"/' + shlex.quote(posixpath.join(*parts)))


def token_dir(cfg: ClusterConfig) -> Shell:
    """Where the token lives on every node and on the driver (a shell word, `$HOME` expanded by the node's shell)."""
    return _home(posixpath.dirname(cfg.token_path))


def _token_file(cfg: ClusterConfig) -> Shell:
    return _home(cfg.token_path)


def ray_bin(cfg: ClusterConfig) -> str:
    py = cfg.python_path
    return posixpath.join(posixpath.dirname(py), "ray") if posixpath.isabs(py) else "ray"


def env_words(cfg: ClusterConfig, **extra: str) -> list[str]:
    """`env K=V ...` for every Ray process: the same auth mode and token *path* everywhere (never the token)."""
    env = {"RAY_AUTH_MODE": cfg.auth.mode, "RAY_USAGE_STATS_ENABLED": "0", **cfg.env, **extra}
    words: list[str] = ["env", *(f"{k}={v}" for k, v in env.items())]
    if cfg.auth.mode == "token":
        words.append(Shell("RAY_AUTH_TOKEN_PATH=" + _token_file(cfg)))
    return words


def env_prefix(cfg: ClusterConfig) -> str:
    """`env_words` as shell text, to put before a command."""
    return line(*env_words(cfg))


def _node_args(cfg: ClusterConfig, node: NodeConfig) -> list[str]:
    args = [f"--node-ip-address={node.ip}"]
    if node.num_cpus is not None:
        args.append(f"--num-cpus={int(node.num_cpus)}")
    if node.num_gpus is not None:
        args.append(f"--num-gpus={int(node.num_gpus)}")
    if node.resources:
        args.append(f"--resources={json.dumps(node.resources, separators=(',', ':'))}")
    if node.labels:
        args.append(f"--labels={','.join(f'{k}={v}' for k, v in node.labels.items())}")
    if node.object_store_memory:
        args.append(f"--object-store-memory={node.object_store_memory}")
    for key, value in cfg.ports.model_dump(exclude_none=True).items():
        if key == "ray_client_server_port" and node is not cfg.head:
            continue
        args.append(f"--{key.replace('_', '-')}={value}")
    args.append("--disable-usage-stats")
    return args


def start_head(cfg: ClusterConfig) -> str:
    h = cfg.head
    args = ["start", "--head", f"--port={h.port}", *_node_args(cfg, h)]
    args.append(f"--include-dashboard={'true' if h.dashboard.enabled else 'false'}")
    if h.dashboard.enabled:
        args += [f"--dashboard-host={h.dashboard.host}", f"--dashboard-port={h.dashboard.port}"]
    return line(*env_words(cfg), ray_bin(cfg), *args)


def start_worker(cfg: ClusterConfig, node: NodeConfig) -> str:
    return line(*env_words(cfg), ray_bin(cfg), "start", f"--address={cfg.address}", *_node_args(cfg, node))


def stop(cfg: ClusterConfig) -> str:
    """The cluster's Ray stopped on a node: `ray stop`, and the agents it may miss of a Ray that has just started;
    where another Ray runs there too, only this cluster's processes (STOP)."""
    return line(cfg.python_path, "-c", STOP, cfg.address, *env_words(cfg), ray_bin(cfg), "stop")


@functools.cache
def this_machine() -> dict[str, str]:
    """What `probe` prints, for this machine: its Python and Ray versions and its hostname."""
    from importlib import metadata

    return {"python": platform.python_version(), "ray": metadata.version("ray"), "hostname": platform.node()}


def probe(cfg: ClusterConfig) -> Command:
    """Prints the node's Python and Ray versions and hostname as JSON (a healthy node: those of this machine)."""
    return Command(line(cfg.python_path, "-c", PROBE), dry_stdout=json.dumps(this_machine()))


def ports_free(cfg: ClusterConfig, ports: list[int]) -> Command:
    """Prints the ports of `ports` that are in use, as a JSON list."""
    return Command(line(cfg.python_path, "-c", PORT_FREE, *map(str, ports)), dry_stdout="[]")


def gcs_answers(cfg: ClusterConfig, wait_s: float) -> Command:
    """Run on the head: exits 0 as soon as the head's GCS port accepts a connection, 1 after `wait_s` s."""
    return Command(line(cfg.python_path, "-c", PORT_ANSWERS, cfg.head.ip, str(cfg.head.port), f"{wait_s:g}"))


def install_token(cfg: ClusterConfig) -> str:
    """Reads the token on stdin into a 0600 file: the token never appears on a command line.

    Every folder it creates is 0700 (umask 077), and the cluster's own folder is made 0700 even if it existed.
    """
    d, f = token_dir(cfg), _token_file(cfg)
    return (f"umask 077 && {line('mkdir', '-p', d)} && {line('chmod', '700', d)} && {line('cat')} > {f} "
            f"&& {line('chmod', '600', f)}")


def netcheck(cfg: ClusterConfig, size_mb: float, pings: int) -> str:
    """Run on the head: `python -m raytrain.cluster.netcheck` as a driver of the cluster."""
    return line(*env_words(cfg, RAY_ADDRESS=cfg.address), cfg.python_path, "-m", "raytrain.cluster.netcheck",
                "--size-mb", f"{size_mb:g}", "--pings", str(pings))


@dataclass(frozen=True)
class Marker:
    """The shared-storage check: a file holding a random token, written in `directory` on one machine and
    read on the others. Whoever reads the token back sees the same directory; any other answer, a different one."""

    directory: str
    token: str = field(default_factory=lambda: uuid.uuid4().hex)

    @property
    def path(self) -> str:
        return posixpath.join(self.directory, ".raytrain_shared_check_" + self.token)

    def seen_in(self, text: str) -> bool:
        """Whether `text`, the file as read on another machine, is this marker."""
        return text.strip() == self.token


MISSING_DIR_RC = 3


def write_marker(marker: Marker, create: bool = False) -> str:
    """Write the shared-storage marker. Without `create`, a missing directory exits MISSING_DIR_RC."""
    path = marker.directory
    first = line("mkdir", "-p", path) if create else f"{{ {line('test', '-d', path)} || exit {MISSING_DIR_RC}; }}"
    return f"{first} && {line('printf', '%s', marker.token)} > {line(marker.path)}"


def read_marker(marker: Marker) -> Command:
    return Command(line("cat", marker.path), dry_stdout=marker.token)


def remove_marker(marker: Marker) -> str:
    return line("rm", "-f", marker.path)


DEFAULT_EXPORT = "/nfsroot"
DEFAULT_EXPORT_OPTIONS = "rw,sync,no_subtree_check,no_root_squash"


def _nfs(cfg: ClusterConfig) -> tuple[NFSConfig, str]:
    """`storage.nfs` and its mount point, for the steps that run only when the cluster has one."""
    nfs, point = cfg.storage.nfs, cfg.storage.mount_point
    assert nfs is not None and point is not None, "the cluster has no storage.nfs"
    return nfs, point


def nfs_share(cfg: ClusterConfig) -> str:
    """`SERVER:EXPORT`, the source of the mount."""
    nfs, _ = _nfs(cfg)
    return f"{nfs.server}:{nfs.export}"


def nfs_probe(cfg: ClusterConfig) -> Command:
    """Prints what is mounted at the mount point (`SOURCE FSTYPE`); exits 1 when nothing is."""
    _, point = _nfs(cfg)
    return Command(line("findmnt", "-n", "-o", "SOURCE,FSTYPE", "--mountpoint", point), dry_returncode=1)


def nfs_mount(cfg: ClusterConfig) -> str:
    """The mount itself, as a lab's admin would type it (needs root: `storage.nfs.sudo` adds `sudo -n`)."""
    nfs, point = _nfs(cfg)
    sudo = ["sudo", "-n"] if nfs.sudo else []
    return f"{line(*sudo, 'mkdir', '-p', point)} && {line(*sudo, 'mount', '-t', 'nfs', '-o', nfs.options, nfs_share(cfg), point)}"


def nfs_unmount(cfg: ClusterConfig) -> str:
    """Undo `nfs_mount` (the mount point folder stays): what `up` runs where it mounted and then refused."""
    nfs, point = _nfs(cfg)
    sudo = ["sudo", "-n"] if nfs.sudo else []
    return line(*sudo, "umount", point)


def is_nfs_server(cfg: ClusterConfig, node: NodeConfig) -> bool:
    """Whether `node` is the NFS server and uses the export directory in place (no mount of its own share)."""
    nfs, point = _nfs(cfg)
    return nfs.server in (node.host, node.ip) and posixpath.normpath(point) == posixpath.normpath(nfs.export)


def exports_line(cfg: ClusterConfig, export: str | None = None, options: str | None = None) -> str:
    """The server's /etc/exports line: the export directory, then each node's address (once) with its options.

    Never `*`: only the cluster's nodes may mount the share.
    """
    nfs = cfg.storage.nfs
    export = export or (nfs.export if nfs else DEFAULT_EXPORT)
    options = options or (nfs.export_options if nfs else DEFAULT_EXPORT_OPTIONS)
    if not EXPORT_PATH.fullmatch(export):
        raise ConfigError(f"the export {export!r} must be an absolute path of letters, digits and `._/-`")
    if not OPTIONS_RE.fullmatch(options):
        raise ConfigError(f"the export options {options!r} must be a comma-separated option list without spaces or quotes")
    addresses = list(dict.fromkeys(node.ip for node in cfg.nodes))
    for address in addresses:
        try:
            check_single_host(address)
        except ValueError as exc:
            raise ConfigError(f"cannot export the share to a node address: {exc}") from None
    return f"{export} " + " ".join(f"{address}({options})" for address in addresses)


# Asks the GCS directly (what `ray status` does): about 1 s, where connecting a driver with ray.init() takes
# 2-3 s, and `up` polls this until every node has joined. ray.init() stays as the fallback.
NODES_SCRIPT = (
    "import json, os, socket, sys\n"
    "host, port = os.environ[\"RAY_ADDRESS\"].rsplit(\":\", 1)\n"
    "host = host[1:-1] if host.startswith(\"[\") else host  # an IPv6 head: [2001:db8::10]:6379\n"
    "try:\n    socket.create_connection((host, int(port)), timeout=3).close()\n"
    "except OSError as e:\n    print(json.dumps(None)); sys.exit(0)\n"
    "try:\n"
    "    from ray._raylet import GcsClient\n"
    "    from ray.core.generated.gcs_pb2 import GcsNodeInfo\n"
    "    info = GcsClient(address=os.environ[\"RAY_ADDRESS\"]).get_all_node_info(timeout=30)\n"
    "    nodes = [{\"ip\": n.node_manager_address, \"alive\": n.state == GcsNodeInfo.ALIVE, \"resources\": dict(n.resources_total),"
    " \"hostname\": n.node_manager_hostname} for n in info.values()]\n"
    "except (ImportError, AttributeError, TypeError):\n"
    "    import ray\n"
    "    ray.init(logging_level=\"ERROR\", log_to_driver=False)\n"
    "    nodes = [{\"ip\": n[\"NodeManagerAddress\"], \"alive\": n[\"Alive\"], \"resources\": n.get(\"Resources\", {}),"
    " \"hostname\": n.get(\"NodeManagerHostname\")} for n in ray.nodes()]\n"
    "print(json.dumps(nodes))"
)


def list_nodes(cfg: ClusterConfig) -> Command:
    """Run on the head: the nodes the GCS knows, as JSON (all is well: every node of the file alive)."""
    alive = [{"ip": n.ip, "alive": True, "resources": {}, "hostname": n.host} for n in cfg.nodes]
    return Command(line(*env_words(cfg, RAY_ADDRESS=cfg.address), cfg.python_path, "-c", NODES_SCRIPT),
                   dry_stdout=json.dumps(alive))


# Each pinnable port (a key of `ports:`) and what it is; all but the Ray Client's are bound on every node.
PORT_LABELS = {
    "node_manager_port": "raylet", "object_manager_port": "object manager",
    "dashboard_agent_listen_port": "dashboard agent HTTP", "dashboard_agent_grpc_port": "dashboard agent gRPC",
    "metrics_export_port": "metrics", "runtime_env_agent_port": "runtime env agent",
    "ray_client_server_port": "Ray Client (head)",
}
NODE_PORTS = tuple(key for key in PORT_LABELS if key != "ray_client_server_port")


def ports_to_check(cfg: ClusterConfig, node: NodeConfig) -> list[int]:
    """The fixed ports `ray start` will bind on this node: the pinned ones, and on the head its own."""
    wanted: list[int] = [getattr(cfg.ports, key) for key in NODE_PORTS if getattr(cfg.ports, key)]
    if node is cfg.head:
        wanted = [cfg.head.port] + ([cfg.head.dashboard.port] if cfg.head.dashboard.enabled else []) + wanted
        if cfg.ports.ray_client_server_port:
            wanted.append(cfg.ports.ray_client_server_port)
    return list(dict.fromkeys(wanted))


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # the schema takes only addresses
        return False


def firewall_ports(cfg: ClusterConfig) -> list[tuple[str, str]]:
    """(port or range, what) pairs to open between the nodes."""
    p = cfg.ports
    out = [(str(cfg.head.port), "GCS (head)")]
    if cfg.head.dashboard.enabled and not _loopback(cfg.head.dashboard.host):
        # on a loopback address no other machine reaches it (`raytrain cluster dashboard` forwards it over SSH)
        out.append((str(cfg.head.dashboard.port), f"dashboard (head, listening on {cfg.head.dashboard.host})"))
    # Unpinned, Ray picks a random free port, except for these two fixed defaults.
    ray_defaults = {"dashboard_agent_listen_port": "52365 (Ray's default)", "ray_client_server_port": "10001 (Ray's default)"}
    for key, what in PORT_LABELS.items():
        value = getattr(p, key)
        out.append((str(value) if value else ray_defaults.get(key, "random"), what))
    if p.min_worker_port or p.max_worker_port:
        out.append((f"{p.min_worker_port or 10002}-{p.max_worker_port or 19999}", "worker processes"))
    else:
        out.append(("10002-19999", "worker processes (Ray's default range)"))
    return out

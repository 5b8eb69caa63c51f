"""What to run where: the exact shell commands for each node, built from a ClusterConfig (pure, no I/O)."""

from __future__ import annotations

import json
import posixpath
import shlex

from raytrain.config.cluster import ClusterConfig, NodeConfig
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


def token_dir(cfg: ClusterConfig) -> str:
    """Where the token lives on every node and on the driver (shell form, expanded by the node's shell)."""
    return f"$HOME/.raytrain/clusters/{cfg.name}"


def ray_bin(cfg: ClusterConfig) -> str:
    py = cfg.python_path
    return posixpath.join(posixpath.dirname(py), "ray") if posixpath.isabs(py) else "ray"


def env_prefix(cfg: ClusterConfig) -> str:
    """Environment for every Ray process: the same auth mode and token *path* everywhere (never the token)."""
    env = {"RAY_AUTH_MODE": cfg.auth.mode, "RAY_USAGE_STATS_ENABLED": "0", **cfg.env}
    parts = [f"{k}={shlex.quote(str(v))}" for k, v in env.items()]
    if cfg.auth.mode == "token":
        parts.append(f'RAY_AUTH_TOKEN_PATH="{token_dir(cfg)}/auth_token"')
    return "env " + " ".join(parts)


def _node_args(cfg: ClusterConfig, node: NodeConfig) -> list[str]:
    args = [f"--node-ip-address={node.ip}"]
    if node.num_cpus is not None:
        args.append(f"--num-cpus={int(node.num_cpus)}")
    if node.num_gpus is not None:
        args.append(f"--num-gpus={int(node.num_gpus)}")
    if node.resources:
        args.append(f"--resources={shlex.quote(json.dumps(node.resources, separators=(',', ':')))}")
    if node.labels:
        args.append(f"--labels={shlex.quote(','.join(f'{k}={v}' for k, v in node.labels.items()))}")
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
    return f"{env_prefix(cfg)} {ray_bin(cfg)} " + " ".join(args)


def start_worker(cfg: ClusterConfig, node: NodeConfig) -> str:
    args = ["start", f"--address={cfg.address}", *_node_args(cfg, node)]
    return f"{env_prefix(cfg)} {ray_bin(cfg)} " + " ".join(args)


def stop(cfg: ClusterConfig) -> str:
    return f"{env_prefix(cfg)} {ray_bin(cfg)} stop"


def probe(cfg: ClusterConfig) -> str:
    return f"{cfg.python_path} -c {shlex.quote(PROBE)}"


def ports_free(cfg: ClusterConfig, ports: list[int]) -> str:
    return f"{cfg.python_path} -c {shlex.quote(PORT_FREE)} " + " ".join(str(p) for p in ports)


def install_token(cfg: ClusterConfig) -> str:
    """Reads the token on stdin into a 0600 file: the token never appears on a command line."""
    d = token_dir(cfg)
    return f'umask 077 && mkdir -p "{d}" && cat > "{d}/auth_token" && chmod 600 "{d}/auth_token"'


MISSING_DIR_RC = 3


def write_marker(path: str, token: str, create: bool = False) -> str:
    """Write the shared-storage marker. Without `create`, a missing directory exits MISSING_DIR_RC."""
    q = shlex.quote(path)
    first = f"mkdir -p {q}" if create else f"{{ test -d {q} || exit {MISSING_DIR_RC}; }}"
    return f"{first} && printf %s {shlex.quote(token)} > {shlex.quote(posixpath.join(path, '.raytrain_shared_check_' + token))}"


def read_marker(path: str, token: str) -> str:
    return f"cat {shlex.quote(posixpath.join(path, '.raytrain_shared_check_' + token))}"


def remove_marker(path: str, token: str) -> str:
    return f"rm -f {shlex.quote(posixpath.join(path, '.raytrain_shared_check_' + token))}"


DEFAULT_EXPORT = "/nfsroot"
DEFAULT_EXPORT_OPTIONS = "rw,sync,no_subtree_check,no_root_squash"


def nfs_share(cfg: ClusterConfig) -> str:
    """`SERVER:EXPORT`, the source of the mount."""
    return f"{cfg.storage.nfs.server}:{cfg.storage.nfs.export}"


def nfs_probe(cfg: ClusterConfig) -> str:
    """Prints what is mounted at the mount point (`SOURCE FSTYPE`); exits 1 when nothing is."""
    return f"findmnt -n -o SOURCE,FSTYPE --mountpoint {shlex.quote(cfg.storage.mount_point)}"


def nfs_mount(cfg: ClusterConfig) -> str:
    """The mount itself, as a lab's admin would type it (needs root: `storage.nfs.sudo` adds `sudo -n`)."""
    nfs, point = cfg.storage.nfs, shlex.quote(cfg.storage.mount_point)
    sudo = "sudo -n " if nfs.sudo else ""
    return f"{sudo}mkdir -p {point} && {sudo}mount -t nfs -o {shlex.quote(nfs.options)} {shlex.quote(nfs_share(cfg))} {point}"


def is_nfs_server(cfg: ClusterConfig, node: NodeConfig) -> bool:
    """Whether `node` is the NFS server and uses the export directory in place (no mount of its own share)."""
    nfs = cfg.storage.nfs
    return nfs.server in (node.host, node.ip) and posixpath.normpath(cfg.storage.mount_point) == posixpath.normpath(nfs.export)


def exports_line(cfg: ClusterConfig, export: str | None = None, options: str | None = None) -> str:
    """The server's /etc/exports line: the export directory, then each node's address (once) with its options.

    Never `*`: only the cluster's nodes may mount the share.
    """
    nfs = cfg.storage.nfs
    export = export or (nfs.export if nfs else DEFAULT_EXPORT)
    options = options or (nfs.export_options if nfs else DEFAULT_EXPORT_OPTIONS)
    addresses = list(dict.fromkeys(node.ip for node in cfg.nodes))
    wild = [a for a in addresses if any(c in a for c in "*?[]")]
    if wild:
        raise ConfigError(f"a node address is a wildcard ({', '.join(wild)}): give each node's own address")
    return f"{export} " + " ".join(f"{address}({options})" for address in addresses)


# Asks the GCS directly (what `ray status` does): about 1 s, where connecting a driver with ray.init() takes
# 2-3 s, and `up` polls this until every node has joined. ray.init() stays as the fallback.
NODES_SCRIPT = (
    "import json, os, socket, sys\n"
    "host, port = os.environ[\"RAY_ADDRESS\"].rsplit(\":\", 1)\n"
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


def list_nodes(cfg: ClusterConfig) -> str:
    """Run on the head: the nodes the GCS knows, as JSON."""
    return f"{env_prefix(cfg)} RAY_ADDRESS={cfg.address} {cfg.python_path} -c {shlex.quote(NODES_SCRIPT)}"


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
    wanted = [getattr(cfg.ports, key) for key in NODE_PORTS if getattr(cfg.ports, key)]
    if node is cfg.head:
        wanted = [cfg.head.port] + ([cfg.head.dashboard.port] if cfg.head.dashboard.enabled else []) + wanted
        if cfg.ports.ray_client_server_port:
            wanted.append(cfg.ports.ray_client_server_port)
    return list(dict.fromkeys(wanted))


def firewall_ports(cfg: ClusterConfig) -> list[tuple[str, str]]:
    """(port or range, what) pairs to open between the nodes."""
    p = cfg.ports
    out = [(str(cfg.head.port), "GCS (head)")]
    if cfg.head.dashboard.enabled:
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

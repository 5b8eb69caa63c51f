"""The cluster file of `raytrain cluster up FILE`: head and worker definitions, SSH, ports, storage, auth."""

from __future__ import annotations

import os
import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator


def this_machine_ip() -> str:
    """The address Ray would pick for a node on this machine (the one that routes outward)."""
    import socket

    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("10.255.255.255", 1))  # no packet is sent; this only picks a route
            return s.getsockname()[0]
    except OSError:
        try:
            return socket.gethostbyname(socket.gethostname())
        except OSError:
            return "127.0.0.1"


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)


class DashboardConfig(_Section):
    """Where the Ray dashboard listens on the head."""

    host: str = "127.0.0.1"
    """Listen address. 127.0.0.1 (default) keeps it private: reach it with `raytrain cluster dashboard`."""
    port: int = Field(8265, gt=0, lt=65536)
    """Listen port."""
    enabled: bool = True
    """Start the dashboard at all."""


class NodeConfig(_Section):
    """One machine of the cluster."""

    host: str
    """SSH target (a name from ~/.ssh/config, a hostname or an address), or `localhost` to run here without SSH."""
    address: str | None = None
    """The node's IP address for Ray (`--node-ip-address`); default: `host` (for `localhost`, this machine's address)."""
    name: str | None = None
    """A short name for messages and `--node` (default: host)."""
    num_cpus: float | None = Field(None, ge=0)
    """CPUs this node offers to Ray (default: all it has)."""
    num_gpus: float | None = Field(None, ge=0)
    """GPUs this node offers to Ray (default: all it has)."""
    resources: dict[str, float] = Field(default_factory=dict)
    """Custom resources, e.g. `{node_m8: 1}` to pin work to this node."""
    labels: dict[str, str] = Field(default_factory=dict)
    """Node labels for label-based scheduling."""
    object_store_memory: int | None = Field(None, gt=0)
    """Bytes for the object store (Ray's default: 30% of RAM)."""

    @property
    def node_name(self) -> str:
        return self.name or self.host

    @property
    def ip(self) -> str:
        if self.address:
            return self.address
        if self.host in ("localhost", "127.0.0.1"):
            return this_machine_ip()
        return self.host


class HeadConfig(NodeConfig):
    """The head node: GCS, dashboard, and a node like the others."""

    port: int = Field(6379, gt=0, lt=65536)
    """GCS port workers and drivers connect to (`ray start --head --port`)."""
    dashboard: DashboardConfig = Field(default_factory=DashboardConfig)
    """The Ray dashboard."""


class SSHConfig(_Section):
    """How to reach the nodes (options not given here come from ~/.ssh/config)."""

    user: str | None = None
    """Login user."""
    port: int | None = Field(None, gt=0, lt=65536)
    """SSH port."""
    identity_file: str | None = None
    """Private key file."""
    connect_timeout: int = Field(10, gt=0)
    """Seconds before an unreachable host counts as failed."""
    host_key_checking: Literal["yes", "accept-new"] = "yes"
    """`yes` (known hosts only) or `accept-new` (trust a host's key the first time). Never off."""
    config_file: str | None = None
    """An ssh_config file to use instead of ~/.ssh/config."""


class PortsConfig(_Section):
    """Fixed ports, so a firewall can be opened for them (`up` prints the list)."""

    node_manager_port: int | None = None
    """Raylet port on every node."""
    object_manager_port: int | None = None
    """Object manager port on every node."""
    min_worker_port: int | None = None
    """Lowest port of worker processes."""
    max_worker_port: int | None = None
    """Highest port of worker processes."""
    dashboard_agent_listen_port: int | None = None
    """Dashboard agent HTTP port on every node."""
    dashboard_agent_grpc_port: int | None = None
    """Dashboard agent gRPC port on every node."""
    metrics_export_port: int | None = None
    """Prometheus metrics port on every node."""
    runtime_env_agent_port: int | None = None
    """Runtime-env agent port on every node."""
    ray_client_server_port: int | None = None
    """Ray Client server port on the head."""


# An option list for `mount -o` or an /etc/exports entry: no spaces, quotes or shell syntax.
OPTIONS_RE = re.compile(r"^[A-Za-z0-9_=.,:/+-]+$")
_SERVER = re.compile(r"^([A-Za-z0-9_.-]+|\[[0-9A-Fa-f:.]+\])$")


class NFSConfig(_Section):
    """An NFS share that `raytrain cluster up` mounts on every node where it is not mounted yet."""

    server: str
    """The NFS server's address or hostname as the nodes reach it (an IPv6 address in brackets)."""
    export: str
    """The exported directory on the server, e.g. `/nfsroot` (the share is `SERVER:EXPORT`)."""
    options: str = "nolock"
    """Mount options (`mount -t nfs -o OPTIONS`)."""
    export_options: str = "rw,sync,no_subtree_check,no_root_squash"
    """Options of each node in the server's /etc/exports line (`raytrain nfs exports`)."""
    mount_point: str | None = None
    """Where the share is mounted on every node (default: `storage.path`); `storage.path` must be in it."""
    sudo: bool = False
    """Run `mkdir` and `mount` through `sudo -n` (the SSH user is not root and may sudo without a password)."""
    mount_timeout_s: float = Field(60, gt=0)
    """Seconds a mount may take on a node before it counts as failed."""

    @field_validator("export", "mount_point")
    @classmethod
    def _absolute(cls, value):
        # Used on remote nodes and quoted there: `~` would not be expanded.
        if value is not None and not value.startswith("/"):
            raise ValueError("must be an absolute path (starting with /)")
        return value

    @field_validator("server")
    @classmethod
    def _server(cls, value):
        if not _SERVER.match(value):
            raise ValueError("must be a hostname or an address (an IPv6 address in brackets)")
        return value

    @field_validator("options", "export_options")
    @classmethod
    def _options(cls, value):
        if not OPTIONS_RE.match(value):
            raise ValueError("must be a comma-separated option list without spaces or quotes")
        return value


class StorageConfig(_Section):
    """The shared checkpoint directory."""

    path: str | None = None
    """Absolute path of the shared (NFS) directory, the same on every node. It must exist (with `nfs`, `up` creates it on the share)."""
    nfs: NFSConfig | None = None
    """The NFS share to mount at `path` (or `nfs.mount_point`) on every node; without it, mounting is up to you."""

    @field_validator("path")
    @classmethod
    def _absolute(cls, value):
        if value is not None and not os.path.isabs(os.path.expanduser(value)):
            raise ValueError(f"must be an absolute path, got {value!r}")
        return value

    @model_validator(mode="after")
    def _nfs_needs_path(self):
        if self.nfs is None:
            return self
        if self.path is None or not self.path.startswith("/"):
            raise ValueError("storage.nfs needs storage.path, the checkpoint directory on the share, starting with /")
        mount_point = self.nfs.mount_point
        if mount_point is not None:
            inside = os.path.normpath(self.path) + "/"
            if not inside.startswith(os.path.normpath(mount_point).rstrip("/") + "/"):
                raise ValueError(f"storage.path {self.path} is not inside nfs.mount_point {mount_point}")
        return self

    @property
    def mount_point(self) -> str | None:
        """Where the NFS share is mounted on every node (None without `nfs`)."""
        if self.nfs is None:
            return None
        return self.nfs.mount_point or self.path


class AuthConfig(_Section):
    """Ray token authentication."""

    mode: Literal["token", "disabled"] = "token"
    """`token` (default): every Ray process and driver needs the cluster's token. `disabled`: anyone who reaches the ports controls the cluster."""


class ClusterConfig(BaseModel):
    """A raytrain cluster: `raytrain cluster up FILE`."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    """Cluster name (letters, digits, `_.-`): names the token and state under ~/.raytrain/clusters/<name>."""
    head: HeadConfig
    """The head node."""
    workers: list[NodeConfig] = Field(default_factory=list)
    """Worker nodes."""
    ssh: SSHConfig = Field(default_factory=SSHConfig)
    """SSH settings for every non-local node."""
    python: str | None = None
    """Absolute path of the Python with Ray on every node (default: `python3` on PATH)."""
    venv: str | None = None
    """Absolute path of a virtualenv with Ray on every node (sets `python` to VENV/bin/python)."""
    env: dict[str, str] = Field(default_factory=dict)
    """Extra environment variables for every Ray process."""
    ports: PortsConfig = Field(default_factory=PortsConfig)
    """Fixed ports."""
    storage: StorageConfig = Field(default_factory=StorageConfig)
    """The shared checkpoint directory."""
    auth: AuthConfig = Field(default_factory=AuthConfig)
    """Authentication."""
    start_timeout_s: float = Field(60, gt=0)
    """Seconds `up` waits for every node to be alive."""

    @model_validator(mode="after")
    def _checks(self):
        for key in ("python", "venv"):
            value = getattr(self, key)
            if value is not None and not os.path.isabs(value):
                raise ValueError(f"{key} must be an absolute path, got {value!r}")
        if self.python and self.venv:
            raise ValueError("give `python` or `venv`, not both")
        names = [n.node_name for n in self.nodes]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"node names must be unique; repeated: {', '.join(dupes)} (set `name:` on each)")
        return self

    @property
    def nodes(self) -> list[NodeConfig]:
        return [self.head, *self.workers]

    @property
    def python_path(self) -> str:
        if self.venv:
            return f"{self.venv.rstrip('/')}/bin/python"
        return self.python or "python3"

    @property
    def address(self) -> str:
        return f"{self.head.ip}:{self.head.port}"


def load_cluster(path, overrides: list[str] | None = None, *, starting: bool = False, insecure: bool = False) -> ClusterConfig:
    """Read and check a cluster file. Raises ConfigError with file:line for every problem.

    starting: for `up` and its preflight `check`, which refuse a network-open dashboard with auth disabled
    unless `insecure`. Every other command (down, status, exec, --cluster) loads such a cluster as it is,
    so one started with --insecure can still be inspected and stopped.
    """
    from pydantic import ValidationError

    from raytrain.config.load import pydantic_issues
    from raytrain.config.source import apply_overrides, read_yaml
    from raytrain.errors import ConfigError, ConfigIssue

    source = read_yaml(path)
    apply_overrides(source, overrides or [])
    try:
        cfg = ClusterConfig.model_validate(source.data)
    except ValidationError as exc:
        raise ConfigError(pydantic_issues(exc, source, ClusterConfig)) from None
    d = cfg.head.dashboard
    if starting and d.enabled and d.host in ("0.0.0.0", "::") and cfg.auth.mode == "disabled" and not insecure:
        raise ConfigError([ConfigIssue(
            source.where(("head", "dashboard", "host")), "head.dashboard.host",
            "refusing a dashboard open to the network with auth disabled: its jobs API runs any shell command "
            "for anyone who reaches it (CVE-2023-48022). Use auth: {mode: token}, host 127.0.0.1 with "
            "`raytrain cluster dashboard`, or pass --insecure",
        )])
    return cfg

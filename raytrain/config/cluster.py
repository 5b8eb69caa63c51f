"""The cluster file of `raytrain cluster up FILE`: head and worker definitions, SSH, ports, storage, auth."""

from __future__ import annotations

import ipaddress
import os
import posixpath
import re
import socket
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from raytrain.config.yaml_bools import RefuseBoolsForNumbers

# What a cluster file may hold where a value ends up on a command line or in a file another program parses
# (ssh, a remote shell, /etc/exports). Every value is quoted where a command is assembled as well
# (raytrain.cluster.plan); these checks refuse what cannot be meant, with the reason.
_LABEL = r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)"
_HOSTNAME = re.compile(rf"^{_LABEL}(\.{_LABEL})*$")
_SSH_ALIAS = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")
_USER = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*\$?$")
_ENV_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_NODE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.:-]*$")
_RESOURCE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.:/-]*$")
RAY_OWN_RESOURCES = ("CPU", "GPU", "memory", "object_store_memory")


def resource_names_problem(names: Iterable[str], instead: str) -> str | None:
    """What is wrong with custom resource names (a node's `resources:`, an actor's custom resources): Ray's
    own (`CPU`, ...) are `instead`; anything but letters, digits and `_.:/-` reaches `ray start` and Ray."""
    bad = [k for k in names if not _RESOURCE.fullmatch(k)]
    if bad:
        return f"resource names must be letters, digits and `_.:/-`, starting with a letter or `_`: {bad}"
    reserved = [k for k in names if k in RAY_OWN_RESOURCES]
    return f"{reserved}: Ray's own resources, not custom ones: {instead}" if reserved else None
_LABEL_KEY = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9_./-]*[A-Za-z0-9])?$")
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([A-Za-z0-9_.-]*[A-Za-z0-9])?)?$")
EXPORT_PATH = re.compile(r"^/[A-Za-z0-9._/-]*$")
_CLUSTER_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")
OBJECT_STORE_MINIMUM = 75 * 1024 * 1024
"""The smallest object store `ray start` accepts (ray_constants.OBJECT_STORE_MINIMUM_MEMORY_BYTES)."""

# The hosts a node runs on without SSH: this machine.
LOCAL_HOSTS = ("localhost", "127.0.0.1")


def ip_address(value: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """`value` as an IP address in its canonical form (dotted quad, IPv6), else None.

    Raises:
        ValueError: an IPv6 address with a zone (`fe80::1%eth0`): the zone is an interface of one machine, which
            the other nodes do not have by that name, so no node or file of the cluster can share such an address.
    """
    try:
        address = ipaddress.ip_address(value)
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.scope_id is not None:
        raise ValueError(f"{value!r} has a zone (%{address.scope_id}): that names an interface of one machine, which "
                         "the other nodes do not have; give the node's global or unique-local address (a link-local "
                         "fe80:: address is reached through a zone only)")
    return address


def _numeric_form(value: str) -> bool:
    """Whether the C library would read `value` as an IPv4 address (`0`, `127.1`, `0x7f000001`, `010.0.0.1`)."""
    try:
        socket.inet_aton(value)
    except OSError:
        return False
    return True


def _has_control(value: str) -> bool:
    return any(ord(c) < 32 or ord(c) == 127 for c in value)


def _refuse_absolute_name(value: str) -> None:
    """A hostname in DNS's absolute form, with a final `.`: said as such (it was refused as no hostname at all)."""
    if value.endswith(".") and _HOSTNAME.fullmatch(value[:-1]):
        raise ValueError(f"ends with `.`: write the name without it, {value[:-1]}")


def check_hostname_or_ip(value: str) -> str:
    """An IP address, or an RFC 1123 hostname that no resolver would read as a number. Raises ValueError."""
    if ip_address(value) is not None:
        return value
    if len(value) <= 253 and _HOSTNAME.fullmatch(value):
        if _numeric_form(value) or value.rsplit(".", 1)[-1].isdigit():
            raise ValueError("is not a canonical IP address: write it as four decimal numbers, e.g. 10.0.0.5")
        return value
    _refuse_absolute_name(value)
    raise ValueError("must be an IP address (e.g. 10.0.0.5) or a hostname (letters, digits, `-` and `.`)")


def check_single_host(value: str) -> str:
    """One machine as an /etc/exports client: an IP address or a hostname, never a network, netgroup or wildcard."""
    if "/" in value or value.startswith("@") or any(c in value for c in "*?[]") or not value or value != value.strip() or any(c.isspace() for c in value):
        raise ValueError(f"{value!r} is not one machine: give each node's own IP address or hostname "
                         "(no networks a/b, @netgroups, wildcards or spaces)")
    if ip_address(value) is None and not (_SSH_ALIAS.fullmatch(value) and len(value) <= 253):
        raise ValueError(f"{value!r} is not an IP address or a hostname")
    return value


def _absolute_path(value: str, *, tilde: bool = False) -> str:
    if _has_control(value):
        raise ValueError("must not contain control characters (newlines, tabs, NUL)")
    if tilde and value.startswith("~/"):
        return os.path.expanduser(value)
    if not value.startswith("/"):
        raise ValueError("must be an absolute path (starting with /)" + (" or ~/" if tilde else "") + variable_hint(value, tilde=tilde))
    return value


def variable_hint(value: str, *, tilde: bool) -> str:
    """`: ...` saying that `$HOME` and its kind stay as written, for a path that starts with one, else nothing.
    `tilde`: the field takes `~/` (then `$HOME/x` becomes `~/x`)."""
    if not value.startswith("$"):
        return ""
    home = tilde and value.startswith(("$HOME/", "${HOME}/"))
    return (": raytrain expands no environment variable in a file (a value is used as written)"
            + (f"; write ~/{value.split('/', 1)[1]}" if home else "; write the path itself"))


def _path_from_home(value: str) -> str:
    return _absolute_path(value, tilde=True)


AbsolutePath = Annotated[str, AfterValidator(_absolute_path)]
"""A path used on the nodes and quoted there, where `~` would not be expanded: it must start with /."""
LocalPath = Annotated[str, AfterValidator(_path_from_home)]
"""A path on this machine: absolute, or `~/...` (expanded here)."""


def check_env(value: dict[str, str]) -> dict[str, str]:
    """Extra environment variables: names a shell accepts, values without a NUL byte, none of those raytrain sets
    for Ray itself (the auth mode, the token, the address: a value here replaced raytrain's, and
    `RAY_AUTH_MODE: disabled` turned token authentication off past the check of `auth.mode`). Raises ValueError."""
    bad = [k for k in value if not _ENV_KEY.fullmatch(k)]
    if bad:
        raise ValueError(f"variable names must be letters, digits and `_`, not starting with a digit: {bad}")
    nul = [k for k, v in value.items() if "\0" in str(v)]
    if nul:
        raise ValueError(f"values must not contain a NUL byte: {nul}")
    owned = [k for k in value if k.startswith("RAY_AUTH") or k == "RAY_ADDRESS"]
    if owned:
        raise ValueError(f"{owned}: set by raytrain itself for every Ray process: use `auth:` for authentication, "
                         "and leave these out")
    return value


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


class _Section(RefuseBoolsForNumbers):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, allow_inf_nan=False)


class DashboardConfig(_Section):
    """Where the Ray dashboard listens on the head."""

    host: str = "127.0.0.1"
    """Listen address (an IP address). 127.0.0.1 (default) keeps it private: reach it with `raytrain cluster dashboard`."""
    port: int = Field(default=8265, gt=0, lt=65536)
    """Listen port."""
    enabled: bool = True
    """Start the dashboard at all."""

    @field_validator("host")
    @classmethod
    def _ip(cls, value: str) -> str:
        if ip_address(value) is None:
            raise ValueError("must be an IP address: 127.0.0.1 (this machine only; `raytrain cluster dashboard` "
                             "tunnels to it), or one of the head's addresses, or 0.0.0.0 / :: for every interface")
        return value

    @property
    def open_to_network(self) -> bool:
        """Whether it listens on more than the loopback interface (0.0.0.0, ::, or a network address)."""
        return self.enabled and not self.loopback

    @property
    def loopback(self) -> bool:
        """Listens on the loopback interface only (127.0.0.0/8, ::1): reached from the head alone."""
        return self._address.is_loopback

    @property
    def unspecified(self) -> bool:
        """Listens on every interface (0.0.0.0, ::)."""
        return self._address.is_unspecified

    @property
    def _address(self) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
        address = ip_address(self.host)
        if address is None:  # only a model built without validation gets here
            raise ValueError(f"head.dashboard.host {self.host!r} is not an IP address")
        return address

    def url_host(self, head_ip: str) -> str:
        """The host of its URL from another machine (for every interface: the head's address; IPv6 in brackets)."""
        host = head_ip if self.unspecified else self.host
        return f"[{host}]" if ":" in host else host

    @property
    def tunnel_target(self) -> str:
        """Where an SSH tunnel from the head forwards to (`ssh -L PORT:THIS:PORT`)."""
        if self.unspecified:
            return "127.0.0.1"
        return f"[{self.host}]" if ":" in self.host else self.host


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
    """Bytes for the object store (Ray's default: 30% of RAM; at least 75 MiB)."""

    @field_validator("object_store_memory")
    @classmethod
    def _object_store(cls, value: int | None) -> int | None:
        if value is not None and value < OBJECT_STORE_MINIMUM:
            raise ValueError(f"must be at least {OBJECT_STORE_MINIMUM} bytes (75 MiB), Ray's minimum")
        return value

    @field_validator("host")
    @classmethod
    def _host(cls, value: str) -> str:
        if ip_address(value) is None and not (len(value) <= 253 and _SSH_ALIAS.fullmatch(value)):
            raise ValueError("must be an SSH alias, a hostname or an IP address: letters, digits and `_.-`, not "
                             "starting with `-` (the login user goes in ssh.user)")
        return value

    @field_validator("address")
    @classmethod
    def _address(cls, value: str | None) -> str | None:
        return None if value is None else check_hostname_or_ip(value)

    @field_validator("name")
    @classmethod
    def _name(cls, value: str | None) -> str | None:
        if value is not None and not (len(value) <= 64 and _NODE_NAME.fullmatch(value)):
            raise ValueError("must be letters, digits and `_.:-` (at most 64), not starting with `-` or `.`")
        return value

    @field_validator("resources")
    @classmethod
    def _resources(cls, value: dict[str, float]) -> dict[str, float]:
        if problem := resource_names_problem(value, "use num_cpus, num_gpus or object_store_memory instead"):
            raise ValueError(problem)
        nonfinite = [k for k, v in value.items() if not (v >= 0 and v != float("inf"))]
        if nonfinite:
            raise ValueError(f"resource amounts must be finite and >= 0: {nonfinite}")
        fractional = {k: v for k, v in value.items() if not float(v).is_integer()}
        if fractional:  # `ray start` refuses them ("Resource quantities must all be whole numbers")
            raise ValueError(f"must be whole numbers: a node offers Ray whole units (got {fractional})")
        return value

    @field_validator("num_cpus", "num_gpus")
    @classmethod
    def _whole(cls, value: float | None) -> float | None:
        # `ray start --num-cpus/--num-gpus` take integers: 1.5 became --num-cpus=1.
        if value is not None and not float(value).is_integer():
            raise ValueError("must be a whole number: a node offers Ray whole units")
        return value

    @field_validator("labels")
    @classmethod
    def _labels(cls, value: dict[str, str]) -> dict[str, str]:
        for key, val in value.items():
            if not (len(key) <= 253 and _LABEL_KEY.fullmatch(key)):
                raise ValueError(f"label key {key!r}: letters, digits and `_./-`, starting and ending with a letter or digit")
            if not (len(val) <= 63 and _LABEL_VALUE.fullmatch(val)):
                raise ValueError(f"label {key}'s value {val!r}: at most 63 letters, digits and `_.-`, starting and "
                                 "ending with a letter or digit")
        return value

    @property
    def node_name(self) -> str:
        return self.name or self.host

    @property
    def local(self) -> bool:
        """Whether the node is this machine, reached without SSH (host `localhost`)."""
        return self.host in LOCAL_HOSTS

    @property
    def ip(self) -> str:
        if self.address:
            return self.address
        if self.local:
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
    port: int | None = Field(default=None, gt=0, lt=65536)
    """SSH port."""
    identity_file: LocalPath | None = None
    """Private key file."""
    connect_timeout: int = Field(default=10, gt=0)
    """Seconds before an unreachable host counts as failed."""
    host_key_checking: Literal["yes", "accept-new"] = "yes"
    """`yes` (known hosts only) or `accept-new` (trust a host's key the first time). Never off."""
    config_file: LocalPath | None = None
    """An ssh_config file to use instead of ~/.ssh/config."""

    @field_validator("user")
    @classmethod
    def _user(cls, value: str | None) -> str | None:
        if value is not None and not (len(value) <= 32 and _USER.fullmatch(value)):
            raise ValueError("must be a user name: letters, digits and `_.-` (at most 32), starting with a letter or `_`")
        return value


def _port() -> Any:
    return Field(None, gt=0, lt=65536)


# Ray's own worker port range when `ports:` pins neither end.
DEFAULT_WORKER_PORTS = (10002, 19999)
RAY_DEFAULT_PORTS = {"dashboard_agent_listen_port": 52365, "ray_client_server_port": 10001}
"""The ports `ray start` binds where they are not pinned (the others it picks at random)."""


class PortsConfig(_Section):
    """Fixed ports, so a firewall can be opened for them (`up` prints the list)."""

    node_manager_port: int | None = _port()
    """Raylet port on every node."""
    object_manager_port: int | None = _port()
    """Object manager port on every node."""
    min_worker_port: int | None = _port()
    """Lowest port of worker processes."""
    max_worker_port: int | None = _port()
    """Highest port of worker processes."""
    dashboard_agent_listen_port: int | None = _port()
    """Dashboard agent HTTP port on every node."""
    dashboard_agent_grpc_port: int | None = _port()
    """Dashboard agent gRPC port on every node."""
    metrics_export_port: int | None = _port()
    """Prometheus metrics port on every node."""
    runtime_env_agent_port: int | None = _port()
    """Runtime-env agent port on every node."""
    ray_client_server_port: int | None = _port()
    """Ray Client server port on the head."""

    @property
    def worker_range(self) -> tuple[int, int]:
        """(lowest, highest) worker port, Ray's defaults where not pinned."""
        return (self.min_worker_port or DEFAULT_WORKER_PORTS[0], self.max_worker_port or DEFAULT_WORKER_PORTS[1])

    @field_validator("min_worker_port", "max_worker_port", "ray_client_server_port", "runtime_env_agent_port")
    @classmethod
    def _unprivileged(cls, value: int | None, info: ValidationInfo) -> int | None:
        if value is not None and value < 1024:  # `ray start` refused it with a traceback, once the head was starting
            raise ValueError(f"Ray takes {info.field_name} from 1024 to 65535 (its `ray start` refuses a lower one)")
        return value

    @model_validator(mode="after")
    def _range(self) -> PortsConfig:
        low, high = self.worker_range
        if low >= high:  # Ray: "max_worker_port must be higher than min_worker_port"
            raise ValueError(f"the worker port range is empty: min_worker_port {low} {'>' if low > high else '='} "
                             f"max_worker_port {high} (Ray takes a max_worker_port higher than min_worker_port)")
        return self


# An option list for `mount -o` or an /etc/exports entry: no spaces, quotes or shell syntax.
OPTIONS_RE = re.compile(r"^[A-Za-z0-9_=.,:/+-]+$")


_SYSTEM_FOLDERS = ("/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/run", "/sbin",
                   "/sys", "/usr")
"""The system's own folders: no share is mounted in them."""
_SYSTEM_TOPS = ("/", "/home", "/media", "/mnt", "/opt", "/root", "/srv", "/tmp", "/var", "/var/lib", "/var/log")
"""Folders a share mounted at would hide what they hold (a share goes in a folder of its own below them)."""


def plain_path(value: str) -> str:
    """`value` when it is one path written plainly (no `..`, `.` or `//`: `/nfsroot/../etc` was mounted over /etc).
    Raises ValueError."""
    plain = posixpath.normpath(value)
    if plain.startswith("//"):
        plain = "/" + plain.lstrip("/")
    if value.rstrip("/") != plain.rstrip("/") or (value != "/" and value.endswith("//")):
        raise ValueError(f"{value} is not written plainly ({plain} is what it names): write {plain}")
    return value


def system_folder(path: str) -> str | None:
    """Why no share may be mounted at `path` (a plain path): / or a folder of the system's own; else None."""
    if path in _SYSTEM_TOPS or path in _SYSTEM_FOLDERS or path.startswith(tuple(f + "/" for f in _SYSTEM_FOLDERS)):
        return (f"{path} is a folder of the system's own: the share mounted there would hide what it holds on every "
                "node; mount it at a folder of its own, e.g. /mnt/raytrain or /shared/raytrain")
    return None


def check_export(value: str) -> str:
    """An exported directory: one word of an /etc/exports line (whitespace or quotes would change what the line
    exports), written plainly, and not / nor a system folder (with rw and no_root_squash, every node would be root
    in the server's own files). Raises ValueError."""
    if not EXPORT_PATH.fullmatch(value):
        raise ValueError("must be an absolute path (starting with /) of letters, digits and `._/-`")
    plain_path(value)
    if system_folder(value.rstrip("/") or "/") is not None:
        raise ValueError(f"{value.rstrip('/') or '/'} is a folder of the server's own system: exported, every node "
                         "could write there (as root, with no_root_squash); export a folder of its own, e.g. /nfsroot "
                         "or /srv/raytrain")
    return value


def _mount_point(value: str) -> str:
    plain_path(value)
    if (problem := system_folder(value.rstrip("/") or "/")) is not None:
        raise ValueError(problem)
    return value


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
    mount_point: Annotated[AbsolutePath, AfterValidator(_mount_point)] | None = None
    """Where the share is mounted on every node (default: `storage.path`); `storage.path` must be in it."""
    sudo: bool = False
    """Run `mkdir` and `mount` through `sudo -n` (the SSH user is not root and may sudo without a password)."""
    mount_timeout_s: float = Field(60, gt=0, le=86400)
    """Seconds a mount may take on a node before it counts as failed."""

    @field_validator("export")
    @classmethod
    def _export(cls, value: str) -> str:
        return check_export(value)

    @field_validator("server")
    @classmethod
    def _server(cls, value: str) -> str:
        inner = value[1:-1] if value.startswith("[") and value.endswith("]") else None
        if inner is not None and isinstance(ip_address(inner), ipaddress.IPv6Address):
            return value
        if isinstance(ip_address(value), ipaddress.IPv6Address):
            # `2001:db8::1:/nfsroot` is no share mount reads (its last `:` is taken as part of the address)
            raise ValueError(f"an IPv6 address is written in brackets here: [{value}] (the share is [{value}]:EXPORT)")
        _refuse_absolute_name(value)
        try:
            return check_hostname_or_ip(value)
        except ValueError:
            raise ValueError("must be a hostname or an address (an IPv6 address in brackets)") from None

    @field_validator("options", "export_options")
    @classmethod
    def _options(cls, value: str) -> str:
        if not OPTIONS_RE.fullmatch(value):
            raise ValueError("must be a comma-separated option list without spaces or quotes")
        return value


class StorageConfig(_Section):
    """The shared checkpoint directory."""

    path: AbsolutePath | None = None
    """Absolute path of the shared (NFS) directory, the same on every node. It must exist (with `nfs`, `up` creates it on the share)."""
    nfs: NFSConfig | None = None
    """The NFS share to mount at `path` (or `nfs.mount_point`) on every node; without it, mounting is up to you."""

    @field_validator("path")
    @classmethod
    def _path(cls, value: str | None) -> str | None:
        return None if value is None else plain_path(value)

    @model_validator(mode="after")
    def _nfs_needs_path(self) -> StorageConfig:
        if self.nfs is None:
            return self
        if self.path is None:
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


class ClusterConfig(RefuseBoolsForNumbers):
    """A raytrain cluster: `raytrain cluster up FILE`."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True, allow_inf_nan=False)

    name: str
    """Cluster name (letters, digits, `_.-`, not starting with `.` or `-`): names the token and state under ~/.raytrain/clusters/<name>."""
    head: HeadConfig
    """The head node."""
    workers: list[NodeConfig] = Field(default_factory=list)
    """Worker nodes."""
    ssh: SSHConfig = Field(default_factory=SSHConfig)
    """SSH settings for every non-local node."""
    python: AbsolutePath | None = None
    """Absolute path of the Python with Ray on every node (default: `python3` on each node's PATH; when every node is `localhost`, the Python running raytrain)."""
    venv: AbsolutePath | None = None
    """Absolute path of a virtualenv with Ray on every node (sets `python` to VENV/bin/python)."""
    env: dict[str, str] = Field(default_factory=dict)
    """Extra environment variables for every Ray process (not RAY_AUTH_* nor RAY_ADDRESS: raytrain sets them; see `auth`)."""
    ports: PortsConfig = Field(default_factory=PortsConfig)
    """Fixed ports."""
    storage: StorageConfig = Field(default_factory=StorageConfig)
    """The shared checkpoint directory."""
    auth: AuthConfig = Field(default_factory=AuthConfig)
    """Authentication."""
    start_timeout_s: float = Field(60, gt=0, le=86400)
    """Seconds `up` waits for every node to be alive."""

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        # One path component: `..` or `a/b` would put the token outside ~/.raytrain/clusters/.
        if not (len(value) <= 64 and _CLUSTER_NAME.fullmatch(value)):
            raise ValueError("must be letters, digits and `_.-` (at most 64), not starting with `.` or `-`")
        return value

    @field_validator("env")
    @classmethod
    def _env(cls, value: dict[str, str]) -> dict[str, str]:
        return check_env(value)

    def problems(self) -> list[tuple[tuple[str | int, ...], str]]:
        """What the schema alone cannot see, as (key path, message): shared addresses, colliding ports."""
        out: list[tuple[tuple[str | int, ...], str]] = []
        if self.python and self.venv:
            out.append((("venv",), "give `python` or `venv`, not both (venv sets python to VENV/bin/python)"))
        where: dict[int, tuple[str | int, ...]] = {id(self.head): ("head",), **{id(w): ("workers", i) for i, w in enumerate(self.workers)}}
        named: dict[str, str] = {}
        for node in self.nodes:
            # A node's name is its host where `name:` is not set; names tell nodes apart in status, exec and logs.
            at = where[id(node)]
            if node.node_name in named:
                out.append((at + ("name" if node.name else "host",), f"{node.node_name} is also the name of "
                            f"{named[node.node_name]}: every node needs a name of its own (set `name:` on each)"))
            named.setdefault(node.node_name, "the head" if node is self.head else f"workers.{at[1]}")
        seen: dict[object, str] = {}
        for node in self.nodes:
            # By meaning: ::1 and 0:0:0:0:0:0:0:1 are one address.
            # ::ffff:192.168.1.10 is 192.168.1.10
            found = ip_address(node.ip)
            key = (getattr(found, "ipv4_mapped", None) or found) or node.ip.lower()
            if key in seen:
                field = "address" if node.address else "host"
                out.append((where[id(node)] + (field,), f"{node.node_name} has the same address as {seen[key]} "
                            f"({node.ip}): every node needs its own (`address:`)"))
            seen.setdefault(key, node.node_name)
        out += self._unreachable_addresses(where)
        if self.storage.nfs is not None and self.storage.nfs.mount_point is None and self.storage.path is not None:
            if (problem := system_folder(self.storage.path.rstrip("/") or "/")) is not None:  # mounted at the path
                out.append((("storage", "path"), f"{problem} (or set storage.nfs.mount_point, with storage.path in it)"))
        low, high = self.ports.worker_range
        pinned = "" if self.ports.min_worker_port or self.ports.max_worker_port else " (Ray's default)"
        for node in self.nodes:
            # What Ray binds where a port is not pinned, and refuses to share (RayParams: "Ray component client_server
            # is trying to use a port number 10001 that is used by other components"), once `ray start` runs.
            defaults = self._ray_defaults(node)
            by_port: dict[int, str] = {port: f"Ray's default port of ports.{key}, which is not pinned"
                                       for key, port in defaults}
            for key, port in defaults:
                if low <= port <= high and pinned == "":
                    out.append((("ports", "max_worker_port" if self.ports.max_worker_port else "min_worker_port"),
                                f"the worker port range {low}-{high} holds {port}, Ray's default port of ports.{key} "
                                f"on {node.node_name}: move the range, or pin ports.{key} outside it"))
            for what, port in self.node_ports(node).items():
                keys = tuple(what.split("."))
                if port in by_port:
                    out.append((keys, f"{what} {port} is also {by_port[port]} on {node.node_name}: every port of a "
                                      "node must differ"))
                elif low <= port <= high:
                    out.append((keys, f"{port} is inside the worker port range {low}-{high}{pinned} on "
                                      f"{node.node_name}: move it, or set ports.min_worker_port/max_worker_port"))
                by_port.setdefault(port, what)
        first: dict[tuple[str | int, ...], str] = {}
        for at, message in out:  # a shared `ports:` key collides on every node: report it once
            first.setdefault(at, message)
        return list(first.items())

    def _unreachable_addresses(self, where: dict[int, tuple[str | int, ...]]) -> list[tuple[tuple[str | int, ...], str]]:
        """Node addresses no other node can use: `ray start --node-ip-address` takes them, and the cluster fails
        midway through `up` (a worker's `ray start --address 0.0.0.0:6379` reaches the worker itself)."""
        out: list[tuple[tuple[str | int, ...], str]] = []
        addresses = {id(n): ip_address(n.ip) for n in self.nodes}
        all_loopback = all(a is not None and a.is_loopback for a in addresses.values())
        for node in self.nodes:
            address = addresses[id(node)]
            if address is None:  # a hostname: resolved on the nodes
                continue
            field = "address" if node.address else "host"
            if address.is_unspecified:
                what = "the unspecified address (to a listening socket it means every interface)"
            elif address.is_multicast:
                what = "a multicast address"
            elif address.version == 4 and address.is_reserved:
                what = "a reserved address" if address != ipaddress.IPv4Address("255.255.255.255") else "the broadcast address"
            elif address.is_loopback and not all_loopback:
                if node.local and not node.address:
                    out.append((where[id(node)] + ("address",), (
                        f"this machine's only address is the loopback {node.ip} (it has no route out), which the other "
                        f"nodes cannot reach: set `address:` to {node.node_name}'s address on the network the nodes share")))
                    continue
                what = "a loopback address (each machine has it for itself)"
            else:
                continue
            who = "the node" if node.node_name == node.ip else node.node_name
            out.append((where[id(node)] + (field,), (
                f"{node.ip} is {what}, not one at which other machines reach {who}: give {who}'s address on the "
                "network the nodes share (e.g. 192.168.1.10)")))
        return out

    def _ray_defaults(self, node: NodeConfig) -> list[tuple[str, int]]:
        """(key of `ports:`, port) of each fixed port Ray binds on `node` where `ports:` does not pin it."""
        defaults = [("dashboard_agent_listen_port", RAY_DEFAULT_PORTS["dashboard_agent_listen_port"])]
        if node is self.head:
            defaults.append(("ray_client_server_port", RAY_DEFAULT_PORTS["ray_client_server_port"]))
        return [(key, port) for key, port in defaults if getattr(self.ports, key) is None]

    def node_ports(self, node: NodeConfig) -> dict[str, int]:
        """The fixed ports `ray start` binds on `node`, by dotted field name."""
        out: dict[str, int] = {}
        if node is self.head:
            out["head.port"] = self.head.port
            if self.head.dashboard.enabled:
                out["head.dashboard.port"] = self.head.dashboard.port
        for key, value in self.ports.model_dump(exclude_none=True).items():
            if key in ("min_worker_port", "max_worker_port") or (key == "ray_client_server_port" and node is not self.head):
                continue
            out[f"ports.{key}"] = value
        return out

    @property
    def nodes(self) -> list[NodeConfig]:
        return [self.head, *self.workers]

    @property
    def python_path(self) -> str:
        if self.venv:
            return f"{self.venv.rstrip('/')}/bin/python"
        if self.python:
            return self.python
        if all(node.local for node in self.nodes):
            # Every node is this machine: the Python running raytrain is the one known to have this Ray
            # (`python3` on PATH may be the system's, without Ray, when raytrain runs from a venv).
            import sys

            return sys.executable
        return "python3"

    @property
    def address(self) -> str:
        # Ray's form: an IPv6 address in brackets (its parse_address finds no port in `2001:db8::1:6379`).
        ip = self.head.ip
        host = f"[{ip}]" if isinstance(ip_address(ip), ipaddress.IPv6Address) else ip
        return f"{host}:{self.head.port}"

    @property
    def token_path(self) -> str:
        """The cluster's token file relative to the home directory, the same on this machine and on every node."""
        return posixpath.join(".raytrain", "clusters", self.name, "auth_token")

    @property
    def dashboard_url(self) -> str:
        """The dashboard's URL from another machine than the head (where it listens on more than loopback)."""
        d = self.head.dashboard
        return f"http://{d.url_host(self.head.ip)}:{d.port}"

    @property
    def dashboard_tunneled(self) -> bool:
        """Whether the dashboard listens only on the loopback of a head that is not this machine's `localhost`:
        from here, it is reached through an SSH tunnel (`raytrain cluster dashboard`)."""
        d = self.head.dashboard
        return d.enabled and d.loopback and not self.head.local


def load_cluster(path: str | Path, overrides: list[str] | None = None, *, starting: bool = False, insecure: bool = False) -> ClusterConfig:
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
        from raytrain.config.kind import wrong_kind

        raise wrong_kind(source, "cluster") or ConfigError(pydantic_issues(exc, source, ClusterConfig)) from None
    issues = [ConfigIssue(source.where(keys), ".".join(map(str, keys)), message) for keys, message in cfg.problems()]
    if issues:
        raise ConfigError(issues)
    d = cfg.head.dashboard
    if starting and d.open_to_network and cfg.auth.mode == "disabled" and not insecure:
        raise ConfigError([ConfigIssue(
            source.where(("head", "dashboard", "host")), "head.dashboard.host",
            f"refusing a dashboard open to the network ({d.host} is not a loopback address) with auth disabled: "
            "its jobs API runs any shell command for anyone who reaches it (CVE-2023-48022). Use auth: "
            "{mode: token}, host 127.0.0.1 with `raytrain cluster dashboard`, or pass --insecure",
        )])
    return cfg


def exposure_warnings(cfg: ClusterConfig) -> list[str]:
    """Legal but risky settings `up` and `check` print: a token-protected dashboard reached over plain HTTP."""
    d = cfg.head.dashboard
    if d.open_to_network and cfg.auth.mode == "token":
        return [f"head.dashboard.host {d.host} listens beyond the head's loopback: the dashboard speaks plain HTTP, "
                "so the cluster's token crosses the network readable by anyone on the path. Keep host 127.0.0.1 "
                "and reach it with `raytrain cluster dashboard FILE` (an SSH tunnel)"]
    return []

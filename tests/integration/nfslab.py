"""A real NFSv3 share for the hosts of a HostLab, served in user space: this kernel has no NFS client or server.

Server: nfs-ganesha (VFS backend) and rpcbind in a network namespace of their own, attached to the lab's
bridge at address .5 of the lab's /24, in a private mount namespace with its own /run. It exports a
directory as `/nfsroot`, read-write, no root squash, to the lab's hosts only (the equivalent of an
/etc/exports line with their addresses), NFSv3 over TCP, no NLM (hence `-o nolock` on clients).

Clients: on a lab host, `mount -t nfs -o nolock SERVER:/nfsroot PATH` works as on a machine with nfs-common.
util-linux mount execs the helper /sbin/mount.nfs; in each host's mount namespace (only there) our own
helper script is bind-mounted over it. The helper starts `nfsfuse.py` (libnfs through FUSE) in the background,
in the host's namespaces, and returns once the mount is up, or exits 32 with the client's error.

Traps (learned by ../shared/nfslab): rpcbind must not meet the machine's /run (its socket and lock file),
hence the private /run; ganesha needs `Mount_Path_Pseudo` for v3 clients to mount the pseudo path
`/nfsroot`, and `Graceless` or clients wait out a 90 s grace period; an unmount can hang while a client is
wedged: kill the client, then unmount lazily.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from .hostlab import HostLab
from .labkit import Lab, apt_install, attach, detach, reap, run, write_script

HERE = Path(__file__).resolve().parent
PACKAGES = ("nfs-ganesha", "nfs-ganesha-vfs", "rpcbind", "nfs-common", "libnfs13", "fuse3")

# PID 1 of the server's mount namespace: starts rpcbind, then ganesha, records their PIDs, waits on both.
SERVER_INIT = """#!/bin/bash
set -e
STATE=$1
mount -t tmpfs -o mode=755 nfslab-run /run
rpcbind -f & echo $! > "$STATE/rpcbind.pid"
for _ in $(seq 50); do [ -S /run/rpcbind.sock ] && break; sleep 0.1; done
ganesha.nfsd -F -f "$STATE/ganesha.conf" -L "$STATE/ganesha.log" -p /run/ganesha.pid -N NIV_EVENT &
echo $! > "$STATE/ganesha.pid"
wait
"""

# /sbin/mount.nfs inside lab hosts. mount(8) calls it as `mount.nfs SOURCE TARGET [-s -f -n -v] [-N NS] -o OPTS`.
MOUNT_HELPER = """#!/bin/bash
# mount.nfs for lab hosts (tests/integration/nfslab.py): NFSv3 through a FUSE client, as the kernel has none.
set -u
if [ $# -lt 2 ]; then echo "usage: mount.nfs remotetarget dir [-o nfsoptions]" >&2; exit 1; fi
SOURCE=$1 TARGET=$2
shift 2
OPTIONS=
while [ $# -gt 0 ]; do
  case $1 in
    -o) OPTIONS=$2; shift 2 ;;
    -N | -t) shift 2 ;;
    *) shift ;;
  esac
done
SERVER=${SOURCE%%:*} EXPORT=${SOURCE#*:}
if [ "$SERVER" = "$SOURCE" ] || [ "${EXPORT#/}" = "$EXPORT" ]; then
  echo "mount.nfs: remote share not in 'host:dir' format" >&2; exit 32
fi
if [ ! -d "$TARGET" ]; then echo "mount.nfs: mount point $TARGET does not exist" >&2; exit 32; fi
# Options: nolock is what the server offers anyway (no NLM); the rest are not emulated.
: "$OPTIONS"
TAG="$(hostname).$(printf %s "$TARGET" | tr -c 'A-Za-z0-9._-' _)"
LOG="@CLIENTS@/$TAG.log" READY="@CLIENTS@/$TAG.ready"
rm -f "$READY"
setsid @PYTHON@ @NFSFUSE@ "$SERVER" "$EXPORT" "$TARGET" --ready "$READY" </dev/null >"$LOG" 2>&1 &
PID=$!
echo "$PID" > "@CLIENTS@/$TAG.pid"
for _ in $(seq 300); do
  if [ -e "$READY" ] && mountpoint -q "$TARGET"; then exit 0; fi
  if ! kill -0 "$PID" 2>/dev/null; then
    echo "mount.nfs: $(tail -n 3 "$LOG")" >&2; exit 32
  fi
  sleep 0.1
done
kill -KILL "$PID" 2>/dev/null
echo "mount.nfs: mounting $SOURCE on $TARGET timed out after 30 s: $(tail -n 3 "$LOG")" >&2
exit 32
"""


def cannot_serve_nfs() -> str | None:
    """None if this machine can run the share (FUSE), else why not (namespaces are HostLab's question)."""
    if not os.path.exists("/dev/fuse"):
        return "needs /dev/fuse for the NFS client (FUSE)"
    return None


def ensure_packages() -> None:
    """Install the server, the client library and FUSE if missing (Debian), like hostlab installs sshd."""
    missing = [p for p in PACKAGES if run(["dpkg-query", "-W", "-f=${Status}", p], check=False).stdout != "install ok installed"]
    if not missing:
        return
    apt_install(*missing, options=("--no-install-recommends",))


def fuse_venv() -> Path:
    """A virtualenv with mfusepy for the FUSE client, cached across runs."""
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "raytrain-tests" / "venv-nfsfuse"
    python = cache / "bin" / "python"
    if not python.exists() or run([str(python), "-c", "import mfusepy"], check=False, env=_fuse_env()).returncode != 0:
        shutil.rmtree(cache, ignore_errors=True)
        run([sys.executable, "-m", "venv", str(cache)])
        run([str(python), "-m", "pip", "install", "-q", "mfusepy"], timeout=600)
    return cache


def _fuse_env() -> dict[str, str]:
    return {**os.environ, "FUSE_LIBRARY_NAME": "fuse3"}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _stop(pid_file: Path, timeout: float) -> None:
    """TERM the process of pid_file, KILL it after `timeout` s; only that PID."""
    if not pid_file.exists() or not pid_file.read_text().strip():
        return
    pid = int(pid_file.read_text())
    if _alive(pid):
        os.kill(pid, signal.SIGTERM)
        deadline = time.time() + timeout
        while _alive(pid) and time.time() < deadline:
            time.sleep(0.1)
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)
    pid_file.unlink(missing_ok=True)


class NFSLab(Lab):
    """The share of a HostLab that is up: `up()` then `down()` (always, even after a failure), or `with`."""

    EXPORT = "/nfsroot"

    def __init__(self, lab: HostLab):
        self.lab = lab
        self.state = lab.root / "nfs"
        self.export_dir = self.state / "export"
        """The server's export directory: what is on the share, seen from the server."""
        self.clients = self.state / "clients"
        self.ip = f"{lab.net}.5"
        self.netns = f"{lab.prefix}nfs"
        self.veth = f"v{lab.prefix}nfs"
        self.helper = self.state / "mount.nfs"
        self.mount_nfs = os.path.realpath("/sbin/mount.nfs")  # nfs-common's, which the helper covers
        self._server: subprocess.Popen | None = None

    @property
    def share(self) -> str:
        return f"{self.ip}:{self.EXPORT}"

    # --- files -------------------------------------------------------------------------------------
    def _files(self, venv: Path) -> None:
        for d in (self.export_dir, self.clients, self.state / "recovery"):
            d.mkdir(parents=True, exist_ok=True)
        clients = ", ".join(self.lab.ip.values())
        (self.state / "ganesha.conf").write_text(f"""
NFS_CORE_PARAM {{
    Protocols = 3;
    NFS_Port = 2049;
    MNT_Port = 20048;
    Enable_NLM = false;
    Enable_RQUOTA = false;
    Mount_Path_Pseudo = true;
    Plugins_Dir = "/usr/lib/x86_64-linux-gnu/ganesha";
}}
NFSV4 {{
    Graceless = true;
    RecoveryBackend = fs;
    RecoveryRoot = "{self.state / 'recovery'}";
}}
EXPORT {{
    Export_Id = 1;
    Path = "{self.export_dir}";
    Pseudo = "{self.EXPORT}";
    Protocols = 3;
    Transports = TCP;
    SecType = sys;
    Access_Type = None;
    CLIENT {{
        Clients = {clients};
        Access_Type = RW;
        Squash = No_Root_Squash;
    }}
    FSAL {{ Name = VFS; }}
}}
LOG {{ Default_Log_Level = EVENT; }}
""")
        write_script(self.state / "server_init.sh", SERVER_INIT)
        write_script(
            self.helper,
            MOUNT_HELPER.replace("@CLIENTS@", str(self.clients))
            .replace("@PYTHON@", f"env FUSE_LIBRARY_NAME=fuse3 {venv / 'bin' / 'python'}")
            .replace("@NFSFUSE@", str(HERE / "nfsfuse.py")),
        )

    # --- server ------------------------------------------------------------------------------------
    def _server_up(self) -> None:
        attach(self.netns, self.veth, self.lab.bridge, self.ip)
        log = open(self.state / "server.out", "w")
        self._server = subprocess.Popen(
            ["ip", "netns", "exec", self.netns, "unshare", "--mount", "--propagation", "private",
             str(self.state / "server_init.sh"), str(self.state)],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
        )
        deadline = time.time() + 30
        while time.time() < deadline:
            if run(["rpcinfo", "-T", "tcp", self.ip, "nfs", "3"], check=False, timeout=10).returncode == 0:
                return
            if self._server.poll() is not None:
                break
            time.sleep(0.2)
        log_file = self.state / "ganesha.log"
        tail = "\n".join(log_file.read_text().splitlines()[-20:]) if log_file.exists() else ""
        raise RuntimeError(f"the NFS server did not come up on {self.ip}:\n{(self.state / 'server.out').read_text()}\n{tail}")

    def _server_down(self) -> None:
        _stop(self.state / "ganesha.pid", 15)
        _stop(self.state / "rpcbind.pid", 5)
        if self._server is not None:
            reap(self._server, 10)
            self._server = None
        detach(self.netns, self.veth)

    # --- clients -----------------------------------------------------------------------------------
    def install_client(self, h: str) -> None:
        """Make `mount -t nfs` work on host h (again after `lab.host_up(h)`): the helper over mount.nfs."""
        res = self.lab.on(h, f"mount --bind {self.helper} {self.mount_nfs}")
        if res.returncode != 0:
            raise RuntimeError(f"cannot cover {self.mount_nfs} on {h}: {res.stderr}")

    def mounts(self, h: str) -> list[tuple[str, str, str]]:
        """(target, source, fstype) of the share's FUSE mounts on host h."""
        out = self.lab.on(h, "findmnt -rn -t fuse.nfsfuse -o TARGET,SOURCE,FSTYPE || true").stdout
        return [tuple(line.split()) for line in out.splitlines() if line.strip()]

    def stop_clients(self, h: str) -> None:
        """Unmount every share on host h and stop its clients; kill a client whose unmount hangs."""
        try:
            targets = [t for t, _, _ in self.mounts(h)]
        except RuntimeError:  # the host is off: its clients died with it
            targets = []
        for target in reversed(targets):
            res = self.lab.on(h, f"timeout 10 umount {target}", timeout=60)
            if res.returncode != 0:
                self._kill_clients(h)
                self.lab.on(h, f"umount {target} 2>/dev/null || umount -l {target}", timeout=60)
        self._kill_clients(h)

    def _kill_clients(self, h: str) -> None:
        # PIDs in the files are the host's (its own PID namespace): signal them from inside, after checking
        # that the PID is still one of our clients.
        for pid_file in self.clients.glob(f"{h}.*.pid"):
            pid = pid_file.read_text().strip()
            try:
                self.lab.on(h, f"grep -qa nfsfuse /proc/{pid}/cmdline 2>/dev/null && kill -KILL {pid} || true")
            except RuntimeError:
                pass
            pid_file.unlink(missing_ok=True)

    # --- lifecycle (up: labkit.Lab) -----------------------------------------------------------------
    def _prepare(self) -> None:
        ensure_packages()
        self._files(fuse_venv())

    def _start(self) -> None:
        self._server_up()
        for h in self.lab.names:
            self.install_client(h)

    def down(self) -> None:
        for h in self.lab.names:
            self.stop_clients(h)
        self._server_down()

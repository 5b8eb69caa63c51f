"""A real Slurm cluster on one machine: slurmctld here, one slurmd per node in its own namespaces.

Each node is a network namespace on a private bridge (with a default route through the bridge, like a real
machine), plus its own PID, mount and UTS namespaces: its hostname is the node name, /etc/hosts names every
node, and /tmp/ray is private, so the Ray that a job starts on one node is that node's alone. The slurmd is
PID 1 of its node: killing it powers the node off (its Ray and job steps die with it).

Facts this relies on (tried on this machine, ../shared/slurmlab): Debian's slurm-wlm 22.05 with munge;
proctrack/linuxproc, task/none and no accounting where the sandbox has no cgroups; `ip netns exec` remounts
/sys and slurmd then fails, so nodes are entered with `nsenter --net=` instead; munged's socket is a file,
shared by every namespace (each lab runs its own munged on its own socket, `AuthInfo=socket=`, and its own
slurmctld port, so two labs on one machine leave each other alone); PID 1 is not systemd, so the fixture starts each daemon itself and stops exactly
those it started.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

from ..ports import free_port
from .labkit import Lab, cannot_create_netns, etc_hosts, network_down, network_up, reap, run, write_script

NODEINIT = """#!/bin/bash
# PID 1 of one Slurm node (nsenter --net + unshare --pid --fork --mount-proc --uts --mount).
set -e
N=$1; R=$2; D=$R/nodes/$N
hostname "$N"
mount --bind "$R/etc_hosts" /etc/hosts
mkdir -p "$D/tmp_ray" /tmp/ray
mount --bind "$D/tmp_ray" /tmp/ray
exec slurmd -D -N "$N" -f "$R/slurm.conf"
"""


def cannot_run() -> str | None:
    """None when this machine can host the lab (installing Slurm if it is missing), else why not."""
    if os.geteuid() != 0:
        return "needs root (network, PID and mount namespaces; slurmd)"
    for tool in ("ip", "unshare", "nsenter"):
        if not shutil.which(tool):
            return f"needs {tool} (iproute2, util-linux)"
    if not (shutil.which("slurmctld") and shutil.which("slurmd") and shutil.which("sbatch") and shutil.which("munged")):
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        res = run(["apt-get", "install", "-y", "-qq", "slurm-wlm", "munge"], check=False, env=env, timeout=900)
        if res.returncode != 0:
            run(["apt-get", "update", "-qq"], check=False, env=env, timeout=600)
            res = run(["apt-get", "install", "-y", "-qq", "slurm-wlm", "munge"], check=False, env=env, timeout=900)
        if res.returncode != 0:
            return f"cannot install slurm-wlm and munge: {res.stderr.strip()[-300:]}"
    return cannot_create_netns("rts")


def _munge_ok(sock: str) -> bool:
    return run(["bash", "-c", 'munge -n -S "$1" | unmunge -S "$1"', "-", sock], check=False, timeout=10).returncode == 0


class SlurmLab(Lab):
    """Nodes `names` with `cpus` CPUs each, one partition `debug`; `up()` then `down()` (always), or `with`."""

    def __init__(self, root: Path, names=("n1", "n2", "n3"), cpus: int = 2):
        tag = uuid.uuid4().hex[:4]
        self.root = Path(root)
        self.prefix = f"sl{tag}"
        self.net = f"10.{150 + int(tag[:2], 16) % 50}.{int(tag[2:], 16) % 256}"
        self.names = list(names)
        self.cpus = cpus
        self.ip = {n: f"{self.net}.{11 + i}" for i, n in enumerate(self.names)}
        self.bridge = f"{self.prefix}br"
        self.conf = self.root / "slurm.conf"
        self._ctld: subprocess.Popen | None = None
        self._nodes: dict[str, subprocess.Popen] = {}
        self._munged_pid: int | None = None
        self.munge_dir = Path("/run/munge") / f"lab-{self.prefix}"
        self.munge_socket = str(self.munge_dir / "munge.socket")
        self._saved_env: str | None = None

    # --- files ---------------------------------------------------------------------------------
    def _files(self) -> None:
        for sub in ("state", "spool", "nodes", "log"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        host = socket.gethostname()
        # A port free here now: two labs on one machine (two test runs) each get their own slurmctld port.
        nodes = "".join(f"NodeName={n} NodeAddr={ip} NodeHostname={n} CPUs={self.cpus} State=UNKNOWN\n"
                        for n, ip in self.ip.items())
        self.conf.write_text(
            f"ClusterName=raytrainlab\nSlurmctldHost={host}({self.net}.1)\nSlurmctldPort={free_port('')}\n"
            "SlurmUser=root\nSlurmdUser=root\nAuthType=auth/munge\nCredType=cred/munge\nMpiDefault=none\n"
            f"AuthInfo=socket={self.munge_socket}\n"
            "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\nJobAcctGatherType=jobacct_gather/none\n"
            "AccountingStorageType=accounting_storage/none\nSelectType=select/cons_tres\nSelectTypeParameters=CR_CPU\n"
            "ReturnToService=2\nMailProg=/bin/true\nSlurmdTimeout=20\nKillWait=15\nMinJobAge=3600\n"
            "SchedulerParameters=sched_interval=2\n"
            f"StateSaveLocation={self.root / 'state'}\nSlurmdSpoolDir={self.root / 'spool'}/%n\n"
            f"SlurmctldPidFile={self.root / 'slurmctld.pid'}\nSlurmdPidFile={self.root / 'log'}/slurmd-%n.pid\n"
            f"SlurmctldLogFile={self.root / 'log' / 'slurmctld.log'}\nSlurmdLogFile={self.root / 'log'}/slurmd-%n.log\n"
            + nodes + "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP\n"
        )
        (self.root / "etc_hosts").write_text(etc_hosts(self.ip))
        write_script(self.root / "nodeinit.sh", NODEINIT)

    # --- daemons -------------------------------------------------------------------------------
    def _munge_up(self) -> None:
        # The lab's own munged (the machine's key, a socket of its own): nobody else's munged is used or stopped.
        for d in (self.munge_dir.parent, self.munge_dir):
            d.mkdir(mode=0o755, parents=True, exist_ok=True)
            shutil.chown(d, "munge", "munge")
        d = self.munge_dir
        run(["runuser", "-u", "munge", "--", "munged", f"--socket={self.munge_socket}", f"--pid-file={d / 'munged.pid'}",
              f"--log-file={d / 'munged.log'}", f"--seed-file={d / 'munged.seed'}"])
        pid_file = d / "munged.pid"
        deadline = time.time() + 10
        while time.time() < deadline and not _munge_ok(self.munge_socket):
            time.sleep(0.1)
        if pid_file.exists():
            self._munged_pid = int(pid_file.read_text().strip())
        if not _munge_ok(self.munge_socket):
            raise RuntimeError(f"munged did not start: {(d / 'munged.log').read_text()[-1000:] if (d / 'munged.log').exists() else ''}")

    def node_up(self, n: str) -> None:
        d = self.root / "nodes" / n
        d.mkdir(parents=True, exist_ok=True)
        log = open(d / "init.log", "w")
        self._nodes[n] = subprocess.Popen(
            ["nsenter", f"--net=/run/netns/{self.prefix}{n}", "unshare", "--pid", "--fork", "--mount-proc", "--uts",
             "--mount", "--kill-child", str(self.root / "nodeinit.sh"), n, str(self.root)],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
        )

    def pid1(self, n: str) -> int | None:
        """The node's slurmd (PID 1 of its PID namespace), seen from here."""
        proc = self._nodes.get(n)
        if proc is None:
            return None
        children = run(["pgrep", "-P", str(proc.pid)], check=False).stdout.split()
        return int(children[0]) if children else None

    def node_down(self, n: str) -> None:
        """Power a node off: its slurmd is PID 1 there, so the kernel kills every process of the node with it."""
        proc = self._nodes.pop(n, None)
        if proc is None:
            return
        pid = run(["pgrep", "-P", str(proc.pid)], check=False).stdout.split()
        for p in pid:
            try:
                os.kill(int(p), signal.SIGKILL)
            except ProcessLookupError:
                pass
        reap(proc, 15)

    def on(self, n: str, command: str, timeout: float = 60) -> subprocess.CompletedProcess:
        """A shell command in node n's namespaces (not through Slurm)."""
        return run(["nsenter", "-t", str(self.pid1(n)), "-n", "-p", "-m", "-u", "--", "bash", "-c", command],
                    check=False, timeout=timeout)

    def processes(self, n: str, pattern: str) -> list[str]:
        pid = self.pid1(n)
        if pid is None:
            return []
        out = self.on(n, f"pgrep -a -f {pattern!r} || true").stdout
        return [line for line in out.splitlines() if "pgrep" not in line]

    def env(self) -> dict[str, str]:
        """This machine's environment for Slurm commands and raytrain: the lab's slurm.conf, no RAY_* settings."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
        env["SLURM_CONF"] = str(self.conf)
        return env

    def slurm(self, *argv: str, timeout: float = 30) -> subprocess.CompletedProcess:
        return run(list(argv), check=False, timeout=timeout, env=self.env())

    def raytrain(self, *args: str, timeout: float = 300, cwd: Path | None = None) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "raytrain", *args], capture_output=True, text=True,
                              timeout=timeout, env=self.env(), cwd=cwd or Path(__file__).resolve().parents[2])

    def node_states(self) -> dict[str, str]:
        res = self.slurm("sinfo", "-h", "-N", "-o", "%N %t")
        return dict(line.split() for line in res.stdout.splitlines() if line.strip())

    def wait_idle(self, timeout: float = 60) -> None:
        deadline = time.time() + timeout
        states: dict[str, str] = {}
        while time.time() < deadline:
            states = self.node_states()
            if len(states) == len(self.names) and all(s == "idle" for s in states.values()):
                return
            time.sleep(0.3)
        logs = "".join((self.root / "log" / f).read_text()[-1500:] for f in os.listdir(self.root / "log") if f.endswith(".log"))
        raise RuntimeError(f"Slurm nodes not idle after {timeout} s: {states}\n{logs}")

    # --- lifecycle (up: labkit.Lab) -------------------------------------------------------------
    def _prepare(self) -> None:
        self._files()
        self._saved_env = os.environ.get("SLURM_CONF")

    def _start(self) -> None:
        self._munge_up()
        network_up(self.prefix, self.bridge, self.net, self.ip, route=True)
        log = open(self.root / "log" / "slurmctld.out", "w")
        self._ctld = subprocess.Popen(["slurmctld", "-D", "-f", str(self.conf)], stdout=log, stderr=subprocess.STDOUT,
                                      stdin=subprocess.DEVNULL, start_new_session=True)
        for n in self.names:
            self.node_up(n)
        self.wait_idle()

    def down(self) -> None:
        if self._ctld is not None and self._ctld.poll() is None:
            self.slurm("scancel", "--full", "-u", "root", timeout=15)
        for n in list(self._nodes):
            self.node_down(n)
        if self._ctld is not None:
            self._ctld.terminate()
            reap(self._ctld, 15)
            self._ctld = None
        if self._munged_pid is not None:
            try:
                os.kill(self._munged_pid, signal.SIGTERM)
                deadline = time.time() + 10
                while time.time() < deadline:  # it writes its seed file on the way out
                    os.kill(self._munged_pid, 0)
                    time.sleep(0.05)
            except ProcessLookupError:
                pass
            self._munged_pid = None
        shutil.rmtree(self.munge_dir, ignore_errors=True)
        network_down(self.prefix, self.bridge, self.names)

"""Several SSH-reachable Linux hosts on one machine, for multi-host cluster tests.

Each host is a network namespace with its own address on a private bridge, plus its own PID, mount and
UTS namespaces (so `ray stop` on one host stops only that host's Ray), a private /tmp/ray and /run, and
its own sshd. The bridge has an address too, so this machine (the "laptop" running raytrain and the
drivers) reaches every host over SSH, with host-key checking on against a known_hosts file we write.

Traps (learned by ../shared/hostlab): sshd wants StrictModes off for keys under /tmp and passes no client
environment; `unshare` ignores SIGTERM (signal the host's PID 1, SIGKILL `unshare` as a last resort);
delete the veth before `ip netns del`; never `ray stop` in the root namespace while a lab is up.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import site
import subprocess
import sys
import time
import uuid
from pathlib import Path

from .labkit import Lab, apt_install, cannot_create_netns, etc_hosts, network_down, network_up, reap, run, write_script

HOSTINIT = """#!/bin/bash
# PID 1 of one lab host (inside ip netns exec + unshare --pid --fork --mount-proc --uts).
set -e
H=$1; IP=$2; R=$3; D=$R/hosts/$H
hostname "$H"
mount --bind $R/etc_hosts /etc/hosts
mount -t tmpfs -o mode=755 tmpfs /run
mkdir -p /run/sshd $D/tmp_ray
mount --bind $D/tmp_ray /tmp/ray
/usr/sbin/sshd -f $R/ssh/sshd_config -o ListenAddress=$IP -o PidFile=/run/sshd.pid -E $D/sshd.log
set +e
trap 'exit 0' TERM INT
while :; do sleep 3600 & wait $!; done
"""


ROOT = Path(__file__).resolve().parents[2]

CLEAN_ENV = "env " + " ".join(f"-u {k}" for k in os.environ if k.startswith("RAY_"))
"""Prefix for commands on a lab host: none of this machine's RAY_* settings leak into them."""


def raytrain(*args, timeout=300, cwd=ROOT) -> subprocess.CompletedProcess:
    """`python -m raytrain ARGS` from this machine (the "laptop"), without this machine's RAY_* settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    return subprocess.run([sys.executable, "-m", "raytrain", *args], capture_output=True, text=True, timeout=timeout,
                          env=env, cwd=cwd)


def can_create_namespaces() -> str | None:
    """None if this machine can host a lab, else why not."""
    if os.geteuid() != 0:
        return "needs root (network, PID and mount namespaces)"
    if not shutil.which("ip") or not shutil.which("unshare") or not shutil.which("nsenter"):
        return "needs iproute2 and util-linux (ip, unshare, nsenter)"
    return cannot_create_netns("rtp")


def ensure_sshd() -> None:
    """Install openssh-server if it is missing (Debian)."""
    if Path("/usr/sbin/sshd").exists() and shutil.which("ssh") and shutil.which("ssh-keygen"):
        return
    apt_install("openssh-server", "openssh-client")


class HostLab(Lab):
    """Hosts `names` on a private /24; `up()` then `down()` (always, even after a failure), or `with`."""

    def __init__(self, root: Path, names=("head", "w1", "w2")):
        tag = uuid.uuid4().hex[:4]
        self.root = Path(root)
        self.prefix = f"rt{tag}"  # interface names are at most 15 characters
        # A subnet per run, so two labs (or a lab that was not torn down) never collide.
        self.net = f"10.{200 + int(tag[:2], 16) % 50}.{int(tag[2:], 16)}"
        self.names = list(names)
        self.ip = {h: f"{self.net}.{10 + i}" for i, h in enumerate(self.names)}
        self.bridge = f"{self.prefix}br"
        self._procs: dict[str, subprocess.Popen] = {}

    # --- files -------------------------------------------------------------------------------
    @property
    def ssh_config(self) -> Path:
        return self.root / "ssh" / "ssh_config"

    def _files(self) -> None:
        ssh = self.root / "ssh"
        ssh.mkdir(parents=True, exist_ok=True)
        (self.root / "hosts").mkdir(exist_ok=True)
        for key, comment in (("host_ed25519", "lab-host"), ("id_ed25519", "lab-client")):
            if not (ssh / key).exists():
                run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(ssh / key), "-C", comment])
        shutil.copy(ssh / "id_ed25519.pub", ssh / "authorized_keys")
        python_bin = str(Path(sys.executable).parent)
        (ssh / "sshd_config").write_text(
            "Port 22\n"
            f"HostKey {ssh / 'host_ed25519'}\n"
            f"AuthorizedKeysFile {ssh / 'authorized_keys'}\n"
            "PermitRootLogin yes\nPubkeyAuthentication yes\nPasswordAuthentication no\n"
            "KbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\nUseDNS no\nPrintMotd no\n"
            f"SetEnv PATH={python_bin}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n"
            "LogLevel VERBOSE\n"
        )
        host_key = (ssh / "host_ed25519.pub").read_text().split()
        (ssh / "known_hosts").write_text("".join(f"{ip} {host_key[0]} {host_key[1]}\n" for ip in self.ip.values()))
        (ssh / "ssh_config").write_text(
            "Host *\n  User root\n"
            f"  IdentityFile {ssh / 'id_ed25519'}\n  IdentitiesOnly yes\n"
            f"  UserKnownHostsFile {ssh / 'known_hosts'}\n  LogLevel ERROR\n"
        )
        (self.root / "etc_hosts").write_text(etc_hosts(self.ip))
        write_script(self.root / "hostinit.sh", HOSTINIT)

    # --- hosts -------------------------------------------------------------------------------------
    def _unshare_pid(self, h: str) -> int | None:
        path = self.root / "hosts" / h / "unshare.pid"
        return int(path.read_text()) if path.exists() else None

    def _pid1(self, h: str) -> int:
        unshare = self._unshare_pid(h)
        children = run(["pgrep", "-P", str(unshare)], check=False).stdout.split()
        if not children:
            raise RuntimeError(f"host {h} is not running")
        return int(children[0])

    def host_up(self, h: str) -> None:
        d = self.root / "hosts" / h
        d.mkdir(parents=True, exist_ok=True)
        Path("/tmp/ray").mkdir(exist_ok=True)
        log = open(d / "init.log", "w")
        proc = subprocess.Popen(
            ["ip", "netns", "exec", f"{self.prefix}{h}", "unshare", "--pid", "--fork", "--mount-proc", "--uts",
             "--kill-child", str(self.root / "hostinit.sh"), h, self.ip[h], str(self.root)],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
        )
        (d / "unshare.pid").write_text(str(proc.pid))
        self._procs[h] = proc
        deadline = time.time() + 20
        while time.time() < deadline:
            probe = run(["bash", "-c", f"exec 3<>/dev/tcp/{self.ip[h]}/22"], check=False, timeout=5)
            if probe.returncode == 0:
                return
            time.sleep(0.1)
        raise RuntimeError(f"sshd on {h} did not come up: {(d / 'sshd.log').read_text() if (d / 'sshd.log').exists() else ''}")

    def host_down(self, h: str) -> None:
        """Power a host off: everything in its PID namespace dies at once."""
        unshare = self._unshare_pid(h)
        if unshare is None:
            return
        try:
            pid1 = self._pid1(h)
            os.kill(pid1, signal.SIGKILL)  # PID 1 of a namespace: the kernel kills every process in it
        except (RuntimeError, ProcessLookupError):
            pass
        proc = self._procs.pop(h, None)
        if proc is not None:
            reap(proc, 10)
        else:
            try:
                os.kill(unshare, signal.SIGKILL)
            except ProcessLookupError:
                pass
        (self.root / "hosts" / h / "unshare.pid").unlink(missing_ok=True)

    def on(self, h: str, command: str, timeout: float = 120) -> subprocess.CompletedProcess:
        """Run a shell command on host h's console (its namespaces), not over SSH."""
        return run(["nsenter", "-t", str(self._pid1(h)), "-n", "-p", "-m", "-u", "--", "bash", "-c", command],
                    check=False, timeout=timeout)

    def processes(self, h: str, pattern: str) -> list[str]:
        out = self.on(h, f"pgrep -a -f {pattern!r} || true").stdout
        return [line for line in out.splitlines() if "pgrep" not in line]

    # --- lifecycle (up: labkit.Lab) -----------------------------------------------------------------
    def _prepare(self) -> None:
        ensure_sshd()
        self._files()

    def _start(self) -> None:
        network_up(self.prefix, self.bridge, self.net, self.ip)
        for h in self.names:
            self.host_up(h)

    def down(self) -> None:
        for h in list(self.names):
            self.host_down(h)
        network_down(self.prefix, self.bridge, self.names)


def running_site_dirs() -> list[str]:
    """The site-packages folders of the interpreter running the tests, in its sys.path order.

    When that interpreter is a venv these are the venv's own folders (not its base Python's), plus the user
    site where the interpreter reads it.
    """
    dirs = [d for d in site.getsitepackages() if os.path.isdir(d)]
    if site.ENABLE_USER_SITE and os.path.isdir(site.getusersitepackages()):
        dirs.append(site.getusersitepackages())
    return dirs


# A cluster file's `env:` line with which Ray notices a dead node after period x threshold: 3 s instead of 30 s.
QUICK_DEATH_ENV = "env: {RAY_health_check_period_ms: '1000', RAY_health_check_failure_threshold: '3'}\n"


def status_once_dead(cluster_file: Path, node: int, poll_s: float, timeout: float = 60) -> dict:
    """`raytrain cluster status --json` of `cluster_file`, read every `poll_s` s until its node number `node`
    shows dead or `timeout` s have passed: the last status read (the caller asserts on it)."""
    deadline = time.time() + timeout
    while True:
        status = json.loads(raytrain("cluster", "status", str(cluster_file), "--json").stdout)
        if status["nodes"][node]["state"] == "dead" or time.time() >= deadline:
            return status
        time.sleep(poll_s)


def _see_running_env(venv: Path) -> None:
    """Make `venv` see the running environment's packages after its own.

    `python -m venv --system-site-packages` would show the *base* interpreter's packages, which are not the
    running ones when the tests run from a venv (no Ray there). A .pth line `import site; site.addsitedir(D)`
    appends D to sys.path and also runs the .pth files in D (editable installs), which a plain path line would
    not.
    """
    lines = "".join(f"import site; site.addsitedir({d!r})\n" for d in running_site_dirs())
    purelib = subprocess.run([str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                             check=True, capture_output=True, text=True).stdout.strip()
    (Path(purelib) / "zz_raytrain_tests_running_env.pth").write_text(lines)


def _env_tag() -> str:
    """Names the running environment, so a cached venv is never reused from another one."""
    return hashlib.sha256(f"{sys.prefix}\0{sys.version}".encode()).hexdigest()[:10]


def venv_with_ray(version: str) -> Path:
    """A virtualenv whose Ray is `version` (other packages from the running environment), cached across runs."""
    cache = (Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "raytrain-tests"
             / f"venv-ray-{version}-{_env_tag()}")
    python = cache / "bin" / "python"
    if python.exists():
        _see_running_env(cache)
    probe = (run([str(python), "-c", "from importlib.metadata import version; print(version('ray'))"], check=False)
             if python.exists() else None)  # its metadata: importing Ray takes seconds
    if probe is None or probe.stdout.strip() != version:
        shutil.rmtree(cache, ignore_errors=True)
        # `-m venv` builds from the base interpreter even when sys.executable is a venv's.
        run([sys.executable, "-m", "venv", str(cache)])
        # Ray goes in before the .pth exists, so pip never sees (or touches) the running environment's Ray.
        run([str(python), "-m", "pip", "install", "-q", "--no-deps", f"ray=={version}"], timeout=900)
        _see_running_env(cache)
    return cache


def plain_venv(path: Path) -> Path:
    """A virtualenv that sees the running environment's packages (so the same Ray and raytrain)."""
    if not (path / "bin" / "python").exists():
        run([sys.executable, "-m", "venv", "--without-pip", str(path)])
    _see_running_env(path)
    return path

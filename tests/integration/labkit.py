"""What the labs (hostlab.py, slurmlab.py, nfslab.py) share: running commands, a private bridge with network
namespaces on it, reaping the processes they start, and bringing a lab up whole or not at all."""

from __future__ import annotations

import os
import subprocess
import uuid
from pathlib import Path
from typing import Any, TypeVar

LabT = TypeVar("LabT", bound="Lab")


def run(argv: list[str], check: bool = True, **kw: Any) -> subprocess.CompletedProcess:
    return subprocess.run(argv, check=check, capture_output=True, text=True, **kw)


def apt_install(*packages: str, options: tuple[str, ...] = ()) -> None:
    """Install Debian `packages` (after `apt-get update`)."""
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    run(["apt-get", "update", "-qq"], env=env, timeout=600)
    run(["apt-get", "install", "-y", "-qq", *options, *packages], env=env, timeout=900)


def cannot_create_netns(tag: str) -> str | None:
    """None if a network namespace can be made here (one named `tag` + random is made and deleted), else why not."""
    name = f"{tag}{uuid.uuid4().hex[:6]}"
    probe = run(["ip", "netns", "add", name], check=False)
    if probe.returncode != 0:
        return f"cannot create network namespaces: {probe.stderr.strip()}"
    run(["ip", "netns", "del", name], check=False)
    return None


def veth_name(prefix: str, name: str) -> str:
    return f"v{prefix}{name}"[:15]  # interface names are at most 15 characters


def bridge_up(bridge: str, net: str) -> None:
    """The lab's bridge, with this machine's address on it: `net`.1/24."""
    run(["ip", "link", "add", bridge, "type", "bridge"])
    run(["ip", "addr", "add", f"{net}.1/24", "dev", bridge])
    run(["ip", "link", "set", bridge, "up"])


def attach(netns: str, veth: str, bridge: str, address: str, gateway: str | None = None) -> None:
    """A new network namespace `netns` whose eth0 (the peer of `veth`, on `bridge`) has `address`/24, and
    its loopback up; with `gateway`, a default route through it."""
    run(["ip", "netns", "add", netns])
    run(["ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", netns])
    run(["ip", "link", "set", veth, "master", bridge, "up"])
    run(["ip", "-n", netns, "addr", "add", f"{address}/24", "dev", "eth0"])
    run(["ip", "-n", netns, "link", "set", "eth0", "up"])
    run(["ip", "-n", netns, "link", "set", "lo", "up"])
    if gateway is not None:
        run(["ip", "-n", netns, "route", "add", "default", "via", gateway])


def detach(netns: str, veth: str) -> None:
    """Undo `attach` as far as it got: the veth first, then the namespace."""
    run(["ip", "link", "del", veth], check=False)
    run(["ip", "netns", "del", netns], check=False)


def bridge_down(bridge: str) -> None:
    run(["ip", "link", "del", bridge], check=False)


def network_up(prefix: str, bridge: str, net: str, ip: dict[str, str], route: bool = False) -> None:
    """The lab's network: `bridge` at `net`.1, and a namespace `prefix`+name for each name -> address of `ip`
    (with `route`, its default route through the bridge, like a real machine's)."""
    bridge_up(bridge, net)
    for name, address in ip.items():
        attach(f"{prefix}{name}", veth_name(prefix, name), bridge, address, gateway=f"{net}.1" if route else None)


def network_down(prefix: str, bridge: str, names: list[str]) -> None:
    for name in names:
        detach(f"{prefix}{name}", veth_name(prefix, name))
    bridge_down(bridge)


def write_script(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(0o755)


def etc_hosts(ip: dict[str, str]) -> str:
    """/etc/hosts for the lab's hosts: localhost, then each name at its address."""
    return "127.0.0.1 localhost\n" + "".join(f"{address} {name}\n" for name, address in ip.items())


def reap(proc: subprocess.Popen, timeout: float) -> None:
    """Wait for `proc` to end; SIGKILL it when it has not after `timeout` s."""
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=timeout)


class Lab:
    """`up()` brings the lab up whole or takes down what it started and raises; `down()` takes it down
    (always, even after a failure). `with SomeLab(...) as lab:` does both."""

    def _prepare(self) -> None:
        """Install and write what the lab needs; nothing is started yet, so nothing to undo."""

    def _start(self) -> None:
        raise NotImplementedError

    def down(self) -> None:
        raise NotImplementedError

    def up(self: LabT) -> LabT:
        self._prepare()
        try:
            self._start()
        except BaseException:
            self.down()
            raise
        return self

    def __enter__(self: LabT) -> LabT:
        return self.up()

    def __exit__(self, *exc: object) -> None:
        self.down()

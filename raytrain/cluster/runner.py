"""The one seam through which every side effect on a node passes: run a shell command there, or forward a port.

`SSHRunner` runs on this machine for a `localhost` node and over ssh (host-key checking on) for the others;
`DryRunner` records what would run and answers each command as a node where all is well would (the
answer the plan gives it), so tests and `--dry-run` share the plan and the code with real runs.
"""

from __future__ import annotations

import contextlib
import shlex
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import ClassVar

from raytrain.cluster.plan import Command
from raytrain.config.cluster import NodeConfig, SSHConfig
from raytrain.errors import ClusterError


@dataclass
class CommandResult:
    node: str
    command: str
    """The exact command as run (ssh prefix included)."""
    returncode: int
    stdout: str = ""
    stderr: str = ""

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def describe(self, tail: int = 8) -> str:
        """Host, command, exit code and the last lines of stderr: what a failure report needs."""
        lines = (self.stderr or self.stdout).strip().splitlines()[-tail:]
        body = "\n    ".join(lines) if lines else "(no output)"
        return f"{self.node}: `{self.command}` exited {self.returncode}\n    {body}"


class Secret:
    """A command's stdin that is made the first time a command really runs, once: a dry run, which runs
    nothing, never makes it (no token file is created to show the plan)."""

    def __init__(self, make: Callable[[], str]) -> None:
        self._make = make
        self._value: str | None = None
        self._lock = threading.Lock()

    def reveal(self) -> str:
        with self._lock:
            if self._value is None:
                self._value = self._make()
            return self._value


class Runner:
    dry_run: ClassVar[bool] = False
    """Whether commands are only recorded: then each answers as on a node where all is well."""

    def run(self, node: NodeConfig, command: str, *, stdin: str | Secret | None = None,
            timeout: float | None = None) -> CommandResult:
        raise NotImplementedError

    def display(self, node: NodeConfig, command: str) -> str:
        raise NotImplementedError

    def recorded(self) -> list[tuple[str, str]]:
        """(node, command) for every command recorded instead of run."""
        return []


def ssh_argv(node: NodeConfig, ssh: SSHConfig, *options: str) -> list[str]:
    """`ssh [OPTIONS] -- [USER@]HOST`: after `--`, a destination can never be read as an option.

    A command to run there goes after it as one word (ssh hands it to the remote login shell).
    """
    argv = ["ssh", *options, "-o", "BatchMode=yes", "-o", f"ConnectTimeout={ssh.connect_timeout}",
            "-o", f"StrictHostKeyChecking={ssh.host_key_checking}"]
    if ssh.config_file:
        argv += ["-F", ssh.config_file]
    if ssh.identity_file:
        argv += ["-i", ssh.identity_file, "-o", "IdentitiesOnly=yes"]
    if ssh.port:
        argv += ["-p", str(ssh.port)]
    target = f"{ssh.user}@{node.host}" if ssh.user else node.host
    return [*argv, "--", target]


class SSHRunner(Runner):
    """Runs commands on nodes: locally for `localhost`, else over ssh."""

    def __init__(self, ssh: SSHConfig) -> None:
        self.ssh = ssh

    def _argv(self, node: NodeConfig, command: str) -> list[str]:
        if node.local:
            return ["bash", "-c", command]
        # ssh hands one string to the remote login shell; the commands are POSIX sh.
        return [*ssh_argv(node, self.ssh), command]

    def display(self, node: NodeConfig, command: str) -> str:
        if node.local:
            return command
        return shlex.join(self._argv(node, command))

    def run(self, node: NodeConfig, command: str, *, stdin: str | Secret | None = None,
            timeout: float | None = None) -> CommandResult:
        argv = self._argv(node, command)
        text = stdin.reveal() if isinstance(stdin, Secret) else stdin
        try:
            proc = subprocess.run(argv, input=text, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            return CommandResult(node.node_name, self.display(node, command), 124, _text(exc.stdout),
                                 _text(exc.stderr) + f"\ntimed out after {timeout:g} s")
        return CommandResult(node.node_name, self.display(node, command), proc.returncode, proc.stdout, proc.stderr)

    def forward_argv(self, node: NodeConfig, local_port: int, target: str, port: int, *options: str) -> list[str]:
        """`ssh -N [OPTIONS] -L LOCAL_PORT:TARGET:PORT ... -- HOST`: a port forward, no command."""
        return ssh_argv(node, self.ssh, "-N", *options, "-L", f"{local_port}:{target}:{port}")

    def forward(self, node: NodeConfig, local_port: int, target: str, port: int) -> int:
        """Forward `local_port` here to `target:port` as the node sees it until ssh ends (Ctrl-C); its exit code."""
        return subprocess.run(self.forward_argv(node, local_port, target, port), check=False).returncode

    @contextlib.contextmanager
    def tunnel(self, node: NodeConfig, target: str, port: int, *, what: str, timeout_s: float) -> Iterator[int]:
        """`forward` from a free local port (the value) in the background while the block runs.

        Raises ClusterError naming `what` the tunnel leads to when ssh exits or the port does not open in time.
        """
        local_port = _free_port()
        argv = self.forward_argv(node, local_port, target, port, "-o", "ExitOnForwardFailure=yes")
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            _wait_port(local_port, proc, timeout_s, what)
            yield local_port
        finally:
            proc.terminate()
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _wait_port(port: int, proc: subprocess.Popen[str], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            stderr = proc.stderr.read() if proc.stderr else ""
            raise ClusterError(f"the SSH tunnel to {what} exited ({proc.returncode}): {stderr.strip()[-500:]}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
            return
        time.sleep(0.1)
    raise ClusterError(f"the SSH tunnel to {what} did not open within {timeout_s:.0f} s")


def _text(data: str | bytes | None) -> str:
    if data is None:
        return ""
    return data.decode(errors="replace") if isinstance(data, bytes) else data


@dataclass
class DryRunner(Runner):
    """Records every command instead of running it."""

    dry_run: ClassVar[bool] = True
    ssh: SSHConfig
    commands: list[tuple[str, str]] = field(default_factory=list)

    def display(self, node: NodeConfig, command: str) -> str:
        return SSHRunner(self.ssh).display(node, command)

    def run(self, node: NodeConfig, command: str, *, stdin: str | Secret | None = None,
            timeout: float | None = None) -> CommandResult:
        shown = self.display(node, command) + ("  < (stdin: secret, not shown)" if stdin else "")
        self.commands.append((node.node_name, shown))
        answer = command if isinstance(command, Command) else Command(command)
        return CommandResult(node.node_name, shown, answer.dry_returncode, answer.dry_stdout)

    def recorded(self) -> list[tuple[str, str]]:
        return list(self.commands)

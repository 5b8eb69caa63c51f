"""Errors raised by the library; the CLI turns them into messages and exit codes."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")


def in_file_order(items: Iterable[T], where: Callable[[T], str | None]) -> list[T]:
    """`items` in the order of the `file:line` that `where` gives each: line by line, file by file in the order
    the files first come; those without a line (`--set ...`, None) after them, in the order they came."""
    files: dict[str, int] = {}

    def position(item: T) -> tuple[int, int, int]:
        found = re.fullmatch(r"(.+):(\d+)", where(item) or "")
        if not found:
            return (1, 0, 0)
        return (0, files.setdefault(found.group(1), len(files)), int(found.group(2)))

    return sorted(items, key=position)


class RaytrainError(Exception):
    """Base class of every error raytrain reports to a user.

    Attributes:
        exit_code: 2 for configuration and usage errors, 1 for runtime failures.
    """

    exit_code = 1


@dataclass
class ConfigIssue:
    """One problem found in a config: where it is, which key, what is wrong, how to fix it."""

    where: str | None
    """`file:line`, or `--set key=value` for an override, or None when unknown."""
    path: str
    """Dotted path of the key, e.g. `training.minibatch_size`."""
    message: str
    """What is wrong and what to do about it."""

    def __str__(self) -> str:
        prefix = f"{self.where}: " if self.where else ""
        key = f"{self.path}: " if self.path else ""
        return f"{prefix}{key}{self.message}"


def config_warning(where: str | None, path: str, text: str) -> str:
    """A warning about a config, formatted as a `ConfigIssue` is: `warning: file:line: key: text`."""
    return f"warning: {ConfigIssue(where, path, text)}"


class ConfigError(RaytrainError):
    """The config file (or an override) is invalid. Holds every issue found, not just the first."""

    exit_code = 2
    kind_hint: str | None = None
    """Set by `check_file`: which kind the file was checked as and why, for a file that may be of another kind."""

    def __init__(self, issues: list[ConfigIssue] | str) -> None:
        if isinstance(issues, str):
            issues = [ConfigIssue(None, "", issues)]
        self.issues = in_file_order(issues, lambda issue: issue.where)
        super().__init__("\n".join(str(i) for i in issues))


class UsageError(RaytrainError):
    """A command was called with arguments that cannot work together."""

    exit_code = 2


class TrainError(RaytrainError):
    """Training could not start or failed while running."""


class ClusterError(RaytrainError):
    """A cluster operation failed."""


class SweepError(RaytrainError):
    """A sweep could not start or failed."""


class FrameworkError(RaytrainError):
    """The middleware framework failed."""


class RayAddressError(RaytrainError):
    """The address of the Ray cluster to join is not one (checked as typed, before anything connects)."""

    exit_code = 2

    def __init__(self, address: str, problem: str, *, from_env: bool = False) -> None:
        source = " (from RAY_ADDRESS)" if from_env else ""
        super().__init__(
            f"Ray address {address!r}{source}: {problem}. Give the head's HOST:PORT, e.g. 10.0.0.5:6379 "
            "(its GCS port: 6379 unless `ray start --head --port` set another)."
        )


class RayAuthError(RaytrainError):
    """The Ray cluster to join wants an auth token this driver does not have (found before `ray.init`)."""

    exit_code = 2

    def __init__(self, address: str, problem: str) -> None:
        super().__init__(
            f"the Ray cluster at {address} requires an auth token that this driver does not have: give --cluster "
            "FILE (the cluster file `raytrain cluster up` started it from), which sets it for you, or set "
            "RAY_AUTH_MODE=token and RAY_AUTH_TOKEN_PATH to the cluster's token file "
            f"(~/.raytrain/clusters/NAME/auth_token where `cluster up` ran). Ray says: {problem.split('. ')[0]}"
        )


class RayTempDirError(RaytrainError):
    """A local Ray cannot start under its temp folder (RAY_TMPDIR, else TMPDIR, else /tmp): found before it starts."""

    exit_code = 2


class RayUnreachableError(RaytrainError):
    """Nothing answers at the address of the Ray cluster to join (found in seconds, before Ray retries it)."""

    def __init__(self, address: str, problem: str) -> None:
        super().__init__(
            f"cannot connect to the Ray cluster at {address}: {problem}. Check the address (the head's GCS port, "
            f"6379 unless `ray start --head --port` set another) and that the cluster is up "
            f"(`ray status --address {address}`)."
        )

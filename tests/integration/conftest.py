"""Integration tests run on a real local Ray, started once per session (once per worker under pytest-xdist).

Mode: `ray.init()` starting a local cluster turns on Ray 2.60's token authentication
(~/.ray/auth_token); tests in this folder run in that mode, like `raytrain train` without --address.
"""

import json
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

from .labkit import Lab

LabT = TypeVar("LabT", bound=Lab)

NO_HOSTS = "cannot create namespaced hosts on this machine"
"""How a module skips when `hostlab.can_create_namespaces()` says why not."""


def descendants(pid: int) -> set[int]:
    """The processes below `pid` (read from /proc)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    found, todo = set(), [pid]
    while todo:
        current = todo.pop()
        children = [child for child, parent in parents.items() if parent == current]
        found.update(children)
        todo.extend(children)
    return found


def alive(pid: int) -> bool:
    """Running, not a zombie left for init to reap (/proc/PID/stat's state field)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def left_running(pids: Iterable[int], *, within_s: float) -> set[int]:
    """Those of `pids` still running `within_s` from now, or none as soon as none is."""
    pids = set(pids)
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.2)
    return {p for p in pids if alive(p)}


def process_name(pid: int) -> str:
    """A process's command name (/proc/<pid>/comm), "" once it is gone."""
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def rows(trial_dir: Path, *, live: bool = False) -> list[dict]:
    """A trial's result.json rows; none while Tune has not created the file.

    `live`: the sweep is still running, so Tune may be half way through its last line (one write of a
    JSON object, then its newline; a reader on NFS or beside the writer can see the first part alone):
    only the lines whose newline is written count. After the sweep every line must parse.
    """
    path = trial_dir / "result.json"
    if not path.exists():
        return []
    text = path.read_text()
    if live:
        text = text[: text.rfind("\n") + 1]
    return [json.loads(line) for line in text.splitlines() if line.strip()]


@pytest.fixture(scope="session")
def ray_session():
    import ray

    # "local": a Ray of its own, never one that `ray start` recorded in /tmp/ray/ray_current_cluster (a test
    # here, or a test of another worker meanwhile, may have left such a record).
    ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="WARNING")
    yield ray
    ray.shutdown()


def tiny_base(stop: int, main_process_cpus: float, train_batch_size: int = 200) -> str:
    """The smallest PPO train config the sweep tests use: CartPole, no env runners, `stop` iterations
    (`train_batch_size` sets how long one takes)."""
    return (
        "experiment: {name: tiny, seed: 1}\n"
        "environment: {env: CartPole-v1}\n"
        "env_runners: {num_env_runners: 0, num_envs_per_env_runner: 2}\n"
        f"training: {{train_batch_size: {train_batch_size}, minibatch_size: {train_batch_size // 2}, num_epochs: 1, lr: 0.001}}\n"
        "model: {fcnet_hiddens: [16]}\n"
        f"resources: {{num_cpus_for_main_process: {main_process_cpus}}}\n"
        f"stop: {{training_iteration: {stop}}}\n"
    )


def invoke(args):
    """Run `raytrain ARGS` in this process (typer's CliRunner), with sys.argv as a real process would have
    it, so command.txt records the real command line."""
    import sys

    from typer.testing import CliRunner

    from raytrain.cli import app

    saved = sys.argv
    sys.argv = ["raytrain", *args]
    try:
        return CliRunner().invoke(app, args)
    finally:
        sys.argv = saved


def lab_fixture(why_not: str | None, reason: str, make: Callable[[], LabT]) -> Iterator[LabT]:
    """The body of a module-scoped lab fixture (`yield from lab_fixture(...)`): skip the module with
    "`reason`: `why_not`" where the lab cannot run, else yield `make()` brought up, and take it down however
    the module ends."""
    if why_not:
        pytest.skip(f"{reason}: {why_not}")
    with make() as lab:
        yield lab

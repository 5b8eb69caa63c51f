"""Running `main` on every node of a run: each node a named Ray actor whose router is active as that node.

Each node is a named Ray actor (`raytrain.<run id>.node.<id>`), so two runs on one cluster never see
each other's events. The runner connects the nodes to each other, waits for their results, re-raises the
first failure with its node id (after stopping the other nodes), and restarts a failed node with
`auto_recover`. With one worker, `main` runs in the calling process with its router active as the node.
"""

from __future__ import annotations

import logging
import re
import traceback
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from raytrain.errors import FrameworkError
from raytrain.framework.payload import FINISH
from raytrain.framework.router import TOPOLOGIES, Router, as_labels
from raytrain.framework.transport import Batch, PeerHandles

log = logging.getLogger("raytrain.framework")


class NodeError(FrameworkError):
    """A node's `main` raised; carries the node id and the original traceback text."""

    def __init__(self, node_id: int, message: str, remote_traceback: str) -> None:
        self.node_id = node_id
        self.remote_traceback = remote_traceback
        super().__init__(f"node {node_id} failed: {message}\n{remote_traceback}".rstrip())


@dataclass(frozen=True)
class RunSpec:
    """What a run uses: its nodes' ids, topology and labels, recovery, where and with what it runs."""

    ids: list[int]
    topology: str
    labels: list[str]
    auto_recover: bool
    max_retries: int
    ray_address: str | None
    num_cpus: float
    run_id: str

    @classmethod
    def create(
        cls,
        n_parallel_workers: int,
        *,
        topology: str,
        labels: Iterable[str] | None,
        node_ids: int | list[int] | None,
        auto_recover: bool,
        max_retries: int,
        ray_address: str | None,
        num_cpus: float,
        run_id: str | None,
    ) -> RunSpec:
        """The spec `Parallel.runner` was asked for, checked (see there for the arguments)."""
        if topology not in TOPOLOGIES:
            raise FrameworkError(f"unknown topology '{topology}': use one of {', '.join(TOPOLOGIES)}")
        if n_parallel_workers < 1:
            raise FrameworkError(f"n_parallel_workers must be at least 1, got {n_parallel_workers}")
        if not num_cpus >= 0:  # NaN too
            raise FrameworkError(f"num_cpus must be 0 or more, got {num_cpus}")
        if max_retries < 0:
            raise FrameworkError(f"max_retries must be 0 or more, got {max_retries}")
        if node_ids is None:
            ids = list(range(n_parallel_workers))
        elif isinstance(node_ids, int):
            ids = list(range(node_ids, node_ids + n_parallel_workers))
        else:
            ids = [int(n) for n in node_ids]
            if len(ids) != n_parallel_workers or len(set(ids)) != len(ids):
                raise FrameworkError(f"node_ids must be {n_parallel_workers} distinct ids, got {ids}")
        if min(ids) < 0:
            raise FrameworkError(f"node_ids must be 0 or more (as raytrain run --node-ids takes them), got {ids}")
        return cls(
            ids,
            topology,
            sorted(as_labels(labels)),
            auto_recover,
            max_retries,
            ray_address,
            num_cpus,
            run_id or uuid.uuid4().hex[:12],
        )


_importing: list[str] | None = None
"""While `raytrain run` imports the module of `--main` (`importing_main`): what it refused meanwhile; else None."""


@contextmanager
def importing_main() -> Iterator[list[str]]:
    """While `raytrain run` imports the module of `--main`: a runner called then (a script's own top-level
    `Parallel.runner(...)(main)`, with no `__main__` guard) raises, and its message goes in the list yielded. The
    pipeline ran as the module was imported, then once more from `--main`."""
    global _importing
    _importing = []
    try:
        yield _importing
    finally:
        _importing = None


def _refuse_running_on_import(main: Callable[..., Any], refused: list[str]) -> None:
    import os
    import sys

    frame = sys._getframe(2)  # the module's own line: its code, then Runner.__call__, then here
    file = frame.f_code.co_filename
    shown = os.path.relpath(file) if os.path.abspath(file).startswith(os.getcwd() + os.sep) else file
    said = (f"{shown}:{frame.f_lineno} runs Parallel.runner(...)({getattr(main, '__name__', 'main')}) as it is "
            "imported: raytrain run imports the module and runs --main on every node itself; put that call under "
            '`if __name__ == "__main__":`')
    refused.append(said)
    raise FrameworkError(said)


@dataclass(frozen=True)
class Runner:
    """What `Parallel.runner(...)` returns: `runner(main, *args, **kwargs)` runs `main` on every node."""

    spec: RunSpec
    """What the run will use (read by tests and tools)."""

    def __call__(self, main: Callable[..., Any], *args: Any, **kwargs: Any) -> list[Any]:
        """Run `main(*args, **kwargs)` on every node; return their results in node id order."""
        if _importing is not None:
            _refuse_running_on_import(main, _importing)
        return run(self.spec, main, args, kwargs)

    def run_for_effect(self, main: Callable[..., Any]) -> None:
        """Run `main()` on every node, as `raytrain run` does: what it returns is dropped where it is returned."""
        run(self.spec, main, (), {}, keep_results=False)

    def connect(self) -> None:
        """Join (or start) the run's Ray and check that its nodes fit there, as a call does first.

        For a caller that installs its own signal handlers: `ray.init` installs Ray's SIGTERM handler. Nothing
        to do with one worker (it runs in this process, without Ray).

        Raises:
            NoRoomError: the nodes' CPUs (`num_cpus` each) do not all fit on the Ray cluster at once.
        """
        connect(self.spec)


def _process_router() -> Router:
    # The process's router is `Parallel`'s (DI-engine code reaches it as `Parallel()`); parallel.py imports
    # this module, so the import waits until a run needs it.
    from raytrain.framework.parallel import Parallel

    return Parallel.current()


class NodeActor:
    """One node of a run: runs `main` with this process's router active as the node."""

    def __init__(self, run_id: str, node_id: int, node_ids: list[int], topology: str, labels: list[str]) -> None:
        self.node_id = node_id
        self.router = _process_router()
        self.router.activate(run_id, node_id, node_ids, topology, labels)
        self.router.open_inbox()

    def __repr__(self) -> str:  # Ray prefixes this node's stdout/stderr lines with it
        return f"node.{self.node_id}"

    def connect(self, peers: PeerHandles) -> bool:
        self.router.connect(peers)
        return True

    def deliver(self, sender_key: str, seq: int, batch: Batch) -> None:
        self.router.deliver_batch(sender_key, seq, batch)

    def finish(self) -> None:
        self.router.receive(FINISH)

    def peer_done(self, node_id: int) -> None:
        self.router.peer_done(node_id)

    def run(self, main: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], retries: int = 0,
            keep_result: bool = True) -> Any:
        self.router.retries = retries
        try:
            result = main(*args, **kwargs)
            return result if keep_result else None  # a result nobody reads need not pickle
        finally:
            self.router.flush()


def _spread(n: int) -> list[Any]:
    """A scheduling strategy per node: round-robin over the alive Ray nodes, this machine's first.

    Ray places an actor that demands no resource at all on a random node, whatever its strategy
    (ray-project/ray#27577), so the nodes also demand 1 byte of `memory`. The affinity is soft, so a node
    restarted after its machine died (auto_recover) goes wherever Ray finds room, and a machine without room
    for a node's CPUs gives it to another.
    """
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    here = ray.get_runtime_context().get_node_id()
    alive = sorted((node["NodeID"] for node in ray.nodes() if node.get("Alive")), key=lambda node_id: (node_id != here, node_id))
    if len(alive) <= 1:
        return ["SPREAD"] * n
    return [NodeAffinitySchedulingStrategy(alive[i % len(alive)], soft=True) for i in range(n)]


def _main_code_by_value(main: Callable[..., Any]) -> None:
    """Ship the code of `main`'s own module or package with it, and of every module or package imported from the
    folder that holds it (DI-engine's `--package` layout: main's module imports a module beside it), so nodes need
    neither have it installed nor be started from that folder."""
    import sys

    from ray import cloudpickle  # Ray pickles with its own copy of cloudpickle

    module = getattr(main, "__module__", None)
    if not module or module == "__main__":
        return
    top = sys.modules.get(module.split(".")[0])
    if top is None or not _users_own(top):
        return  # installed: the nodes import it themselves
    folder = _holding_folder(top)
    beside = [m for name, m in list(sys.modules.items()) if "." not in name and m is not top and m is not None
              and folder is not None and _holding_folder(m) == folder and _users_own(m)]
    for shipped in (top, *beside):
        try:
            cloudpickle.register_pickle_by_value(shipped)
        except ValueError:
            pass


def _users_own(module: Any) -> bool:
    """Whether a top-level module is the user's own code: not raytrain's or Ray's (an editable install lies in a
    folder like any other), nor installed, nor Python's."""
    import sys

    path = getattr(module, "__file__", None) or ""
    return (module.__name__ not in ("raytrain", "ray", "builtins") and "site-packages" not in path
            and "dist-packages" not in path and not path.startswith(sys.base_prefix))


def _holding_folder(module: Any) -> str | None:
    """The folder a top-level module of Python source was imported from (`f/mod.py`, `f/pkg/__init__.py`: f), else None."""
    import os

    path = getattr(module, "__file__", None)
    if not isinstance(path, str) or not path.endswith(".py"):
        return None
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.basename(path) == "__init__.py":
        folder = os.path.dirname(folder)
    return folder


class NoRoomError(FrameworkError):
    """The run's nodes do not all fit on the Ray cluster at once: they would wait for each other forever."""

    exit_code = 2


def connect(spec: RunSpec) -> None:
    """Join (or start) the Ray of a run of several nodes and check that every node's CPUs fit there at once."""
    if len(spec.ids) == 1:
        return
    from raytrain.ray_session import init_ray

    init_ray(spec.ray_address, include_dashboard=False, log_to_driver=True, configure_logging=False)
    _check_room(spec)


def _check_room(spec: RunSpec) -> None:
    """Every node of the run is placed before any of them runs (they connect to each other first), so nodes
    that do not all fit on the cluster's machines at once would wait for CPUs forever, with nothing said."""
    if spec.num_cpus <= 0:
        return
    import math

    import ray

    cpus = [node["Resources"].get("CPU", 0.0) for node in ray.nodes() if node.get("Alive")]
    room = sum(math.floor(c / spec.num_cpus + 1e-9) for c in cpus)
    if room < len(spec.ids):
        machines = f"{len(cpus)} machine{'s' if len(cpus) != 1 else ''} with {', '.join(f'{c:g}' for c in cpus)} CPUs"
        raise NoRoomError(
            f"{len(spec.ids)} nodes of num_cpus={spec.num_cpus:g} CPUs each do not fit on the Ray cluster ({machines}): "
            f"it has room for {room}. Lower num_cpus (`--num-cpus`; 0 reserves none) or the number of nodes, or add "
            "machines to the cluster"
        )


def run(spec: RunSpec, main: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any],
        keep_results: bool = True) -> list[Any]:
    """Run `main(*args, **kwargs)` on every node of `spec`; their results in the order of `spec.ids` (all None
    without `keep_results`: `raytrain run` reads none, and one Ray cannot pickle failed its node)."""
    if len(spec.ids) == 1:
        # As in DI-engine: one worker runs in this process, with the router active as its node.
        router = _process_router()
        router.activate(spec.run_id, spec.ids[0], spec.ids, spec.topology, spec.labels)
        try:
            return [main(*args, **kwargs)]
        finally:
            router.deactivate()

    import ray

    connect(spec)
    _main_code_by_value(main)
    actor_cls: Any = ray.remote(NodeActor)
    retries = spec.max_retries if spec.auto_recover else 0
    placement = _spread(len(spec.ids))
    actors: dict[int, Any] = {}
    for i, nid in enumerate(spec.ids):
        actors[nid] = actor_cls.options(
            name=f"raytrain.{spec.run_id}.node.{nid}",
            num_cpus=spec.num_cpus,
            memory=1,  # a non-empty demand: Ray places actors that demand nothing on a random node
            max_concurrency=4,
            max_restarts=retries,
            max_task_retries=-1 if retries else 0,
            scheduling_strategy=placement[i],
        ).remote(spec.run_id, nid, spec.ids, spec.topology, spec.labels)
    results: dict[int, Any] = {}
    failure: NodeError | None = None
    try:
        ray.get([a.connect.remote(actors) for a in actors.values()])
        pending = {actors[nid].run.options(max_task_retries=0).remote(main, args, kwargs, 0, keep_results): nid
                   for nid in spec.ids}
        attempts: dict[int, int] = defaultdict(int)
        while pending and failure is None:
            done, _ = ray.wait(list(pending), num_returns=1, timeout=1.0)
            for ref in done:
                nid = pending.pop(ref)
                try:
                    results[nid] = ray.get(ref)
                    _tell_done(actors, nid, pending.values())
                except Exception as e:  # noqa: BLE001 - RayTaskError or RayActorError
                    message, tb = _describe(e)
                    if attempts[nid] < retries:
                        attempts[nid] += 1
                        log.warning(
                            "node %s failed (%s); restarting it (%d of %d)", nid, message, attempts[nid], retries
                        )
                        ray.get(actors[nid].connect.remote(actors))
                        pending[actors[nid].run.options(max_task_retries=0).remote(
                            main, args, kwargs, attempts[nid], keep_results)] = nid
                    else:
                        failure = NodeError(nid, message, tb)
                        break
        if failure is not None:
            _stop_nodes(actors, pending)
            raise failure
    except KeyboardInterrupt:
        _stop_nodes(actors, {})
        raise
    finally:
        for actor in actors.values():
            try:
                ray.kill(actor, no_restart=True)
            except Exception:  # noqa: BLE001 - already gone
                pass
    return [results.get(nid) for nid in spec.ids]


def _tell_done(actors: dict[int, Any], nid: int, running: Iterable[int]) -> None:
    """Tell the nodes still running that node `nid`'s `main` returned (it sends nothing more)."""
    for other in set(running):
        try:
            actors[other].peer_done.remote(nid)
        except Exception:  # noqa: BLE001 - gone: its own result says why
            pass


def _stop_nodes(actors: dict[int, Any], pending: dict[Any, int], grace_s: float = 3.0) -> None:
    """Ask every node to finish, give them `grace_s` to end their step, then the caller kills them."""
    import ray

    for actor in actors.values():
        try:
            actor.finish.remote()
        except Exception:  # noqa: BLE001
            pass
    if pending:
        ray.wait(list(pending), num_returns=len(pending), timeout=grace_s)


def _describe(error: Exception) -> tuple[str, str]:
    """The original error's one-line message and the remote traceback text of a Ray error."""
    cause = getattr(error, "cause", None)
    if cause is not None and not isinstance(cause, type(error)):
        message = f"{type(cause).__name__}: {cause}".splitlines()[0]
    else:
        message = str(error).strip().splitlines()[-1] if str(error).strip() else type(error).__name__
    from ray.exceptions import RayTaskError

    if isinstance(error, RayTaskError):
        return message, node_traceback(str(error))
    text = str(error)
    if "Traceback" not in text:
        text = "".join(traceback.format_exception(error))
    return message, text


_COLOUR = re.compile(r"\x1b\[[0-9;]*m")
_RUNNER = "/raytrain/framework/runner.py"  # this file, wherever a node has raytrain installed


def node_traceback(ray_text: str) -> str:
    """The traceback of a node's `main` from what Ray's RayTaskError prints: Ray's header (`ray::NodeActor.run()
    (pid=..., ip=...)`, coloured) back to `Traceback (most recent call last):`, without raytrain's runner frame
    that called `main` and without the carets left of the Ray frames Ray hid. The caller's own frames (its
    `ray.get`) are not in it."""
    kept: list[str] = []
    in_runner = False
    for line in _COLOUR.sub("", ray_text).splitlines():
        if line.startswith("ray::"):
            line, in_runner = "Traceback (most recent call last):", False
        elif line.startswith("  File "):
            in_runner = line.partition('"')[2].partition('"')[0].endswith(_RUNNER)
        elif in_runner and line.startswith("    "):
            continue
        elif line.strip() and not line.strip("^ "):  # carets: kept under the source line they point at
            if not kept or not kept[-1].startswith("    ") or not kept[-1].strip("^ "):
                continue
        if not in_runner:
            kept.append(line)
    return "\n".join(kept)

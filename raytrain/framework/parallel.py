"""`Parallel`: DI-engine's parallel API on Ray; nodes of a run as Ray actors, events through their inboxes.

The work is split by concern; this module keeps the public face and re-exports the rest:

- `payload.py`: a `Message` between nodes and how its arguments are encoded (large ones via the object store);
- `transport.py`: the `Outbox` / `Inbox` threads that move batches of messages between node actors;
- `router.py`: `Router`, a node as its task sees it (identity, raw topics, task events in and out);
- `runner.py`: `Runner` / `NodeActor`, starting the nodes, collecting results, failures and restarts.

`Parallel` is the `Router` of this process, as DI-engine's singleton `Parallel()` is, with `Parallel.runner`.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Iterable
from typing import Any, ClassVar

from raytrain.framework.payload import LARGE_PAYLOAD_BYTES, Message, MessageKind, decode, encode
from raytrain.framework.router import TOPOLOGIES, Router, receivers
from raytrain.framework.runner import NodeActor, NodeError, Runner, RunSpec
from raytrain.framework.transport import MAX_INFLIGHT_BATCHES

__all__ = [
    "LARGE_PAYLOAD_BYTES",
    "MAX_INFLIGHT_BATCHES",
    "TOPOLOGIES",
    "TRANSPORT_KEYWORDS",
    "Message",
    "MessageKind",
    "NodeActor",
    "NodeError",
    "Parallel",
    "Router",
    "RunSpec",
    "Runner",
    "TransportKeywordWarning",
    "decode",
    "encode",
    "receivers",
]

TRANSPORT_KEYWORDS = {
    "mq_type": "picks DI-engine's message queue (nng, redis); events here travel between Ray actors",
    "protocol": "picks nng's transport (ipc, tcp)",
    "address": "is nng's bind address (an IP or a file path), not a Ray address",
    "ports": "are nng's listening ports",
    "attach_to": "lists nng addresses of another run to dial; attaching to another run is not provided",
    "redis_host": "is the redis message queue's host",
    "redis_port": "is the redis message queue's port",
    "startup_interval": "spaces out DI-engine's process starts; Ray actors start on their own and their inboxes "
    "buffer events sent before they run",
}
"""DI-engine's `Parallel.runner` keywords that configure its own transport: accepted, and ignored with one warning."""


class TransportKeywordWarning(UserWarning):
    """DI-engine transport keywords given to `Parallel.runner` mean nothing on Ray and were ignored."""


class _ProcessRouter(type):
    """`Parallel()` returns this process's router, as DI-engine's singleton `Parallel()` does."""

    def __call__(cls) -> Parallel:
        return Parallel.current()


class Parallel(Router, metaclass=_ProcessRouter):
    """One node of a parallel run (DI-engine's `Parallel`): `task.router` in every process.

    `Parallel()` returns this process's router, the same object every time (as in DI-engine): inside a node
    of a run it is that node (`node_id`, `is_active`, `labels`), elsewhere an inactive one. `on` / `emit`
    carry raw topics between nodes, separate from task events. `Parallel.runner(...)` starts a run. Tests
    (and libraries) can install another router with `Parallel.replace(...)`, or give one to `Task(router=...)`.
    """

    _current: ClassVar[Parallel | None] = None
    _current_lock: ClassVar[threading.Lock] = threading.Lock()

    @classmethod
    def current(cls) -> Parallel:
        """This process's router (inactive outside a parallel run); what `Parallel()` returns."""
        with Parallel._current_lock:
            if Parallel._current is None:
                Parallel._current = cls.fresh()
            return Parallel._current

    @classmethod
    def fresh(cls) -> Parallel:
        """A new, inactive router that is not this process's (for `Task(router=...)` or `replace`)."""
        router: Parallel = type.__call__(cls)
        return router

    @classmethod
    def replace(cls, router: Parallel | None = None) -> Parallel | None:
        """Make `router` this process's router (None: a fresh one on the next `Parallel()`); returns the old one.

        For tests: `old = Parallel.replace(Parallel.fresh())` ... `Parallel.replace(old)`.
        """
        with Parallel._current_lock:
            old, Parallel._current = Parallel._current, router
        return old

    @classmethod
    def runner(
        cls,
        n_parallel_workers: int,
        *,
        topology: str = "mesh",
        labels: Iterable[str] | None = None,
        node_ids: int | list[int] | None = None,
        auto_recover: bool = False,
        max_retries: int = 3,
        ray_address: str | None = None,
        num_cpus: float = 0,
        run_id: str | None = None,
        mq_type: str | None = None,
        protocol: str | None = None,
        address: str | None = None,
        ports: int | list[int] | None = None,
        attach_to: list[str] | None = None,
        redis_host: str | None = None,
        redis_port: int | None = None,
        startup_interval: float | None = None,
    ) -> Runner:
        """A `Runner`: `runner(main, *args, **kwargs)` runs `main` on every node and returns their results.

        Every argument after `n_parallel_workers` is a keyword (DI-engine's and raytrain's positional orders
        differ, so a positional one would silently mean the wrong thing).

        Args:
            n_parallel_workers: how many nodes.
            topology: `mesh` (every node hears every other), `star` (the first node hears the leaves, the
                leaves hear only it) or `alone` (no events between nodes).
            labels: labels every node has (besides `distributed` and `node.<id>`).
            node_ids: None for 0..n-1, an int k for k..k+n-1, or the list of ids.
            auto_recover: restart a node whose `main` raised or whose process died (up to `max_retries`).
            ray_address: the Ray cluster (default: the one this process is connected to, `RAY_ADDRESS`, or a
                local Ray started on the spot).
            num_cpus: CPUs each node's actor reserves (0: nodes are spread and do not wait for free CPUs).
            run_id: the run's name on the cluster (default: a random one).
            mq_type, protocol, address, ports, attach_to, redis_host, redis_port, startup_interval: DI-engine's
                transport settings (nng / redis). Accepted so DI-engine code runs unchanged, and ignored with one
                `TransportKeywordWarning`: nodes here are Ray actors and events travel through Ray. `address`
                keeps DI-engine's meaning (nng's bind address); the Ray cluster is `ray_address`.
        """
        given = {
            "mq_type": mq_type,
            "protocol": protocol,
            "address": address,
            "ports": ports,
            "attach_to": attach_to,
            "redis_host": redis_host,
            "redis_port": redis_port,
            "startup_interval": startup_interval,
        }
        ignored = {k: v for k, v in given.items() if v is not None}
        if ignored:
            warnings.warn(_transport_warning(ignored), TransportKeywordWarning, stacklevel=2)
        spec = RunSpec.create(
            n_parallel_workers,
            topology=topology,
            labels=labels,
            node_ids=node_ids,
            auto_recover=auto_recover,
            max_retries=max_retries,
            ray_address=ray_address,
            num_cpus=num_cpus,
            run_id=run_id,
        )
        return Runner(spec)


def _transport_warning(ignored: dict[str, Any]) -> str:
    reasons = "; ".join(f"{k}={v!r} {TRANSPORT_KEYWORDS[k]}" for k, v in ignored.items())
    hint = " For the Ray cluster, give ray_address= (or set RAY_ADDRESS, or `raytrain run --address`)."
    return (
        f"Parallel.runner: ignored {', '.join(ignored)}: these are DI-engine's transport settings and mean nothing "
        f"on Ray, where every node is a Ray actor and events travel through Ray ({reasons})."
        + (hint if "address" in ignored else "")
    )

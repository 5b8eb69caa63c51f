"""`Router`: one node of a parallel run as its task sees it (`task.router`).

It knows the node's identity (id, labels, the run's topology), sends this node's task events and raw
topics to the nodes the topology reaches (through an `Outbox`), and hands what arrives (through an
`Inbox`) to the task attached to it, or to its own raw-topic handlers. Task events that arrive before a
task is attached wait for it. `Parallel` (parallel.py) is this class as DI-engine's process-wide router.
"""

from __future__ import annotations

import threading
import uuid
from collections import deque
from collections.abc import Iterable
from typing import Any, Protocol

from raytrain.errors import FrameworkError
from raytrain.framework.events import EventBus, Subscriptions
from raytrain.framework.payload import FINISH, Message, MessageKind
from raytrain.framework.transport import Batch, Inbox, Outbox, PeerHandles

TOPOLOGIES = ("mesh", "star", "alone")


def receivers(topology: str, node_ids: list[int], node_id: int) -> tuple[int, ...]:
    """Who hears `node_id`'s emits: mesh every other node; star the centre (first id) and its leaves."""
    if topology == "mesh":
        return tuple(n for n in node_ids if n != node_id)
    if topology == "star":
        centre = node_ids[0]
        return tuple(n for n in node_ids if n != centre) if node_id == centre else (centre,)
    if topology == "alone":
        return ()
    raise FrameworkError(f"unknown topology '{topology}': use one of {', '.join(TOPOLOGIES)}")


def as_labels(labels: str | Iterable[str] | None) -> set[str]:
    """Labels as given to `task.start` or `Parallel.runner`: one string is one label (as `match_labels` takes one
    pattern), not its letters."""
    if labels is None:
        return set()
    items = [labels] if isinstance(labels, str) else list(labels)
    if wrong := [item for item in items if not isinstance(item, str)]:
        raise FrameworkError(f"labels: give strings (got {wrong[0]!r})")
    return set(items)


class RemoteEvents(Protocol):
    """What a router hands a task (`Task` is one): events and finish from other nodes."""

    def deliver_remote(self, event: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """An event another node emitted."""

    def finish_remote(self) -> None:
        """Another node finished: end this node's run after its current step."""

    def senders_gone(self, why: str) -> None:
        """Every node that could send to this one has finished (`why`): no event can come from another node."""


class Router(Subscriptions):
    """One node of a parallel run: identity, raw topics (`on` / `emit`), and the transport of task events.

    Inactive (`is_active` False, `node_id` None) until a runner activates it as a node.
    """

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self.node_id: int | None = None
        self.is_active = False
        self.labels: set[str] = set()
        self.retries = 0
        """How many times this node's `main` was restarted (`auto_recover`); 0 on the first attempt."""
        self.run_id: str | None = None
        self.topology = "alone"
        self.node_ids: list[int] = []
        self._targets: tuple[int, ...] = ()
        self._bus = EventBus("topic")
        self._lock = threading.RLock()
        self._task: RemoteEvents | None = None
        self._pending: deque[tuple[str, tuple[Any, ...], dict[str, Any]]] = deque()
        self._finish_pending = False
        self._done: set[int] = set()
        """The nodes whose `main` returned (told by the runner, in order with what they sent)."""
        self._senders_gone: str | None = None
        self._outbox: Outbox | None = None
        self._inbox: Inbox | None = None

    @property
    def _retries(self) -> int:
        # DI-engine's name for it (its tests and recovery code read `router._retries`).
        return self.retries

    # -- set-up (by the runner / node actor) -------------------------------------------------------
    def activate(self, run_id: str, node_id: int, node_ids: list[int], topology: str, labels: Iterable[str]) -> None:
        """Become node `node_id` of the run `run_id`."""
        self.run_id = run_id
        self.node_id = node_id
        self.node_ids = list(node_ids)
        self.topology = topology
        self.labels = set(labels)
        self._targets = receivers(topology, self.node_ids, node_id)
        self.is_active = True

    def open_inbox(self) -> None:
        """Start receiving (a node actor does this when it is created, before any peer may send)."""
        if self._inbox is None:
            self._inbox = Inbox(self.receive)

    def connect(self, peers: PeerHandles) -> None:
        """Handles of the other nodes' actors; starts the sender and the inbox threads."""
        peers = {n: h for n, h in peers.items() if n != self.node_id}
        if self._outbox is None:
            self._outbox = Outbox(uuid.uuid4().hex, peers)
        else:
            self._outbox.peers = peers
        self.open_inbox()

    def deactivate(self) -> None:
        """Send what is queued, stop the threads and become inactive again (the same object)."""
        if self._outbox is not None:
            self._outbox.flush(5.0)
            self._outbox.close()
        if self._inbox is not None:
            self._inbox.close()
        self._reset()

    def flush(self, timeout: float = 30.0) -> None:
        """Wait until every message this node sent was delivered (or `timeout`)."""
        if self._outbox is not None:
            self._outbox.flush(timeout)

    # -- raw topics (on / once / off from Subscriptions) -------------------------------------------
    def emit(self, topic: str, *args: Any, **kwargs: Any) -> None:
        """Send a raw topic to the nodes the topology reaches (never to this node)."""
        if not self.is_active:
            raise FrameworkError(f"cannot emit topic '{topic}': this process is not a node of a parallel run")
        self._send(MessageKind.TOPIC, topic, args, kwargs)

    # -- used by Task ------------------------------------------------------------------------------
    def attach(self, task: RemoteEvents) -> None:
        """`task` receives task events from now on, starting with those that arrived before it started."""
        with self._lock:
            self._task = task
            if self._finish_pending:
                task.finish_remote()
            if self._senders_gone is not None:
                task.senders_gone(self._senders_gone)
            while self._pending:
                task.deliver_remote(*self._pending.popleft())

    def detach(self, task: RemoteEvents) -> None:
        """`task` stopped: send what it emitted, and keep later events for the next task attached."""
        self.flush()
        with self._lock:
            if self._task is task:
                self._task = None

    def send_event(self, event: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """Send a task event to the nodes the topology reaches."""
        self._send(MessageKind.EVENT, event, args, kwargs)

    def send_finish(self) -> None:
        """Tell every other node (whatever the topology) to end its run after the current step."""
        targets = tuple(n for n in self.node_ids if n != self.node_id)
        if targets and self._outbox is not None:
            self._outbox.send(targets, FINISH)

    def _send(self, kind: MessageKind, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        if not self._targets or self._outbox is None:
            return
        self._outbox.send(self._targets, Message.pack(kind, name, args, kwargs))

    def peer_done(self, node_id: int) -> None:
        """Node `node_id`'s `main` returned: after what it sent is handed on, a wait_for that only it or other
        finished nodes could satisfy ends (`senders_gone`)."""
        done = Message(MessageKind.DONE, str(node_id))
        if self._inbox is not None:
            self._inbox.put_after(done)
        else:
            self.receive(done)

    # -- receiving ---------------------------------------------------------------------------------
    def deliver_batch(self, sender_key: str, seq: int, batch: Batch) -> None:
        """A batch of messages from another node's outbox (its `seq`-th to this node)."""
        if self._inbox is None:
            raise FrameworkError(f"node {self.node_id} received events before it was connected")
        self._inbox.put(sender_key, seq, batch)

    def receive(self, message: Message) -> None:
        """Hand one message from another node on: finish and events to the task, raw topics to `on`."""
        if message.kind is MessageKind.FINISH:
            with self._lock:
                self._finish_pending = True
                if self._task is not None:
                    self._task.finish_remote()
            return
        if message.kind is MessageKind.DONE:
            self._note_done(int(message.name))
            return
        args, kwargs = message.unpack()
        if message.kind is MessageKind.TOPIC:
            self._bus.dispatch(message.name, args, kwargs, remote=True)
            return
        with self._lock:
            task = self._task
            if task is None:
                self._pending.append((message.name, args, kwargs))
                return
        task.deliver_remote(message.name, args, kwargs)

    def _note_done(self, node_id: int) -> None:
        assert self.node_id is not None  # a node receives
        senders = [n for n in self.node_ids if n != self.node_id and self.node_id in receivers(self.topology, self.node_ids, n)]
        with self._lock:
            self._done.add(node_id)
            if self._senders_gone is not None or node_id not in senders or not set(senders) <= self._done:
                return
            names = ", ".join(f"node {n}" for n in senders)
            self._senders_gone = f"every node that could send it ({names}) has finished"
            task = self._task
        if task is not None:
            task.senders_gone(self._senders_gone)

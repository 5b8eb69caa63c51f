"""Moving `Message`s between node actors: an `Outbox` thread that sends, an `Inbox` thread that receives.

The outbox batches everything queued for one receiver into a single actor call (one call per event could
not pass ~1,000 events/s), with a bounded number of calls in flight per receiver. The receiving actor puts
batches, in each sender's order, on an in-process queue that the inbox's thread hands on one message at a
time: nothing is dropped, whether the receiver subscribed late or a burst came.
"""

from __future__ import annotations

import itertools
import logging
import queue
import threading
import time
from collections import defaultdict, deque
from collections.abc import Callable
from typing import Any

from raytrain.framework.payload import Message

log = logging.getLogger("raytrain.framework")

MAX_INFLIGHT_BATCHES = 16
"""Batches sent to one receiver and not yet acknowledged before the sender waits (back pressure)."""

Batch = list[Message]
PeerHandles = dict[int, Any]
"""Node id -> that node's actor handle (its `deliver(sender_key, seq, batch)` method receives batches)."""


class Outbox:
    """Batches outgoing messages per receiver in a sender thread; bounded in-flight calls per receiver."""

    def __init__(self, sender_key: str, peers: PeerHandles) -> None:
        self.key = sender_key
        self.peers = peers
        self._cv = threading.Condition()
        self._queue: deque[tuple[tuple[int, ...], Message]] = deque()
        self._seq: dict[int, itertools.count[int]] = defaultdict(itertools.count)
        self._inflight: dict[int, list[Any]] = defaultdict(list)
        self._busy = False
        self._closed = False
        self._warned: set[int] = set()
        self._thread = threading.Thread(target=self._loop, name="raytrain-outbox", daemon=True)
        self._thread.start()

    def send(self, targets: tuple[int, ...], message: Message) -> None:
        """Queue `message` for the nodes `targets`; the sender thread delivers it."""
        with self._cv:
            self._queue.append((targets, message))
            self._cv.notify()

    def _loop(self) -> None:
        while True:
            with self._cv:
                while not self._queue and not self._closed:
                    self._cv.wait()
                if self._closed and not self._queue:
                    return
                items = list(self._queue)
                self._queue.clear()
                self._busy = True
            try:
                batches: dict[int, Batch] = defaultdict(list)
                for targets, message in items:
                    for t in targets:
                        batches[t].append(message)
                for target, batch in batches.items():
                    self._deliver(target, batch)
            except Exception:  # noqa: BLE001 - the sender thread must survive anything
                log.exception("raytrain: sending events failed")
            finally:
                with self._cv:
                    self._busy = False
                    self._cv.notify_all()

    def _deliver(self, target: int, batch: Batch) -> None:
        import ray

        handle = self.peers.get(target)
        if handle is None:
            return
        inflight = self._inflight[target]
        inflight.append(handle.deliver.remote(self.key, next(self._seq[target]), batch))
        if len(inflight) > MAX_INFLIGHT_BATCHES:
            done, rest = ray.wait(inflight, num_returns=len(inflight) - MAX_INFLIGHT_BATCHES)
            self._inflight[target] = rest
            self._check(target, done)

    def _check(self, target: int, refs: list[Any]) -> None:
        import ray

        for ref in refs:
            try:
                ray.get(ref)
            except Exception as e:  # noqa: BLE001 - a dead node: say so once
                if target not in self._warned:
                    self._warned.add(target)
                    log.warning("raytrain: node %s did not receive events: %s", target, str(e).splitlines()[0])

    def flush(self, timeout: float = 30.0) -> None:
        """Wait until everything queued was delivered to its receivers (or `timeout`)."""
        import ray

        deadline = time.monotonic() + timeout
        with self._cv:
            while (self._queue or self._busy) and time.monotonic() < deadline:
                self._cv.wait(0.05)
        for target, refs in list(self._inflight.items()):
            if refs:
                done, rest = ray.wait(refs, num_returns=len(refs), timeout=max(0.0, deadline - time.monotonic()))
                self._inflight[target] = rest
                self._check(target, done)

    def close(self) -> None:
        """End the sender thread once what is queued was sent."""
        with self._cv:
            self._closed = True
            self._cv.notify_all()


class Inbox:
    """Batches from other nodes, put back in each sender's order, handed to a dispatcher thread.

    A threaded actor may run two deliveries out of order, so each batch carries its sender's sequence
    number and a batch that comes early waits for the ones before it. A gap that does not fill within
    `GAP_TIMEOUT_S` (batches that went to an earlier incarnation of this node, before a restart) is skipped.
    """

    GAP_TIMEOUT_S = 1.0

    def __init__(self, dispatch: Callable[[Message], None]) -> None:
        self._dispatch = dispatch
        self._queue: queue.SimpleQueue[Batch | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._expected: dict[str, int] = {}
        self._held: dict[str, dict[int, tuple[float, Batch]]] = defaultdict(dict)
        self._thread = threading.Thread(target=self._loop, name="raytrain-inbox", daemon=True)
        self._thread.start()

    def put(self, sender_key: str, seq: int, batch: Batch) -> None:
        """A batch from the sender `sender_key`, the `seq`-th it sent to this node."""
        with self._lock:
            expected = self._expected.get(sender_key, 0)
            if seq < expected:  # after a skipped gap: late, but never dropped
                self._queue.put(batch)
            elif seq > expected:
                self._held[sender_key][seq] = (time.monotonic(), batch)
            else:
                self._queue.put(batch)
                self._release(sender_key, expected + 1)

    def put_after(self, message: Message) -> None:
        """A message of this node's own, handed on after every batch put so far."""
        self._queue.put([message])

    def _release(self, sender_key: str, expected: int) -> None:
        held = self._held.get(sender_key, {})
        while expected in held:
            self._queue.put(held.pop(expected)[1])
            expected += 1
        self._expected[sender_key] = expected

    def _skip_gaps(self) -> None:
        now = time.monotonic()
        with self._lock:
            for sender_key, held in self._held.items():
                if held and now - min(t for t, _ in held.values()) > self.GAP_TIMEOUT_S:
                    self._release(sender_key, min(held))

    def _loop(self) -> None:
        while True:
            try:
                batch = self._queue.get(timeout=self.GAP_TIMEOUT_S / 2)
            except queue.Empty:
                self._skip_gaps()
                continue
            if batch is None:
                return
            for message in batch:
                try:
                    self._dispatch(message)
                except Exception:  # noqa: BLE001 - one bad message must not stop the inbox
                    log.exception("raytrain: could not deliver an event from another node")
            if any(self._held.values()):
                self._skip_gaps()

    def close(self) -> None:
        """End the dispatcher thread after the batches already queued."""
        self._queue.put(None)

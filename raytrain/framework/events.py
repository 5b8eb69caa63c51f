"""Event handlers by glob pattern: on / once / off / dispatch / wait_for.

One `EventBus` holds the handlers of a task (task events) or of a router (raw topics). Handlers of one
dispatch run in registration order. A handler that raises is reported with the event's name and does not
stop the other handlers or any later dispatch (DI-engine re-raises that error from every later emit).

Events that arrive from other nodes while no handler matches are kept (up to `backlog_limit`) and handed
to the first handler registered for them later, so a node that subscribes late loses nothing.
"""

from __future__ import annotations

import fnmatch
import logging
import math
import threading
import traceback
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from raytrain.errors import FrameworkError

log = logging.getLogger("raytrain.framework")


@dataclass(eq=False)
class _Handler:
    pattern: str
    fn: Callable
    once: bool
    fired: bool = field(default=False)

    def matches(self, event: str) -> bool:
        return self.pattern == event or fnmatch.fnmatchcase(event, self.pattern)


@dataclass
class HandlerError:
    """A handler that raised: which event, which handler, and the traceback text."""

    event: str
    handler: str
    error: BaseException
    traceback: str

    def __str__(self) -> str:
        return f"handler {self.handler} of event '{self.event}' raised {type(self.error).__name__}: {self.error}"


def _name(fn: Callable) -> str:
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or type(fn).__name__


class EventBus:
    """Handlers keyed by glob pattern, safe to use from several threads."""

    def __init__(self, kind: str = "event", backlog_limit: int = 100_000) -> None:
        self.kind = kind
        self.backlog_limit = backlog_limit
        self.errors: deque[HandlerError] = deque(maxlen=100)
        """The most recent handler errors (each is also logged)."""
        self._handlers: list[_Handler] = []
        self._lock = threading.RLock()
        # Remote deliveries and backlog replays are serialised so a late handler sees events in order.
        self._delivery = threading.RLock()
        self._backlog: deque[tuple[str, tuple, dict]] = deque()
        self._backlog_warned = False
        self._closed = False
        self._waiters: set[threading.Event] = set()
        self._senders_gone: str | None = None
        """Why no event can come from another node any more (every node that could send has finished), once so."""
        self._arrived: deque[str] = deque(maxlen=20)
        """The names of the latest events from other nodes, told by a wait that ends for want of senders."""
        self._arrivals = 0

    # -- registration ------------------------------------------------------------------------------
    def on(self, pattern: str, fn: Callable) -> None:
        self._register(_Handler(pattern, fn, once=False))

    def once(self, pattern: str, fn: Callable) -> None:
        self._register(_Handler(pattern, fn, once=True))

    def off(self, pattern: str, fn: Callable | None = None) -> None:
        """Remove the handlers registered on `pattern` (or on any event it matches); only `fn` if given."""
        with self._lock:
            self._handlers = [
                h
                for h in self._handlers
                if not (
                    (h.pattern == pattern or fnmatch.fnmatchcase(h.pattern, pattern)) and (fn is None or h.fn == fn)
                )
            ]

    def _register(self, handler: _Handler) -> None:
        if not callable(handler.fn):
            raise FrameworkError(f"the handler of {self.kind} '{handler.pattern}' is not callable: {handler.fn!r}")
        with self._delivery:
            with self._lock:
                replay = [item for item in self._backlog if handler.matches(item[0])]
                if handler.once and replay:
                    # Used up by the first kept event: it must not stay registered and take a later one.
                    replay = replay[:1]
                    handler.fired = True
                else:
                    self._handlers.append(handler)
                for item in replay:
                    self._backlog.remove(item)
            for event, args, kwargs in replay:
                self._run([handler], event, args, kwargs)

    def has_handlers(self, event: str) -> bool:
        with self._lock:
            return any(h.matches(event) for h in self._handlers)

    # -- dispatch ----------------------------------------------------------------------------------
    def dispatch(self, event: str, args: tuple = (), kwargs: dict | None = None, remote: bool = False) -> int:
        """Run every handler matching `event`, in registration order; returns how many ran.

        With `remote=True` (an event from another node) and no matching handler, the event is kept for the
        first handler registered for it later.
        """
        kwargs = kwargs or {}
        if not remote:
            return self._run(self._take(event), event, args, kwargs)
        with self._lock:
            self._arrived.append(event)
            self._arrivals += 1
        with self._delivery:
            handlers = self._take(event)
            if not handlers:
                self._keep(event, args, kwargs)
                return 0
            return self._run(handlers, event, args, kwargs)

    def _take(self, event: str) -> list[_Handler]:
        with self._lock:
            handlers = [h for h in self._handlers if h.matches(event)]
            once = [h for h in handlers if h.once]
            if once:
                # A once-handler fires for exactly one dispatch even when two threads emit together.
                handlers = [h for h in handlers if not h.once or not h.fired]
                for h in once:
                    h.fired = True
                self._handlers = [h for h in self._handlers if not (h.once and h.fired)]
            return handlers

    def _keep(self, event: str, args: tuple, kwargs: dict) -> None:
        with self._lock:
            if self._closed:
                return
            if len(self._backlog) >= self.backlog_limit:
                self._backlog.popleft()
                if not self._backlog_warned:
                    self._backlog_warned = True
                    log.warning(
                        "more than %d %ss arrived with no handler registered for them; dropping the oldest "
                        "(register a handler, e.g. task.on('%s', ...), for every event other nodes send)",
                        self.backlog_limit,
                        self.kind,
                        event,
                    )
            self._backlog.append((event, args, kwargs))

    def _run(self, handlers: list[_Handler], event: str, args: tuple, kwargs: dict) -> int:
        for h in handlers:
            try:
                h.fn(*args, **kwargs)
            except Exception as e:  # noqa: BLE001 - reported, and must not stop the other handlers
                err = HandlerError(event, _name(h.fn), e, traceback.format_exc())
                self.errors.append(err)
                log.error("%s\n%s", err, err.traceback)
        return len(handlers)

    # -- waiting -----------------------------------------------------------------------------------
    def wait_for(self, event: str, timeout: float = math.inf) -> tuple[tuple, dict]:
        """Block until `event` is dispatched; return its `(args, kwargs)`. Raise TimeoutError naming it."""
        got: list[tuple[tuple, dict]] = []
        ready = threading.Event()

        def catch(*args: Any, **kwargs: Any) -> None:
            got.append((args, kwargs))
            ready.set()

        with self._lock:
            if self._closed:
                raise FrameworkError(f"cannot wait for '{event}': the task is stopped")
            self._waiters.add(ready)
            arrivals = self._arrivals
        try:
            self.once(event, catch)
            with self._lock:
                gone = self._senders_gone
            if gone is None and not ready.wait(None if math.isinf(timeout) else max(0.0, timeout)):
                self.off(event, catch)
                if not got:  # it may have arrived between the timeout and off()
                    raise TimeoutError(f"wait_for('{event}') timed out after {timeout:g} s: no '{event}' event arrived")
            if not got:
                self.off(event, catch)
                with self._lock:
                    gone = self._senders_gone if not self._closed else None
                    came = self._arrivals - arrivals
                    instead = list(self._arrived)[-came:] if came else []
                if gone is not None and not got:
                    meanwhile = (f" (events that arrived while waiting: {', '.join(repr(e) for e in dict.fromkeys(instead))})"
                                 if instead else "")
                    # a timeout that came early: nothing can come (DI-engine's ignore_timeout_exception returns None)
                    raise TimeoutError(f"wait_for('{event}'): {gone}, and no '{event}' arrived{meanwhile}")
            if not got:
                raise FrameworkError(f"stopped while waiting for '{event}'")
            return got[0]
        finally:
            with self._lock:
                self._waiters.discard(ready)

    def senders_gone(self, why: str) -> None:
        """No event can come from another node any more (`why`): wake every wait_for (it raises TimeoutError, naming
        its event, unless its event came), and end each later one at once."""
        with self._lock:
            self._senders_gone = why
            waiters = list(self._waiters)
        for w in waiters:
            w.set()

    def close(self) -> None:
        """Drop every handler and the backlog; wake every wait_for (it raises)."""
        with self._lock:
            self._closed = True
            self._handlers.clear()
            self._backlog.clear()
            waiters = list(self._waiters)
        for w in waiters:
            w.set()

    def reset(self) -> None:
        """Empty and open again (a task's `start()`); keeps the backlog of events from other nodes."""
        with self._lock:
            self._closed = False
            self._senders_gone = None  # told again by the router when the task attaches
            self._handlers.clear()
            self.errors.clear()


class Subscriptions:
    """`on` / `once` / `off` on an object's `_bus`: a task's events and a router's raw topics alike."""

    _bus: EventBus

    def on(self, event: str, fn: Callable[..., Any]) -> None:
        """Call `fn(*args, **kwargs)` on every event (or raw topic) matching the glob pattern `event`."""
        self._bus.on(event, fn)

    def once(self, event: str, fn: Callable[..., Any]) -> None:
        """Like `on`, for the next matching event only."""
        self._bus.once(event, fn)

    def off(self, event: str, fn: Callable[..., Any] | None = None) -> None:
        """Remove the handlers of `event` (all of them when `fn` is None)."""
        self._bus.off(event, fn)

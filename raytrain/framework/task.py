"""`Task`: the middleware pipeline and its events (DI-engine's `ding.framework.Task`).

A step runs the forward part of every middleware in order (code before `yield`, or the whole of a plain
function), then the backward parts in reverse order (code after `yield`), then renews the context.
"""

from __future__ import annotations

import enum
import fnmatch
import logging
import math
import sys
import threading
from collections.abc import Callable, Generator, Iterable
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from types import GeneratorType, TracebackType
from typing import TYPE_CHECKING, Any, Union

from raytrain.errors import FrameworkError
from raytrain.framework.context import Context
from raytrain.framework.events import EventBus, HandlerError, Subscriptions
from raytrain.framework.router import as_labels
from raytrain.framework.wrappers import middleware_name

if TYPE_CHECKING:
    from raytrain.framework.router import Router

log = logging.getLogger("raytrain.framework")

Middleware = Callable[[Any], Any]
"""`fn(ctx)`: a plain function, a callable object, or a generator function (code after `yield` runs backward)."""
Backward = Generator[Any, Any, Any]
"""A middleware's suspended generator: its backward part (the code after `yield`) still to run."""
BackwardItem = Union[Backward, "Future[Backward | None]", None]
"""What waits on a backward stack: a suspended generator, or (async mode) the future of one."""
BackwardStack = list[BackwardItem]


class Role(str, enum.Enum):
    """What a node does in a distributed pipeline (DI-engine's `task.role`): `task.add_role(task.role.LEARNER)`.

    The values are plain strings, so a role compares equal to its name (`Role.LEARNER == "learner"`).
    """

    LEARNER = "learner"
    COLLECTOR = "collector"
    EVALUATOR = "evaluator"
    FETCHER = "fetcher"


class _Void:
    """Placeholder middleware that `use()` skips: `task.use(fn if cond else task.void())`."""

    __name__ = "void"

    def __call__(self, ctx: Any) -> None:
        return None


_VOID = _Void()


_nested = threading.local()
"""`stack`: the backward parts of middleware that `task.wrap` ran inside the forward part running in this thread."""


def _checked_context(ctx: Any) -> Context:
    """`task.start`'s `ctx`: a context object (`renew()` builds the next step's from it)."""
    if isinstance(ctx, type) and issubclass(ctx, Context):
        raise FrameworkError(f"ctx takes a context object: {ctx.__name__}(), not the class")
    if not isinstance(ctx, Context):
        raise FrameworkError(f"ctx takes a Context (Context(), OnlineRLContext(), ...), got {type(ctx).__name__}")
    return ctx


_said_returned: set[str] = set()
"""The middleware told of returning a function (once each, by name)."""


def _returned_a_function(fn: Middleware, out: Any) -> None:
    """Warn, once per middleware, when it returned a function: `task.use(collector)` where `collector(cfg)` makes
    the middleware ran the maker every step and dropped what it made."""
    name = middleware_name(fn)
    if name in _said_returned:
        return
    _said_returned.add(name)
    made = middleware_name(out)
    log.warning("middleware %s returned a function (%s), which the task drops: if %s makes the middleware, use what it "
                "makes (task.use(%s(cfg)))", name, made, name, name)


def _forward_part(fn: Middleware, ctx: Any) -> Backward | None:
    """Run `fn` up to its first `yield`; return a generator if it has a backward part.

    Backward parts of wrapped middleware that `fn` called (`task.wrap`) and did not run itself join its own,
    to run after it, as DI-engine's global backward step does.
    """
    outer = getattr(_nested, "stack", None)
    nested: BackwardStack = []
    _nested.stack = nested
    try:
        out = fn(ctx)
        g = None
        if isinstance(out, GeneratorType):
            try:
                next(out)
                g = out
            except StopIteration:
                pass
        elif callable(out) and not isinstance(out, type):
            _returned_a_function(fn, out)
    except BaseException:
        _abandon(nested)
        raise
    finally:
        _nested.stack = outer
    if not nested:
        return g
    if g is not None:
        nested.append(g)
    return _backward_later(nested)


def _backward_later(stack: BackwardStack) -> Backward:
    """A started generator whose backward part runs `stack`; closing it abandons them."""

    def later() -> Generator[None, None, None]:
        try:
            yield
        except GeneratorExit:
            _abandon(stack)
            raise
        _backward(stack)

    g = later()
    next(g)
    return g


def _backward(stack: BackwardStack) -> None:
    while stack:
        g = stack.pop()
        if isinstance(g, Future):
            g = g.result()
        if g is None:
            continue
        try:
            next(g)
        except StopIteration:
            continue


def _abandon(stack: BackwardStack) -> None:
    """Close suspended generators without running their backward parts (their `finally` still runs)."""
    while stack:
        g = stack.pop()
        if isinstance(g, Future):
            g.cancel()
            if not g.done() or g.cancelled() or g.exception() is not None:
                continue
            g = g.result()
        if g is not None:
            g.close()


def _no_backward() -> None:
    return None


def _module_task() -> Task:
    import raytrain.framework as framework

    return framework.task


class Task(Subscriptions):
    """A pipeline of middleware with an event system; in a parallel run, one node of it.

    Use the module-level `raytrain.framework.task` as in DI-engine, or an explicit `Task()`. `on` / `once` /
    `off` register event handlers (see `Subscriptions`).
    """

    role = Role
    """The roles a node can take (`task.role.LEARNER`, ...), as in DI-engine."""

    def __init__(self, router: Router | None = None) -> None:
        self._router = router
        self._bus = EventBus("event")
        self._stopped = False
        self._reset(async_mode=False, n_async_workers=3, ctx=None, labels=None)

    def __reduce__(self) -> tuple[Callable[[], Task], tuple[()]]:
        # A task is this process's pipeline: code shipped to a node (e.g. a `main` pickled by value) gets the
        # node's own module-level task, or a fresh Task for any other instance, never a copy of this one.
        import raytrain.framework as framework

        return (_module_task, ()) if self is framework.task else (Task, ())

    # -- life cycle --------------------------------------------------------------------------------
    @property
    def router(self) -> Router:
        """This process's node of a parallel run (`node_id`, `is_active`, `labels`, raw `on`/`emit`).

        The router given to `Task(router=...)`, or else the one `Parallel()` returns in this process (looked up
        each time, so `Parallel.replace(...)` in a test takes effect at once).
        """
        if self._router is not None:
            return self._router
        from raytrain.framework.parallel import Parallel

        return Parallel.current()

    def _reset(
        self, async_mode: bool, n_async_workers: int, ctx: Context | None, labels: Iterable[str] | None
    ) -> None:
        self.ctx = _checked_context(ctx) if ctx is not None else Context()
        self._middleware: list[Middleware] = []
        self._wrappers: list[Callable[[Middleware], Middleware]] = []
        self._wrapped: list[Middleware] = []
        self._backward_stack: BackwardStack = []
        self._finish = False
        self._finish_sent = False
        self._async_mode = async_mode
        self._n_async_workers = n_async_workers
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        self._extra_labels = as_labels(labels)
        self._roles: set[Role] = set()
        self._bus.reset()

    def start(
        self,
        async_mode: bool = False,
        n_async_workers: int = 3,
        ctx: Context | None = None,
        labels: Iterable[str] | None = None,
    ) -> Task:
        """Reset every piece of state (middleware, wrappers, handlers, finish) and start; use as `with`."""
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
        self._reset(async_mode, n_async_workers, ctx, labels)
        self._stopped = False
        router = self.router
        if router.is_active:
            router.attach(self)
        return self

    def __enter__(self) -> Task:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        # A failing node does not end the others by itself: the runner decides (it may restart this node).
        self.stop(broadcast=exc_type is None)

    def stop(self, broadcast: bool = True) -> None:
        """Stop: in a parallel run tell every node to finish; then release threads, handlers and waits."""
        if self._stopped:
            return
        router = self.router
        if router.is_active:
            if broadcast and not self._finish_sent:
                self._finish_sent = True
                router.send_finish()
            router.detach(self)
        self._stopped = True
        self._finish = True
        self._bus.close()
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
        _abandon(self._backward_stack)

    def _check_running(self, what: str) -> None:
        if self._stopped:
            raise FrameworkError(f"cannot {what}: the task is stopped (call task.start() to begin again)")

    @property
    def finish(self) -> bool:
        """True once the run should end; setting it True in a parallel run ends every node's run."""
        return self._finish

    @finish.setter
    def finish(self, value: bool) -> None:
        self._finish = bool(value)
        if value and not self._finish_sent and not self._stopped and self.router.is_active:
            self._finish_sent = True
            self.router.send_finish()

    # -- from other nodes (called by the router: `router.RemoteEvents`) -----------------------------
    def finish_remote(self) -> None:
        """Another node finished: end this node's run after its current step (without echoing it back)."""
        self._finish_sent = True
        self._finish = True

    def senders_gone(self, why: str) -> None:
        """Every node that could send to this one has finished: a wait_for for an event that has not come ends
        with an error naming it (it waited for ever)."""
        self._bus.senders_gone(why)

    def deliver_remote(self, event: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """An event from another node (called by the router's inbox thread)."""
        if not self._stopped:
            self._bus.dispatch(event, args, kwargs, remote=True)

    # -- labels ------------------------------------------------------------------------------------
    @property
    def labels(self) -> set[str]:
        router = self.router
        labels = {"distributed", f"node.{router.node_id}", *router.labels} if router.is_active else {"standalone"}
        if self._async_mode:
            labels.add("async")
        return labels | self._extra_labels

    def match_labels(self, patterns: str | Iterable[str]) -> bool:
        """True when any glob pattern matches any label of this task."""
        if isinstance(patterns, str):
            patterns = [patterns]
        labels = self.labels
        return any(fnmatch.fnmatchcase(label, p) for p in patterns for label in labels)

    # -- roles -------------------------------------------------------------------------------------
    def add_role(self, role: Role | str) -> Task:
        """Give this node a role (`task.role.LEARNER`, ...); `start()` clears them."""
        self._roles.add(_as_role(role))
        return self

    def has_role(self, role: Role | str) -> bool:
        """True when this node has `role`, or has no role at all: as in DI-engine, a node without roles
        (a single process) plays every role."""
        role = _as_role(role)  # a misspelt role fails even before any role is given
        return not self._roles or role in self._roles

    @property
    def roles(self) -> set[Role]:
        """The roles given with `add_role` since the last `start()` (empty: none given)."""
        return set(self._roles)

    # -- middleware --------------------------------------------------------------------------------
    def void(self) -> Middleware:
        """A middleware that `use()` skips."""
        return _VOID

    def use(self, fn: Middleware, lock: bool | threading.Lock = False) -> Task:
        """Add a middleware (a function of ctx, possibly a generator); `lock` serialises it in async mode."""
        if fn is _VOID or isinstance(fn, _Void):
            return self
        if not callable(fn):
            raise FrameworkError(f"task.use() needs a callable middleware, got {type(fn).__name__}")
        if not isinstance(lock, bool) and not (callable(getattr(lock, "acquire", None)) and hasattr(lock, "__enter__")):
            raise FrameworkError(f"task.use({middleware_name(fn)}): lock takes True, False or a threading.Lock, got {lock!r}")
        if lock:
            fn = self._locked(fn, lock)
        self._middleware.append(fn)
        self._wrapped.append(self._apply_wrappers(fn))
        return self

    def use_wrapper(self, wrapper: Callable[[Middleware], Middleware]) -> Task:
        """Wrap every middleware, those already added and later ones; the last wrapper is outermost."""
        self._wrappers.append(wrapper)
        self._wrapped = [self._apply_wrappers(fn) for fn in self._middleware]
        return self

    def _apply_wrappers(self, fn: Middleware) -> Middleware:
        for wrapper in self._wrappers:
            fn = wrapper(fn)
        return fn

    # -- running -----------------------------------------------------------------------------------
    def run(self, max_step: int = sys.maxsize) -> None:
        """Run steps until `max_step` steps are done or `finish` is set; the step that set it completes."""
        self._check_running("run")
        if not self._wrapped:
            return
        for i in range(max_step):
            try:
                for fn in self._wrapped:
                    self.forward(fn)
                self.sync()
                self.backward()
            except BaseException:
                _abandon(self._backward_stack)
                raise
            if i == max_step - 1:
                self.finish = True
            if self._finish:
                break
            self.renew()

    def forward(
        self,
        fn: Middleware,
        ctx: Context | None = None,
        backward_stack: BackwardStack | None = None,
        async_mode: bool | None = None,
    ) -> Task | Backward | None:
        """Run `fn`'s forward part on ctx; its backward part waits on the backward stack.

        Returns as DI-engine's `forward` does: in async mode the task (the forward part runs on the thread
        pool: `task.forward(fn).sync()` waits for it); otherwise the suspended generator holding `fn`'s
        backward part, or None when it has none.
        """
        ctx = self.ctx if ctx is None else ctx
        stack = self._backward_stack if backward_stack is None else backward_stack
        if self._async_mode if async_mode is None else async_mode:
            stack.append(self._executor().submit(_forward_part, fn, ctx))
            return self
        g = _forward_part(fn, ctx)
        if g is not None:
            stack.append(g)
        return g

    def sync(self, backward_stack: BackwardStack | None = None) -> Task:
        """Wait for the forward parts running on the thread pool; raise the first error as soon as it happens.

        Returns the task, so `task.backward().sync()` and `task.forward(fn).sync()` chain as in DI-engine.
        """
        stack = self._backward_stack if backward_stack is None else backward_stack
        futures = [item for item in stack if isinstance(item, Future)]
        if not futures:
            return self
        # The first error leaves at once, as in DI-engine: a middleware that is still busy is not waited for.
        wait(futures, return_when=FIRST_EXCEPTION)
        for f in futures:
            error = f.exception() if f.done() and not f.cancelled() else None
            if error is not None:
                raise error
        for i, item in enumerate(stack):
            if isinstance(item, Future):
                stack[i] = item.result()
        return self

    def backward(self, backward_stack: BackwardStack | None = None, async_mode: bool | None = None) -> Task:
        """Run the waiting backward parts, last forwarded first; returns the task (`task.backward().sync()`).

        Forward parts still running on the thread pool are waited for first. The backward parts run in the
        calling thread in either mode, so they are done when this returns (DI-engine runs them on its pool in
        async mode and its `sync()` waits for them; `sync()` after this has nothing left to wait for).
        """
        _backward(self._backward_stack if backward_stack is None else backward_stack)
        return self

    def renew(self) -> Task:
        """Finish the step (backward parts left over) and start the next with `ctx.renew()` (total_step + 1)."""
        if self._backward_stack:
            self.sync()
            self.backward()
        self.ctx = self.ctx.renew()
        return self

    def _executor(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max(1, self._n_async_workers), thread_name_prefix="raytrain-middleware")
        return self._pool

    def wrap(self, fn: Middleware, lock: bool | threading.Lock = False) -> Callable[[Any], Callable[[], None]]:
        """`fn` made callable from inside another middleware, as in DI-engine.

        Calling the result with ctx runs `fn`'s forward part (under `lock`, if given) at once and returns a
        function that runs its backward part; if that function is not called, the backward part runs in the
        backward pass, after that of the middleware that called it. The result is a middleware itself too.
        """
        the_lock = self._lock if lock is True else (lock or None)

        def forward(ctx: Any) -> Callable[[], None]:
            if the_lock is not None:
                with the_lock:
                    g = _forward_part(fn, ctx)
            else:
                g = _forward_part(fn, ctx)
            if g is None:
                return _no_backward
            # Inside a middleware's forward part, join its backward part; otherwise the task's backward pass.
            stack = getattr(_nested, "stack", None)
            stack = self._backward_stack if stack is None else stack
            stack.append(g)

            def backward() -> None:
                try:
                    stack.remove(g)
                except ValueError:  # already run
                    return
                _backward([g])

            return backward

        forward.__name__ = middleware_name(fn)
        return forward

    def _locked(self, fn: Middleware, lock: bool | threading.Lock) -> Middleware:
        """`fn` as a middleware whose forward part runs under `lock` (True: the task's lock)."""
        the_lock = self._lock if lock is True else (lock or None)

        def wrapped(ctx: Any) -> Generator[None, None, None]:
            stack: BackwardStack = []
            if the_lock is not None:
                with the_lock:
                    self.forward(fn, ctx, stack, async_mode=False)
            else:
                self.forward(fn, ctx, stack, async_mode=False)
            yield
            _backward(stack)

        wrapped.__name__ = middleware_name(fn)
        return wrapped

    def serial(self, *fns: Middleware) -> Middleware:
        """One middleware running `fns` in order: their forwards, then (at backward time) their backwards."""
        return self._group("serial", fns, async_mode=False)

    def parallel(self, *fns: Middleware) -> Middleware:
        """One middleware running the forwards of `fns` concurrently (thread pool), then their backwards."""
        return self._group("parallel", fns, async_mode=True)

    def _group(self, kind: str, fns: tuple[Middleware, ...], async_mode: bool) -> Middleware:
        """One middleware whose forward part runs the forwards of `fns` and whose backward part their backwards."""

        def group(ctx: Any) -> Generator[None, None, None]:
            stack: BackwardStack = []
            try:
                for fn in fns:
                    self.forward(fn, ctx, stack, async_mode=async_mode)
                if async_mode:
                    self.sync(stack)
            except BaseException:
                _abandon(stack)
                raise
            yield
            _backward(stack)

        group.__name__ = f"{kind}<" + ",".join(middleware_name(f) for f in fns) + ">"
        return group

    # -- events ------------------------------------------------------------------------------------
    def emit(self, event: str, *args: Any, only_remote: bool = False, only_local: bool = False, **kwargs: Any) -> None:
        """Send an event: to this task's handlers and, in a parallel run, to the nodes the topology reaches."""
        self._check_running(f"emit '{event}'")
        if only_local and only_remote:
            raise FrameworkError(f"emit('{event}'): only_local and only_remote exclude each other")
        router = self.router
        if not only_local and router.is_active:
            router.send_event(event, args, kwargs)
        if not only_remote:
            self._bus.dispatch(event, args, kwargs)

    def wait_for(
        self, event: str, timeout: float = math.inf, ignore_timeout_exception: bool = False
    ) -> tuple[tuple[Any, ...], dict[str, Any]] | None:
        """Block until `event` arrives; return `(args, kwargs)`.

        Args:
            event: the event's name (a glob pattern).
            timeout: seconds to wait (default: for ever). In a parallel run the wait also ends, as a timeout,
                once every node that could send the event has finished without sending it.
            ignore_timeout_exception: False (the default): a timeout raises TimeoutError naming the event.
                True: a timeout logs a warning naming the event and returns None, as DI-engine's default does.
        """
        self._check_running(f"wait for '{event}'")
        if not timeout >= 0:  # NaN too
            raise FrameworkError(f"wait_for('{event}'): timeout must be 0 or more seconds, got {timeout:g}")
        try:
            return self._bus.wait_for(event, timeout)
        except TimeoutError as e:
            if not ignore_timeout_exception:
                raise
            log.warning("%s; returning None (ignore_timeout_exception=True)", e)
            return None

    @property
    def handler_errors(self) -> list[HandlerError]:
        """The latest handler errors of this task (each was also logged with its event's name)."""
        return list(self._bus.errors)


task = Task()
"""The module-level task, as DI-engine's `ding.framework.task` (also `raytrain.framework.task`)."""


def _as_role(role: Role | str) -> Role:
    try:
        return Role(role)
    except ValueError:
        allowed = ", ".join(f"task.role.{r.name}" for r in Role)
        raise FrameworkError(f"unknown role {role!r}: use one of {allowed}") from None

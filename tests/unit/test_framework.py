"""Local (single process, no Ray) semantics of `raytrain.framework`: see FRAMEWORK.md.

Nothing here starts Ray. Every wait has a timeout, so a broken implementation fails instead of hanging.
"""

import logging
import math
import pickle
import threading
import time
from dataclasses import dataclass, field, fields

import pytest

import raytrain.framework as framework
from raytrain.errors import FrameworkError
from raytrain.framework import Context, OfflineRLContext, OnlineRLContext, StepTimer, Task
from raytrain.framework.events import EventBus
from raytrain.framework.parallel import decode, encode, receivers
from raytrain.framework.payload import FINISH, Message, MessageKind
from raytrain.framework.router import Router

from .framework_fixtures import no_ray_runtime, started_task  # noqa: F401 - fixtures `_no_ray_runtime`, `t`

pytestmark = pytest.mark.timeout(20)

WAIT = 2.0
"""Upper bound of every wait in these tests; a correct implementation never gets near it."""


@dataclass
class TraceContext(Context):
    """A context that records what middleware did."""

    log: list = field(default_factory=list)


def gen(log, name):
    """A generator middleware logging `<name>-pre` in the forward pass and `<name>-post` in the backward."""

    def middleware(ctx):
        log.append(f"{name}-pre")
        yield
        log.append(f"{name}-post")

    middleware.__name__ = name
    return middleware


def plain(log, name):
    def middleware(ctx):
        log.append(name)

    middleware.__name__ = name
    return middleware


class Overlap:
    """Counts the callers inside `with overlap:` at once; `peak` is the most there ever were."""

    def __init__(self):
        self._guard = threading.Lock()
        self.active = 0
        self.peak = 0

    def __enter__(self):
        with self._guard:
            self.active += 1
            self.peak = max(self.peak, self.active)

    def __exit__(self, *exc):
        with self._guard:
            self.active -= 1


def wait_until(predicate, what):
    deadline = time.monotonic() + WAIT
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.002)


# -- pipeline order ---------------------------------------------------------------------------------
def test_generator_and_plain_middleware_order(t):
    log = []
    t.use(gen(log, "a")).use(gen(log, "b")).use(plain(log, "c"))
    t.run(max_step=1)
    assert log == ["a-pre", "b-pre", "c", "b-post", "a-post"]


def test_order_repeats_every_step(t):
    log = []
    t.use(gen(log, "a")).use(plain(log, "c"))
    t.run(max_step=2)
    assert log == ["a-pre", "c", "a-post", "a-pre", "c", "a-post"]


def test_callable_object_middleware(t):
    class Collector:
        def __init__(self):
            self.steps = []

        def __call__(self, ctx):
            self.steps.append(ctx.total_step)

    collector = Collector()
    t.use(collector)
    t.run(max_step=3)
    assert collector.steps == [0, 1, 2]


def test_use_is_chainable(t):
    assert t.use(lambda ctx: None) is t
    assert t.use(lambda ctx: None, lock=True) is t


def test_use_rejects_non_callable(t):
    with pytest.raises(FrameworkError):
        t.use(42)


def test_void_middleware_is_skipped(t):
    log = []
    t.use(plain(log, "a")).use(t.void()).use(plain(log, "b"))
    t.run(max_step=1)
    assert log == ["a", "b"]


def test_only_void_middleware_means_no_middleware(t):
    t.use(t.void())
    t.run(max_step=5)
    assert t.ctx.total_step == 0
    assert t.finish is False


def test_forward_backward_renew_by_hand():
    # As DI-engine's test_serial_yield_pipeline: forward parts now, backward parts when asked, last first.
    task = Task()
    task.start(ctx=TraceContext())
    try:
        log = task.ctx.log
        task.forward(gen(log, "a"))
        task.forward(plain(log, "b"))
        task.forward(gen(log, "c"))
        assert log == ["a-pre", "b", "c-pre"]
        task.backward()
        assert log == ["a-pre", "b", "c-pre", "c-post", "a-post"]
        task.backward()  # nothing left
        assert len(log) == 5

        task.ctx.keep("log")
        task.ctx.scratch = 1
        assert task.renew() is task
        assert task.ctx.total_step == 1
        assert task.ctx.log is log
        assert not hasattr(task.ctx, "scratch")
    finally:
        task.stop()


def test_forward_on_a_given_ctx(t):
    mine = TraceContext()
    t.forward(gen(mine.log, "a"), ctx=mine)
    t.backward()
    assert mine.log == ["a-pre", "a-post"]
    assert not hasattr(t.ctx, "log")


def test_renew_runs_leftover_backward_parts(t):
    log = []
    t.forward(gen(log, "a"))
    t.renew()
    assert log == ["a-pre", "a-post"]
    assert t.ctx.total_step == 1


def test_wrap_called_inside_another_middleware():
    # DI-engine's test_nested_middleware: a wrapped child runs its forward part when called and returns a
    # function that runs its backward part.
    result = []
    task = Task()

    def child(ctx):
        result.append(3 * ctx.total_step)
        yield
        result.append(2 + 3 * ctx.total_step)

    wrapped_child = task.wrap(child)

    def mother(ctx):
        child_back = wrapped_child(ctx)
        result.append(1 + 3 * ctx.total_step)
        child_back()

    with task.start():
        task.use(mother)
        task.run(2)
    assert result == [0, 1, 2, 3, 4, 5]


def test_wrap_backward_not_called_runs_in_the_global_backward(t):
    log = []
    wrapped = t.wrap(gen(log, "child"))

    def mother(ctx):
        log.append("mother-pre")
        wrapped(ctx)  # its backward function is dropped
        yield
        log.append("mother-post")

    t.use(mother).use(plain(log, "c"))
    t.run(max_step=1)
    assert log == ["mother-pre", "child-pre", "c", "mother-post", "child-post"]


def test_wrap_backward_runs_once(t):
    log = []
    wrapped = t.wrap(gen(log, "child"))

    def mother(ctx):
        back = wrapped(ctx)
        back()
        back()

    t.use(mother)
    t.run(max_step=1)
    assert log == ["child-pre", "child-post"]


def test_wrap_backward_called_in_the_backward_part(t):
    log = []
    wrapped = t.wrap(gen(log, "child"))

    def mother(ctx):
        back = wrapped(ctx)
        log.append("mother-pre")
        yield
        back()
        log.append("mother-post")

    t.use(mother).use(plain(log, "c"))
    t.run(max_step=1)
    assert log == ["child-pre", "mother-pre", "c", "child-post", "mother-post"]


def test_wrap_inside_async_middleware(t):
    t.start(async_mode=True)
    barrier = threading.Barrier(2, timeout=WAIT)
    log = []

    def mother(name):
        child = t.wrap(gen(log, f"{name}.child"))

        def middleware(ctx):
            child(ctx)
            barrier.wait()  # both mothers run at once, each in its own thread
            yield
            log.append(f"{name}-post")

        return middleware

    t.use(mother("a")).use(mother("b"))
    t.run(max_step=1)
    assert sorted(log[:2]) == ["a.child-pre", "b.child-pre"]
    assert log[2:] == ["b-post", "b.child-post", "a-post", "a.child-post"]


def test_wrap_child_of_a_failing_middleware_is_abandoned(t):
    log = []
    wrapped = t.wrap(gen(log, "child"))

    def mother(ctx):
        wrapped(ctx)
        raise RuntimeError("mother failed")

    t.use(mother)
    with pytest.raises(RuntimeError, match="mother failed"):
        t.run(max_step=1)
    t.renew()
    assert log == ["child-pre"]


def test_wrap_with_lock_serialises_the_forward_part(t):
    t.start(async_mode=True, n_async_workers=3)
    overlap = Overlap()

    def exclusive(ctx):
        with overlap:
            time.sleep(0.02)

    for _ in range(3):
        t.use(t.wrap(exclusive, lock=True))
    t.run(max_step=1)
    assert overlap.peak == 1


def test_wrap_used_as_middleware_and_nested(t):
    log = []
    t.use(t.wrap(gen(log, "a"))).use(t.wrap(t.wrap(gen(log, "b")))).use(plain(log, "c"))
    t.run(max_step=1)
    assert log == ["a-pre", "b-pre", "c", "b-post", "a-post"]


def test_wrap_keeps_the_name(t):
    assert t.wrap(gen([], "learner")).__name__ == "learner"


def test_serial_runs_forwards_in_order_then_backwards(t):
    log = []
    t.use(t.serial(gen(log, "a"), plain(log, "b"), gen(log, "c"))).use(plain(log, "d"))
    t.run(max_step=1)
    assert log == ["a-pre", "b", "c-pre", "d", "c-post", "a-post"]


def test_serial_keeps_order_in_async_mode(t):
    # DI-engine's test_serial_in_parallel: a slow first part still runs before the fast second one.
    log = []
    t.start(async_mode=True)

    def slow(ctx):
        time.sleep(0.05)
        log.append("slow")

    t.use(t.serial(slow, plain(log, "fast")))
    t.run(max_step=1)
    assert log == ["slow", "fast"]


def test_parallel_runs_forwards_concurrently(t):
    # Each forward part waits for the other at a barrier: they pass only if they run at the same time.
    barrier = threading.Barrier(2, timeout=WAIT)
    log = []

    def meeting(name):
        def middleware(ctx):
            barrier.wait()
            log.append(f"{name}-pre")
            yield
            log.append(f"{name}-post")

        middleware.__name__ = name
        return middleware

    t.use(t.parallel(meeting("a"), meeting("b"))).use(plain(log, "c"))
    t.run(max_step=1)
    assert sorted(log[:2]) == ["a-pre", "b-pre"]
    assert log[2:] == ["c", "b-post", "a-post"]


def test_parallel_raises_an_error_of_its_parts(t):
    def broken(ctx):
        raise ValueError("part failed")

    t.use(t.parallel(plain([], "fine"), broken))
    with pytest.raises(ValueError, match="part failed"):
        t.run(max_step=1)


# -- run --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [1, 2, 5])
def test_run_max_step(t, n):
    steps = []
    t.use(lambda ctx: steps.append(ctx.total_step))
    assert t.finish is False
    t.run(max_step=n)
    assert steps == list(range(n))
    assert t.ctx.total_step == n - 1
    assert t.finish is True


def test_run_without_middleware_returns_at_once(t):
    t.run(max_step=10)
    assert t.ctx.total_step == 0
    assert t.finish is False


def at_step(log, name, step, then):
    """A middleware logging `<name>@<total_step>` that calls `then()` in step `step`."""

    def middleware(ctx):
        log.append(f"{name}@{ctx.total_step}")
        if ctx.total_step == step:
            then()

    middleware.__name__ = name
    return middleware


def test_finish_inside_a_step_completes_it_then_stops(t):
    log = []

    def finish():
        t.finish = True

    t.use(gen(log, "a")).use(at_step(log, "stopper", 1, then=finish))
    t.run(max_step=10)
    assert log == ["a-pre", "stopper@0", "a-post", "a-pre", "stopper@1", "a-post"]
    assert t.ctx.total_step == 1
    assert t.finish is True


def test_exception_leaves_run_and_skips_the_rest_of_the_step(t):
    log = []

    def boom():
        raise RuntimeError("boom")

    t.use(gen(log, "a")).use(at_step(log, "broken", 1, then=boom)).use(plain(log, "c"))
    with pytest.raises(RuntimeError, match="boom"):
        t.run(max_step=10)
    assert log == ["a-pre", "broken@0", "c", "a-post", "a-pre", "broken@1"]
    assert t.ctx.total_step == 1
    # The abandoned backward part does not run later either.
    t.renew()
    assert log[-1] == "broken@1"


def test_run_uses_the_given_context_and_keeps_its_kept_keys(t):
    t.start(ctx=OnlineRLContext())

    def collect(ctx):
        assert ctx.obs is None  # not kept: fresh every step
        ctx.obs = "observation"
        ctx.env_step += 10
        ctx.train_iter += 1

    t.use(collect)
    t.run(max_step=3)
    assert isinstance(t.ctx, OnlineRLContext)
    assert (t.ctx.total_step, t.ctx.env_step, t.ctx.train_iter) == (2, 30, 3)


# -- life cycle -------------------------------------------------------------------------------------
def test_start_resets_everything():
    task = Task()
    task.start(ctx=TraceContext())
    log = []
    wrapper_calls = []

    def wrapper(fn):
        wrapper_calls.append(fn)
        return fn

    task.use(plain(log, "old"))
    task.use_wrapper(wrapper)
    task.on("ping", lambda: log.append("old handler"))
    task.finish = True

    assert task.start() is task
    try:
        assert task.finish is False
        assert type(task.ctx) is Context
        assert task.ctx.total_step == 0
        task.run(max_step=3)  # no middleware left
        assert task.finish is False
        task.emit("ping")  # no handler left
        calls = len(wrapper_calls)
        task.use(plain(log, "new"))
        assert len(wrapper_calls) == calls  # no wrapper left
        task.run(max_step=1)
        assert log == ["new"]
    finally:
        task.stop()


def test_start_with_a_context():
    task = Task()
    ctx = OfflineRLContext()
    try:
        assert task.start(ctx=ctx).ctx is ctx
    finally:
        task.stop()


def test_with_block_calls_stop():
    task = Task()
    with task.start() as entered:
        assert entered is task
        task.use(lambda ctx: None)
    assert task.finish is True
    with pytest.raises(FrameworkError):
        task.run(max_step=1)


def test_with_block_stops_on_error_too():
    task = Task()
    with pytest.raises(KeyError), task.start():
        raise KeyError("x")
    with pytest.raises(FrameworkError):
        task.emit("ping")


def test_after_stop_run_emit_wait_for_raise(t):
    t.use(lambda ctx: None)
    t.stop()
    with pytest.raises(FrameworkError):
        t.run(max_step=1)
    with pytest.raises(FrameworkError):
        t.emit("ping")
    with pytest.raises(FrameworkError):
        t.wait_for("ping", timeout=0.01)
    t.stop()  # twice is harmless


def test_start_after_stop_runs_again(t):
    t.stop()
    t.start()
    t.use(lambda ctx: None)
    t.run(max_step=2)
    assert t.ctx.total_step == 1


def test_explicit_tasks_are_independent_of_the_module_task():
    mine = Task()
    assert mine is not framework.task
    log = []
    with framework.task.start(), mine.start():
        mine.use(plain(log, "mine"))
        mine.on("ping", lambda who: log.append(f"mine got {who}"))
        framework.task.use(plain(log, "module"))
        framework.task.on("ping", lambda who: log.append(f"module got {who}"))

        mine.run(max_step=2)
        assert log == ["mine", "mine"]
        assert framework.task.ctx.total_step == 0
        assert framework.task.finish is False

        framework.task.emit("ping", "module")
        mine.emit("ping", "mine")
        assert log[2:] == ["module got module", "mine got mine"]

        mine.stop()
        framework.task.run(max_step=1)  # the module task still runs
        assert log[-1] == "module"


# -- context ----------------------------------------------------------------------------------------
def test_context_renew_copies_only_kept_keys():
    ctx = Context()
    assert ctx.total_step == 0
    ctx.kept = [1]
    ctx.dropped = "x"
    ctx.keep("kept", "never_set")
    new = ctx.renew()
    assert type(new) is Context
    assert new is not ctx
    assert new.kept is ctx.kept
    assert not hasattr(new, "dropped")
    assert not hasattr(new, "never_set")


def test_context_renew_keeps_the_subclass():
    ctx = TraceContext()
    ctx.log.append(1)
    new = ctx.renew()
    assert type(new) is TraceContext
    assert new.log == []


def test_kept_key_stays_kept_on_every_later_renew():
    # Better than DI-engine, where a key is kept for the next renew only.
    ctx = Context()
    ctx.model_version = 1
    ctx.keep("model_version")
    for version in range(2, 6):
        ctx = ctx.renew()
        assert ctx.model_version == version - 1
        ctx.model_version = version
    assert ctx.renew().model_version == 5


def test_kept_key_stays_kept_across_task_steps(t):
    seen = []

    def middleware(ctx):
        if ctx.total_step == 0:
            ctx.best = 0
            ctx.keep("best")
        seen.append(ctx.best)
        ctx.best += 1

    t.use(middleware)
    t.run(max_step=4)
    assert seen == [0, 1, 2, 3]


ONLINE_DEFAULTS = {
    "total_step": 0,
    "env_step": 0,
    "env_episode": 0,
    "train_iter": 0,
    "train_data": None,
    "train_output": None,
    "obs": None,
    "action": None,
    "inference_output": None,
    "trajectories": None,
    "episodes": None,
    "collect_kwargs": {},
    "eval_output": {},
    "info_for_logging": {},
    "trajectory_end_idx": [],
    "eval_value": -math.inf,
    "last_eval_value": -math.inf,
    "last_eval_iter": -1,
}
ONLINE_KEPT = {"env_step", "env_episode", "train_iter", "last_eval_iter", "last_eval_value"}

OFFLINE_DEFAULTS = {
    "total_step": 0,
    "trained_env_step": 0,
    "train_epoch": 0,
    "train_iter": 0,
    "train_data": None,
    "train_output": None,
    "eval_value": -math.inf,
    "last_eval_iter": -1,
    "last_eval_value": -math.inf,
    "eval_output": {},
    "info_for_logging": {},
}
OFFLINE_KEPT = {"trained_env_step", "train_iter", "last_eval_iter", "last_eval_value"}


@pytest.mark.parametrize(
    "cls,defaults",
    [(OnlineRLContext, ONLINE_DEFAULTS), (OfflineRLContext, OFFLINE_DEFAULTS)],
    ids=["online", "offline"],
)
def test_rl_context_fields_and_defaults(cls, defaults):
    ctx = cls()
    assert {f.name for f in fields(ctx) if not f.name.startswith("_")} == set(defaults)
    for name, value in defaults.items():
        assert getattr(ctx, name) == value, name
        assert type(getattr(ctx, name)) is type(value), name
    # Mutable defaults are not shared between instances.
    other = cls()
    for name, value in defaults.items():
        if isinstance(value, (list, dict)):
            assert getattr(other, name) is not getattr(ctx, name), name


@pytest.mark.parametrize(
    "cls,defaults,kept",
    [(OnlineRLContext, ONLINE_DEFAULTS, ONLINE_KEPT), (OfflineRLContext, OFFLINE_DEFAULTS, OFFLINE_KEPT)],
    ids=["online", "offline"],
)
def test_rl_context_kept_keys(cls, defaults, kept):
    ctx = cls()
    changed = {name: f"changed {name}" for name in defaults if name != "total_step"}
    for name, value in changed.items():
        setattr(ctx, name, value)
    for _ in range(3):  # kept on every renew
        ctx = ctx.renew()
        assert type(ctx) is cls
        carried = {name for name in changed if getattr(ctx, name) == changed[name]}
        assert carried == kept


@pytest.mark.parametrize("cls", [Context, OnlineRLContext, OfflineRLContext, TraceContext])
def test_context_pickles(cls):
    ctx = cls()
    ctx.total_step = 7
    ctx.extra = {"a": [1, 2]}
    ctx.keep("extra")
    back = pickle.loads(pickle.dumps(ctx))
    assert type(back) is cls
    assert vars(back) == vars(ctx)
    assert back == ctx
    assert back.renew().extra == {"a": [1, 2]}  # the kept keys travel too


def test_context_dict_style_access():
    ctx = Context()
    ctx["reward"] = 1.5
    assert ctx.reward == 1.5
    assert ctx["total_step"] == 0
    assert "reward" in ctx
    assert ctx.get("missing", "default") == "default"
    with pytest.raises(KeyError):
        ctx["missing"]


# -- labels -----------------------------------------------------------------------------------------
def test_labels_standalone(t):
    assert t.labels == {"standalone"}


def test_labels_async_and_extra():
    task = Task()
    try:
        task.start(async_mode=True, labels={"learner", "gpu"})
        assert task.labels == {"standalone", "async", "learner", "gpu"}
        task.start(labels=["collector"])  # a new start forgets the old labels
        assert task.labels == {"standalone", "collector"}
    finally:
        task.stop()


def test_match_labels_with_globs():
    task = Task()
    try:
        task.start(labels={"learner", "node-x"})
        assert task.match_labels("standalone")
        assert task.match_labels("learn*")
        assert task.match_labels("node-?")
        assert task.match_labels(["nothing", "stand*"])
        assert task.match_labels(("nothing", "node-[xy]"))
        assert task.match_labels({"learner"})
        assert not task.match_labels("async")
        assert not task.match_labels("distributed")
        assert not task.match_labels("learn")
        assert not task.match_labels(["collector", "node.*"])
        assert not task.match_labels([])
    finally:
        task.stop()


# -- async mode -------------------------------------------------------------------------------------
def test_async_forwards_run_on_a_thread_pool_concurrently(t):
    t.start(async_mode=True)
    barrier = threading.Barrier(2, timeout=WAIT)
    threads = []

    def meeting(ctx):
        threads.append(threading.current_thread())
        barrier.wait()

    t.use(meeting).use(meeting)
    t.run(max_step=2)
    assert len(threads) == 4
    assert threading.main_thread() not in threads


def test_async_forwards_join_before_the_backward_pass(t):
    t.start(async_mode=True, ctx=TraceContext())
    seen = []

    def reader(ctx):
        yield
        seen.append(ctx.get("written"))

    def slow_writer(ctx):
        time.sleep(0.05)
        ctx.written = ctx.total_step

    t.use(reader).use(slow_writer)
    t.run(max_step=2)
    assert seen == [0, 1]


def test_async_generator_order(t):
    t.start(async_mode=True)
    log = []
    t.use(gen(log, "a")).use(gen(log, "b"))
    t.run(max_step=1)
    assert sorted(log[:2]) == ["a-pre", "b-pre"]
    assert log[2:] == ["b-post", "a-post"]


def test_async_error_surfaces_and_the_step_does_not_count(t):
    t.start(async_mode=True)
    log = []

    def broken(ctx):
        if ctx.total_step == 2:
            raise RuntimeError("async boom")

    t.use(gen(log, "a")).use(broken)
    with pytest.raises(RuntimeError, match="async boom"):
        t.run(max_step=10)
    assert t.ctx.total_step == 2
    assert log == ["a-pre", "a-post", "a-pre", "a-post", "a-pre"]  # no backward part for the failed step


def test_async_error_does_not_wait_for_other_middleware(t):
    # DI-engine's test_async_exception: run() raises while another middleware is still busy.
    t.start(async_mode=True, n_async_workers=2)
    release = threading.Event()
    outcome = []

    def busy(ctx):
        outcome.append(release.wait(WAIT))

    def broken(ctx):
        raise RuntimeError("fails first")

    t.use(busy).use(broken)
    try:
        with pytest.raises(RuntimeError, match="fails first"):
            t.run(max_step=2)
        assert t.ctx.total_step == 0
    finally:
        release.set()
    wait_until(lambda: outcome, "busy returned")
    assert outcome == [True]  # released by the test: run() had not waited for it


def test_lock_true_serialises_middleware(t):
    t.start(async_mode=True, n_async_workers=3)
    overlap = Overlap()
    entries = []

    def exclusive(ctx):
        with overlap:
            entries.append(ctx.total_step)
            time.sleep(0.02)

    for _ in range(3):
        t.use(exclusive, lock=True)
    t.run(max_step=2)
    assert entries == [0, 0, 0, 1, 1, 1]
    assert overlap.peak == 1


def test_without_lock_middleware_overlap(t):
    t.start(async_mode=True, n_async_workers=3)
    barrier = threading.Barrier(2, timeout=WAIT)
    overlap = Overlap()

    def shared(ctx):
        with overlap:
            barrier.wait()

    t.use(shared).use(shared)
    t.run(max_step=1)
    assert overlap.peak == 2


def test_custom_lock_serialises_only_its_own_middleware(t):
    # DI-engine's test_use_lock: middleware under another lock still overlaps them.
    t.start(async_mode=True, n_async_workers=3)
    mine = threading.Lock()
    barrier = threading.Barrier(2, timeout=WAIT)
    log = []

    def first(ctx):
        log.append("first")
        barrier.wait()  # meets `other`, which is under the task's lock

    def other(ctx):
        barrier.wait()

    def second(ctx):
        log.append("second")

    t.use(first, lock=mine).use(other, lock=True).use(second, lock=mine)
    t.run(max_step=1)
    assert log == ["first", "second"]


def test_lock_keeps_the_backward_part(t):
    t.start(async_mode=True)
    log = []
    t.use(gen(log, "a"), lock=True)
    t.run(max_step=1)
    assert log == ["a-pre", "a-post"]


# -- wrappers ---------------------------------------------------------------------------------------
def test_step_timer_records_each_middleware_every_step(t):
    timer = StepTimer()
    t.use_wrapper(timer)

    def collect(ctx):
        pass

    def learn(ctx):
        yield

    t.use(collect).use(learn)
    t.run(max_step=3)
    assert set(timer.records) == {"collect", "learn"}
    for name in ("collect", "learn"):
        assert len(timer.records[name]) == 3
        assert all(isinstance(s, float) and s >= 0 for s in timer.records[name])


def test_step_timer_times_forward_and_backward_parts(t):
    timer = StepTimer(print_per_step=0)
    t.use_wrapper(timer)

    def slow(ctx):
        time.sleep(0.02)
        yield
        time.sleep(0.02)

    def fast(ctx):
        pass

    t.use(slow).use(fast)
    t.run(max_step=1)
    assert timer.records["slow"][0] >= 0.04  # both parts, 0.02 s each
    assert timer.records["fast"][0] < timer.records["slow"][0]


def test_step_timer_keeps_a_window():
    timer = StepTimer(print_per_step=2, smooth_window=3)
    task = Task()
    with task.start():
        task.use_wrapper(timer)
        task.use(plain([], "tick"))
        task.run(max_step=10)
    assert len(timer.records["tick"]) == 6


def recording_wrapper(log, name):
    def wrapper(fn):
        def wrapped(ctx):
            log.append(f"{name}>{fn.__name__}")
            out = fn(ctx)
            log.append(f"{name}<{fn.__name__}")
            return out

        wrapped.__name__ = fn.__name__
        return wrapped

    return wrapper


def test_last_registered_wrapper_is_outermost(t):
    log = []
    t.use_wrapper(recording_wrapper(log, "inner")).use_wrapper(recording_wrapper(log, "outer"))
    t.use(plain(log, "m"))
    t.run(max_step=1)
    assert log == ["outer>m", "inner>m", "m", "inner<m", "outer<m"]


def test_wrapper_applies_to_middleware_before_and_after_it(t):
    log = []
    t.use(plain(log, "early"))
    assert t.use_wrapper(recording_wrapper(log, "w")) is t
    t.use(plain(log, "late"))
    t.run(max_step=1)
    assert log == ["w>early", "early", "w<early", "w>late", "late", "w<late"]


def test_wrapper_wraps_each_middleware_once(t):
    log = []
    t.use(plain(log, "a"))
    t.use_wrapper(recording_wrapper(log, "w1"))
    t.use(plain(log, "b"))
    t.use_wrapper(recording_wrapper(log, "w2"))
    t.run(max_step=1)
    assert log == ["w2>a", "w1>a", "a", "w1<a", "w2<a", "w2>b", "w1>b", "b", "w1<b", "w2<b"]


# -- events -----------------------------------------------------------------------------------------
def test_on_and_emit_with_args_and_kwargs(t):
    got = []
    t.on("learn_output", lambda *args, **kwargs: got.append((args, kwargs)))
    t.emit("learn_output", 1, "two", loss=0.5)
    t.emit("learn_output")
    assert got == [((1, "two"), {"loss": 0.5}), ((), {})]


def test_on_with_a_glob_pattern(t):
    got = []
    t.on("learn_*", lambda value: got.append(value))
    t.emit("learn_output", 1)
    t.emit("learn_start", 2)
    t.emit("collect_output", 3)
    t.emit("learn", 4)
    assert got == [1, 2]


def test_handlers_run_in_registration_order(t):
    log = []
    t.on("step", lambda: log.append("first"))
    t.on("st*", lambda: log.append("second"))
    t.once("step", lambda: log.append("third"))
    t.on("*", lambda: log.append("fourth"))
    t.emit("step")
    assert log == ["first", "second", "third", "fourth"]


def test_once_runs_once(t):
    got = []
    t.once("ping", got.append)
    t.once("pi*", lambda v: got.append(f"glob {v}"))
    t.emit("ping", 1)
    t.emit("ping", 2)
    assert got == [1, "glob 1"]


def test_off_removes_all_handlers_of_the_event(t):
    got = []
    t.on("ping", lambda: got.append("a"))
    t.on("ping", lambda: got.append("b"))
    t.once("ping", lambda: got.append("c"))
    t.on("pong", lambda: got.append("pong"))
    t.off("ping")
    t.emit("ping")
    t.emit("pong")
    assert got == ["pong"]


def test_off_with_a_handler_removes_only_it(t):
    got = []

    def a():
        got.append("a")

    def b():
        got.append("b")

    t.on("ping", a)
    t.on("ping", b)
    t.off("ping", a)
    t.emit("ping")
    assert got == ["b"]


def test_off_glob_pattern_handler(t):
    got = []
    t.on("learn_*", got.append)
    t.off("learn_*")
    t.emit("learn_output", 1)
    assert got == []


def test_emit_only_local_reaches_local_handlers(t):
    got = []
    t.on("ping", got.append)
    t.emit("ping", 1, only_local=True)
    assert got == [1]


def test_emit_only_remote_does_not_reach_the_emitting_task(t):
    got = []
    t.on("ping", got.append)
    t.emit("ping", 1, only_remote=True)
    assert got == []


def test_emit_only_local_and_only_remote_exclude_each_other(t):
    with pytest.raises(FrameworkError):
        t.emit("ping", only_local=True, only_remote=True)


def test_emit_from_a_middleware(t):
    # DI-engine's test_emit.
    greets = []
    t.on("Greeting", greets.append)
    t.use(lambda ctx: t.emit("Greeting", f"Hi {ctx.total_step}"))
    t.run(max_step=3)
    assert greets == ["Hi 0", "Hi 1", "Hi 2"]


def emit_until(task, stop, event, *args, **kwargs):
    """Emit `event` from another thread every few ms until `stop` is set (the waiter may register late)."""

    def loop():
        deadline = time.monotonic() + WAIT
        while not stop.is_set() and time.monotonic() < deadline:
            task.emit(event, *args, **kwargs)
            time.sleep(0.005)

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    return thread


def test_wait_for_returns_args_and_kwargs(t):
    stop = threading.Event()
    thread = emit_until(t, stop, "ready", 42, "x")
    try:
        assert t.wait_for("ready", timeout=WAIT) == ((42, "x"), {})
    finally:
        stop.set()
        thread.join(WAIT)
    stop = threading.Event()
    thread = emit_until(t, stop, "weights", version=3)
    try:
        assert t.wait_for("weights", timeout=WAIT) == ((), {"version": 3})
    finally:
        stop.set()
        thread.join(WAIT)


def test_wait_for_in_async_pipeline(t):
    # DI-engine's test_wait_for: one middleware waits for the event another emits.
    t.start(async_mode=True, n_async_workers=2)
    greets = []

    def waiter(ctx):
        greets.append(t.wait_for("Greeting", timeout=WAIT)[0][0])

    def greeter(ctx):
        while not greets or len(greets) <= ctx.total_step:
            t.emit("Greeting", f"Hi {ctx.total_step}")
            time.sleep(0.002)

    t.use(waiter).use(greeter)
    t.run(max_step=3)
    assert greets == ["Hi 0", "Hi 1", "Hi 2"]


def test_wait_for_timeout_names_the_event(t):
    with pytest.raises(TimeoutError, match="learner_ready"):
        t.wait_for("learner_ready", timeout=0.05)


def test_wait_for_leaves_no_handler_behind(t):
    with pytest.raises(TimeoutError):
        t.wait_for("ping", timeout=0.01)
    got = []
    t.on("ping", got.append)
    t.emit("ping", 1)
    assert got == [1]
    assert t.handler_errors == []


def test_stop_wakes_a_blocked_wait_for(t):
    # How fast stop() wakes it is a figure of scripts/bench_events.py; here: that it does, and how.
    errors = []

    def waiter():
        try:
            t.wait_for("never", timeout=math.inf)  # no timeout: only stop() can end this wait
        except BaseException as e:  # noqa: BLE001 - the test inspects it
            errors.append(e)

    thread = threading.Thread(target=waiter, daemon=True)
    thread.start()
    wait_until(lambda: t._bus.has_handlers("never"), "wait_for is waiting")
    t.stop()
    thread.join(WAIT)
    assert not thread.is_alive(), "stop() did not wake the blocked wait_for"
    assert len(errors) == 1
    assert isinstance(errors[0], FrameworkError), errors[0]
    assert "never" in str(errors[0])


def test_handler_error_is_reported_and_does_not_poison_later_emits(t, caplog):
    got = []

    def broken(value):
        raise ValueError(f"bad value {value}")

    t.on("metric", broken)
    t.on("metric", got.append)
    with caplog.at_level(logging.ERROR, logger="raytrain.framework"):
        t.emit("metric", 1)
    assert got == [1]
    [error] = t.handler_errors
    assert error.event == "metric"
    assert "broken" in error.handler
    assert isinstance(error.error, ValueError)
    assert "metric" in str(error) and "bad value 1" in str(error)
    logged = [r for r in caplog.records if r.name == "raytrain.framework" and r.levelno >= logging.ERROR]
    assert len(logged) == 1
    assert "metric" in logged[0].getMessage() and "bad value 1" in logged[0].getMessage()

    t.emit("metric", 2)  # still works
    assert got == [1, 2]
    assert [e.event for e in t.handler_errors] == ["metric", "metric"]
    t.emit("other")
    assert len(t.handler_errors) == 2


def test_handler_error_does_not_fail_the_pipeline(t):
    t.on("tick", lambda: 1 / 0)
    t.use(lambda ctx: t.emit("tick"))
    t.run(max_step=2)
    assert t.ctx.total_step == 1
    assert [e.event for e in t.handler_errors] == ["tick", "tick"]


def test_start_clears_handler_errors(t):
    t.on("x", lambda: 1 / 0)
    t.emit("x")
    assert len(t.handler_errors) == 1
    t.start()
    assert t.handler_errors == []


# -- EventBus backlog -------------------------------------------------------------------------------
def test_local_dispatch_without_handler_is_not_kept():
    bus = EventBus()
    assert bus.dispatch("ping", (1,)) == 0
    got = []
    bus.on("ping", got.append)
    assert got == []


def test_remote_dispatch_without_handler_waits_for_the_first_handler():
    bus = EventBus()
    assert bus.dispatch("weights", (1,), {}, remote=True) == 0
    assert bus.dispatch("metric", ("m",), {}, remote=True) == 0
    assert bus.dispatch("weights", (2,), {"version": 2}, remote=True) == 0
    got = []
    bus.on("weight*", lambda *a, **k: got.append((a, k)))
    assert got == [((1,), {}), ((2,), {"version": 2})]
    later = []
    bus.on("weights", later.append)  # the backlog went to the first handler
    assert later == []
    bus.on("metric", later.append)
    assert later == ["m"]
    assert bus.dispatch("weights", (3,), {}, remote=True) == 2
    assert got[-1] == ((3,), {}) and later[-1] == 3


def test_once_takes_only_the_first_kept_event():
    bus = EventBus()
    bus.dispatch("weights", (1,), {}, remote=True)
    bus.dispatch("weights", (2,), {}, remote=True)
    first = []
    bus.once("weights", first.append)
    assert first == [1]
    bus.dispatch("weights", (3,), {})  # the once-handler is used up
    assert first == [1]
    rest = []
    bus.on("weights", rest.append)  # the second kept event is still there
    assert rest == [2]


def test_wait_for_takes_a_kept_event():
    bus = EventBus()
    bus.dispatch("ready", (42, "x"), {}, remote=True)
    bus.dispatch("ready", (43, "y"), {}, remote=True)
    assert bus.wait_for("ready", timeout=0.01) == ((42, "x"), {})
    assert bus.wait_for("ready", timeout=0.01) == ((43, "y"), {})
    with pytest.raises(TimeoutError, match="ready"):
        bus.wait_for("ready", timeout=0.01)
    # The satisfied waits left no handler behind to swallow the next event.
    bus.dispatch("ready", (44,), {}, remote=True)
    got = []
    bus.on("ready", got.append)
    assert got == [44]


def test_closed_bus_drops_the_backlog_and_refuses_waits():
    bus = EventBus()
    bus.dispatch("x", (1,), {}, remote=True)
    bus.close()
    with pytest.raises(FrameworkError):
        bus.wait_for("x", timeout=0.01)
    bus.reset()
    got = []
    bus.on("x", got.append)
    assert got == []


def test_backlog_is_bounded():
    bus = EventBus(backlog_limit=3)
    for i in range(5):
        bus.dispatch("x", (i,), {}, remote=True)
    got = []
    bus.on("x", got.append)
    assert got == [2, 3, 4]


# -- the router and the payload, without Ray or threads (router.py, payload.py) --------------------------
@pytest.mark.parametrize(
    "topology,node_ids,node_id,expected",
    [
        ("mesh", [0, 1, 2], 1, (0, 2)),
        ("mesh", [0, 1, 2], 0, (1, 2)),
        ("mesh", [5], 5, ()),
        ("star", [0, 1, 2], 0, (1, 2)),
        ("star", [0, 1, 2], 1, (0,)),
        ("star", [0, 1, 2], 2, (0,)),
        ("star", [3, 4, 5], 3, (4, 5)),
        ("star", [3, 4, 5], 5, (3,)),
        ("alone", [0, 1, 2], 0, ()),
        ("alone", [0, 1, 2], 2, ()),
    ],
)
def test_receivers(topology, node_ids, node_id, expected):
    assert receivers(topology, node_ids, node_id) == expected


def test_receivers_unknown_topology():
    with pytest.raises(FrameworkError, match="ring"):
        receivers("ring", [0, 1], 0)


def test_encode_decode_round_trip():
    args, kwargs = (1, "two", [3.0], {"four": None}), {"version": 5}
    data = encode("event", "weights", args, kwargs)
    assert isinstance(data, bytes)
    assert decode(data) == (args, kwargs)


def test_encode_decode_a_lambda():
    data = encode("event", "fn", (lambda x: x + 1,), {})
    (fn,), kwargs = decode(data)
    assert fn(1) == 2 and kwargs == {}


def test_encode_unpicklable_argument_names_event_and_type():
    with pytest.raises(FrameworkError) as info:
        encode("event", "weights", (1,), {"lock": threading.Lock()})
    message = str(info.value)
    assert "'weights'" in message
    assert "keyword 'lock'" in message
    assert "lock" in type(threading.Lock()).__qualname__ and type(threading.Lock()).__qualname__ in message
    assert "only_local=True" in message


def test_a_message_pickles_to_itself_and_carries_its_arguments():
    message = Message.pack(MessageKind.EVENT, "weights", (1, "x"), {"version": 3})
    again = pickle.loads(pickle.dumps(message))
    assert again == message and again.kind is MessageKind.EVENT and again.name == "weights"
    assert again.unpack() == ((1, "x"), {"version": 3})
    assert pickle.loads(pickle.dumps(FINISH)) == FINISH


def test_unpicklable_topic_names_it_as_a_topic():
    with pytest.raises(FrameworkError, match="cannot send topic 'state'"):
        Message.pack(MessageKind.TOPIC, "state", (threading.Lock(),), {})


def test_router_hands_events_that_came_before_the_task_started_to_it_in_order():
    router = Router()
    router.activate("run", 1, [0, 1], "mesh", [])
    router.receive(Message.pack(MessageKind.EVENT, "ping", (1,), {}))
    router.receive(Message.pack(MessageKind.EVENT, "ping", (2,), {"late": True}))
    task = Task(router=router)
    got = []
    task.start()
    task.on("ping", lambda n, late=False: got.append((n, late)))
    router.receive(Message.pack(MessageKind.EVENT, "ping", (3,), {}))
    assert got == [(1, False), (2, True), (3, False)]
    task.stop(broadcast=False)


def test_router_keeps_raw_topics_apart_from_task_events():
    router = Router()
    router.activate("run", 1, [0, 1], "mesh", [])
    task = Task(router=router).start()
    events, topics = [], []
    task.on("x", events.append)
    router.on("x", topics.append)
    router.receive(Message.pack(MessageKind.TOPIC, "x", ("topic",), {}))
    router.receive(Message.pack(MessageKind.EVENT, "x", ("event",), {}))
    assert (events, topics) == (["event"], ["topic"])
    task.stop(broadcast=False)


def test_a_finish_from_another_node_ends_the_run_after_the_step_even_before_the_task_started():
    router = Router()
    router.activate("run", 1, [0, 1], "mesh", [])
    router.receive(FINISH)
    task = Task(router=router).start()
    steps = []
    task.use(lambda ctx: steps.append(ctx.total_step))
    task.run(max_step=10)
    assert steps == [0] and task.finish is True
    task.stop(broadcast=False)


def test_a_nodes_traceback_keeps_only_the_nodes_own_frames():
    """What `str()` of Ray's RayTaskError gives for a node's failure (Ray 2.60): its coloured header, the carets
    of the Ray frames it hid, and raytrain's runner frame around the user's `main`."""
    from raytrain.framework import runner

    user_frames = [
        '  File "/tmp/probe/boom.py", line 5, in main',
        "    helper()",
        "    ^^^^^^^^",
        '  File "/tmp/probe/boom.py", line 2, in helper',
        '    raise ValueError("boom")',
        "ValueError: boom",
    ]
    ray_text = "\n".join([
        "\x1b[36mray::NodeActor.run()\x1b[39m (pid=3991, ip=192.0.2.2, actor_id=ef07, repr=node.1)",
        "           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
        "           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
        f'  File "{runner.__file__}", line 148, in run',
        "    return main(*args, **kwargs)",
        "           ^^^^^^^^^^^^^^^^^^^^^",
        *user_frames,
    ])
    assert runner.node_traceback(ray_text) == "\n".join(["Traceback (most recent call last):", *user_frames])


def test_a_wait_ends_as_a_timeout_naming_what_came_once_no_sender_is_left():
    """A node waited for ever after every node that could send to it had finished."""
    import threading

    from raytrain.framework.events import EventBus

    bus = EventBus()
    said: list[BaseException] = []

    def wait():
        try:
            bus.wait_for("model")
        except TimeoutError as e:
            said.append(e)

    waiter = threading.Thread(target=wait)
    waiter.start()
    time.sleep(0.2)
    bus.dispatch("models", (1,), remote=True)
    bus.senders_gone("every node that could send it (node 0) has finished")
    waiter.join(5)
    assert [str(e) for e in said] == ["wait_for('model'): every node that could send it (node 0) has finished, and no "
                                      "'model' arrived (events that arrived while waiting: 'models')"]
    with pytest.raises(TimeoutError, match="no 'later' arrived$"):
        bus.wait_for("later")  # at once: nothing can come
    bus.dispatch("kept", (2,), remote=True)  # came before the wait: it is the backlog's
    assert bus.wait_for("kept") == ((2,), {})


def test_a_label_given_as_one_string_is_one_label():
    """`labels="learner"` became the labels l, e, a, r, n: `match_labels("learner")` was False without a word."""
    from raytrain.framework import Parallel

    t = Task()
    with t.start(labels="learner"):
        assert t.labels == {"standalone", "learner"} and t.match_labels("learner")
    assert Parallel.runner(n_parallel_workers=1, labels="learner").spec.labels == ["learner"]
    with pytest.raises(FrameworkError, match=r"labels: give strings \(got 5\)"):
        t.start(labels=[5])


def test_a_context_class_given_for_a_context_is_refused_at_start():
    """`task.start(ctx=OnlineRLContext)` failed only in run(): `Context.renew() missing 1 required positional argument`."""
    t = Task()
    with pytest.raises(FrameworkError, match=r"ctx takes a context object: OnlineRLContext\(\), not the class"):
        t.start(ctx=OnlineRLContext)
    with pytest.raises(FrameworkError, match=r"ctx takes a Context \(Context\(\), OnlineRLContext\(\), ...\), got dict"):
        t.start(ctx={})


def test_a_lock_that_is_no_lock_is_refused_at_use():
    """`task.use(fn, lock=5)` was taken and failed only once the run used it."""
    t = Task()
    with t.start():
        with pytest.raises(FrameworkError, match=r"lock takes True, False or a threading.Lock, got 5"):
            t.use(lambda ctx: None, lock=5)
        t.use(lambda ctx: None, lock=threading.Lock())


def test_a_middleware_that_returns_a_function_is_warned_of_once(caplog):
    """`task.use(collector)` where `collector(cfg)` makes the middleware: each step made a middleware and dropped it,
    exit 0 without a word."""
    def collector(cfg):
        def _collect(ctx):
            ctx.collected = True
        return _collect

    t = Task()
    with caplog.at_level(logging.WARNING, logger="raytrain.framework"):
        with t.start():
            t.use(collector)
            t.run(max_step=3)
    said = [r.getMessage() for r in caplog.records if "returned" in r.getMessage()]
    assert said == ["middleware collector returned a function (_collect), which the task drops: if collector makes the "
                    "middleware, use what it makes (task.use(collector(cfg)))"]


def test_framework_arguments_that_cannot_work_are_refused_where_given():
    """`StepTimer(smooth_window=0)` failed at its first step with `IndexError: deque index out of range`;
    `wait_for(timeout=-1)` said it "timed out after -1 s"; `node_ids=-3` gave nodes -3 and -2 (`raytrain run
    --node-ids -1` is refused)."""
    from raytrain.framework import Parallel

    for bad in ({"smooth_window": 0}, {"print_per_step": -1}):
        with pytest.raises(FrameworkError, match=r"StepTimer: (smooth_window must be 1 or more|print_per_step must be "
                                                 r"0 \(never\) or more)"):
            StepTimer(**bad)
    t = Task()
    with t.start():
        with pytest.raises(FrameworkError, match=r"wait_for\('x'\): timeout must be 0 or more seconds, got -1"):
            t.wait_for("x", timeout=-1)
    for ids in (-3, [0, -1]):
        with pytest.raises(FrameworkError, match=r"node_ids must be 0 or more"):
            Parallel.runner(n_parallel_workers=2, node_ids=ids)

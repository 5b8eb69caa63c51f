"""DI-engine API compatibility of `raytrain.framework` (issue 13), without Ray.

Each test pins one behaviour DI-engine code relies on: the runner's transport keywords, `Parallel()` as the
process's router, `wait_for(..., ignore_timeout_exception=...)`, what `forward`/`backward`/`sync` return,
roles, and `Context.renew()` counting the step. The parallel ones run on real Ray actors in
tests/integration/test_framework_compat.py.
"""

import ast
import logging
import subprocess
import sys
import threading
import time
import warnings
from types import GeneratorType

import pytest

import raytrain.framework as framework
from raytrain.errors import FrameworkError
from raytrain.framework import Context, OfflineRLContext, OnlineRLContext, Parallel, Role, Task, TransportKeywordWarning

from ..conftest import ROOT
from .framework_fixtures import no_ray_runtime, started_task  # noqa: F401 - fixtures `_no_ray_runtime`, `t`

pytestmark = pytest.mark.timeout(30)

WAIT = 2.0

DI_ENGINE_TRANSPORT = {
    "mq_type": "nng",
    "protocol": "tcp",
    "address": "127.0.0.1",
    "ports": [50515, 50516],
    "attach_to": ["tcp://127.0.0.1:50600"],
    "redis_host": "127.0.0.1",
    "redis_port": 6379,
    "startup_interval": 1,
}


def _transport_warnings(record):
    return [w for w in record if issubclass(w.category, TransportKeywordWarning)]


# -- 1. Parallel.runner takes DI-engine's transport keywords ------------------------------------------------
def test_runner_accepts_every_di_engine_transport_keyword_with_one_warning():
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        Parallel.runner(n_parallel_workers=2, topology="star", **DI_ENGINE_TRANSPORT)
    found = _transport_warnings(record)
    assert len(found) == 1, [str(w.message) for w in record]
    message = str(found[0].message)
    for keyword in DI_ENGINE_TRANSPORT:
        assert f"{keyword}=" in message, message
    assert "mean nothing on Ray" in message
    assert "ray_address=" in message and "RAY_ADDRESS" in message  # where the Ray address goes instead
    assert found[0].filename == __file__  # points at the caller's line


@pytest.mark.parametrize("keyword", sorted(DI_ENGINE_TRANSPORT))
def test_each_transport_keyword_alone_warns_once_naming_it(keyword):
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        Parallel.runner(n_parallel_workers=2, **{keyword: DI_ENGINE_TRANSPORT[keyword]})
    found = _transport_warnings(record)
    assert len(found) == 1
    assert f"ignored {keyword}:" in str(found[0].message)


def test_runner_without_transport_keywords_does_not_warn():
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        Parallel.runner(n_parallel_workers=2, topology="mesh", labels=["a"], ray_address="127.0.0.1:6379")
    assert _transport_warnings(record) == []


def test_address_keeps_di_engines_meaning_and_the_ray_address_has_its_own_name():
    with pytest.warns(TransportKeywordWarning, match="address='127.0.0.1' is nng's bind address"):
        runner = Parallel.runner(n_parallel_workers=2, address="127.0.0.1", ray_address="ray://head:10001")
    assert runner.spec.ray_address == "ray://head:10001"
    with pytest.warns(TransportKeywordWarning):
        runner = Parallel.runner(n_parallel_workers=2, address="127.0.0.1")
    assert runner.spec.ray_address is None  # RAY_ADDRESS, or the Ray this process is connected to


def test_di_engines_failing_call_now_runs_one_worker_in_this_process():
    # The example raised "ValueError: Invalid address format"; with one worker no Ray is started.
    with pytest.warns(TransportKeywordWarning):
        results = Parallel.runner(n_parallel_workers=1, address="127.0.0.1", protocol="tcp")(
            lambda: (Parallel().node_id, Parallel().is_active)
        )
    assert results == [(0, True)]


def test_runner_arguments_after_the_worker_count_are_keywords():
    # DI-engine's second positional is mq_type, raytrain's was topology: a positional would mean the wrong thing.
    with pytest.raises(TypeError):
        Parallel.runner(2, "star")


def test_raytrain_run_address_becomes_ray_address(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from raytrain.cli import app

    (tmp_path / "pipeline.py").write_text("def main():\n    print('ran')\n")
    seen = {}
    real = Parallel.runner.__func__

    class Recorded(Exception):
        pass

    def recording(cls, n_parallel_workers, **kwargs):
        seen.update(kwargs)
        real(cls, n_parallel_workers, **kwargs)  # its checks
        raise Recorded  # before it joins a Ray (--address is for nodes that are Ray actors: 2 or more)

    monkeypatch.setattr(Parallel, "runner", classmethod(recording))
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        result = CliRunner().invoke(
            app, ["run", str(tmp_path / "pipeline.py"), "--main", "main", "--workers", "2", "--address", "127.0.0.1:6379"]
        )
    assert result.exit_code == 1 and "Recorded" in result.output, result.output
    assert seen["ray_address"] == "127.0.0.1:6379"
    assert "address" not in seen
    assert _transport_warnings(record) == []


# -- 2. Parallel() is the process's router ----------------------------------------------------------------
def test_parallel_is_the_process_router_every_time():
    router = Parallel()
    assert router is Parallel() is Parallel.current()
    assert framework.task.router is router
    assert Task().router is router
    assert router.is_active is False and router.node_id is None


def test_parallel_inside_a_one_worker_run_is_the_running_node():
    outside = Parallel()

    def main():
        me = Parallel()
        return me is outside, me is framework.task.router, me.node_id, me.is_active, sorted(me.labels)

    assert Parallel.runner(n_parallel_workers=1, node_ids=[7], labels=["lab"])(main) == [(True, True, 7, True, ["lab"])]
    assert Parallel() is outside and outside.is_active is False and outside.node_id is None


def test_di_engine_code_branching_on_the_router_takes_the_node_path():
    # DI-engine's test_uncaught_exception: node 0 raises, found through Parallel().node_id.
    def main():
        if Parallel().node_id == 0:
            raise RuntimeError("uncaught exception")
        return "other path"

    with pytest.raises(RuntimeError, match="uncaught exception"):
        Parallel.runner(n_parallel_workers=1)(main)


def test_the_process_router_can_be_replaced_in_a_test():
    original = Parallel()
    mine = Parallel.fresh()
    assert mine is not original
    old = Parallel.replace(mine)
    try:
        assert old is original
        assert Parallel() is mine and framework.task.router is mine
    finally:
        Parallel.replace(old)
    assert Parallel() is original and framework.task.router is original


def test_replace_with_none_gives_a_fresh_router_on_next_use():
    original = Parallel.replace(None)
    try:
        fresh = Parallel()
        assert fresh is not original and fresh is Parallel() and fresh.is_active is False
    finally:
        Parallel.replace(original)


def test_a_task_given_a_router_keeps_it():
    mine = Parallel.fresh()
    task = Task(router=mine)
    assert task.router is mine and task.router is not Parallel()


def test_router_retries_start_at_zero_under_both_names():
    assert Parallel.fresh().retries == 0
    assert Parallel.fresh()._retries == 0  # DI-engine's name, read by its recovery code and tests


# -- 3. wait_for(..., ignore_timeout_exception=...) -------------------------------------------------------
def test_wait_for_still_raises_on_timeout_by_default(t):
    with pytest.raises(TimeoutError, match="'never_sent'"):
        t.wait_for("never_sent", timeout=0.01)
    with pytest.raises(TimeoutError, match="'never_sent'"):
        t.wait_for("never_sent", timeout=0.01, ignore_timeout_exception=False)


def test_wait_for_ignoring_the_timeout_logs_and_returns_none(t, caplog):
    with caplog.at_level(logging.WARNING, logger="raytrain.framework"):
        assert t.wait_for("learner_ready", timeout=0.01, ignore_timeout_exception=True) is None
    warnings_ = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings_) == 1
    assert "learner_ready" in warnings_[0].getMessage() and "returning None" in warnings_[0].getMessage()
    assert not t._bus.has_handlers("learner_ready")  # nothing left behind


def test_wait_for_ignoring_the_timeout_still_returns_an_event_that_comes(t):
    threading.Timer(0.05, lambda: t.emit("ready", 1, x=2)).start()
    assert t.wait_for("ready", timeout=WAIT, ignore_timeout_exception=True) == ((1,), {"x": 2})


def test_wait_for_timeout_inside_an_async_pipeline_fails_the_run():
    # As DI-engine's test_wait_for, second half: ignore_timeout_exception=False raises out of run().
    task = Task()
    with task.start(async_mode=True, n_async_workers=2):
        task.use(lambda ctx: task.wait_for("Greeting", timeout=0.05, ignore_timeout_exception=False))
        with pytest.raises(TimeoutError):
            task.run(max_step=1)
        assert task.ctx.total_step == 0


def test_wait_for_ignoring_the_timeout_inside_a_pipeline_lets_the_steps_go_on():
    task = Task()
    got = []
    with task.start(async_mode=True, n_async_workers=2):
        task.use(lambda ctx: got.append(task.wait_for("nobody", timeout=0.01, ignore_timeout_exception=True)))
        task.run(max_step=3)
    assert got == [None, None, None]


# -- 4. forward / backward / sync return what DI-engine's do -----------------------------------------------
def test_async_forward_and_backward_return_the_task_and_sync_chains():
    # DI-engine's test_async_yield_pipeline: task.backward().sync() after two async forwards.
    task = Task()
    with task.start(async_mode=True):
        step1_done = threading.Event()
        pipeline = []

        def step0(ctx):
            assert step1_done.wait(WAIT)  # finishes after step1, whatever the thread pool does
            pipeline.append(0)
            yield
            pipeline.append("0-post")

        def step1(ctx):
            pipeline.append(1)
            step1_done.set()

        assert task.forward(step0) is task
        assert task.forward(step1) is task
        assert task.backward().sync() is task
        assert pipeline == [1, 0, "0-post"]
        assert task._backward_stack == []


def test_async_forward_then_sync_waits_for_the_forward_part():
    task = Task()
    with task.start(async_mode=True):
        done = []

        def slow(ctx):
            time.sleep(0.05)
            done.append("slow")

        assert task.forward(slow).sync() is task
        assert done == ["slow"]


def test_sync_forward_returns_the_suspended_generator_or_none(t):
    log = []

    def gen(ctx):
        log.append("pre")
        yield
        log.append("post")

    g = t.forward(gen)
    assert isinstance(g, GeneratorType) and log == ["pre"]
    assert t.forward(lambda ctx: log.append("plain")) is None
    assert t.backward() is t  # returns the task in sync mode too: never None to chain on
    assert log == ["pre", "plain", "post"]
    assert t.sync() is t


def test_backward_accepts_di_engines_async_mode_keyword(t):
    log = []

    def gen(ctx):
        yield
        log.append("post")

    stack = []
    t.forward(gen, t.ctx, stack, async_mode=False)
    assert t.backward(stack, async_mode=False) is t
    assert log == ["post"] and stack == []


# -- 5. roles -----------------------------------------------------------------------------------------------
def test_role_enum_has_di_engines_members():
    assert [r.name for r in Role] == ["LEARNER", "COLLECTOR", "EVALUATOR", "FETCHER"]
    assert Role.LEARNER == "learner" and Role.FETCHER == "fetcher"
    assert framework.task.role is Role and Task.role.COLLECTOR is Role.COLLECTOR


def test_a_task_without_roles_plays_every_role(t):
    assert t.roles == set()
    assert all(t.has_role(r) for r in Role)


def test_add_role_then_has_role_and_roles(t):
    t.add_role(t.role.LEARNER)
    t.add_role("evaluator")  # the value works as well as the member
    assert t.roles == {Role.LEARNER, Role.EVALUATOR}
    assert t.has_role(t.role.LEARNER) and t.has_role("evaluator")
    assert not t.has_role(t.role.COLLECTOR) and not t.has_role(Role.FETCHER)


def test_roles_are_a_copy(t):
    t.add_role(Role.COLLECTOR)
    t.roles.add(Role.LEARNER)
    assert t.roles == {Role.COLLECTOR}


def test_start_clears_the_roles():
    task = Task()
    with task.start():
        task.add_role(Role.LEARNER)
        assert task.roles == {Role.LEARNER}
    with task.start():
        assert task.roles == set() and task.has_role(Role.COLLECTOR)


def test_an_unknown_role_is_an_error_naming_the_roles(t):
    with pytest.raises(FrameworkError, match=r"unknown role 'trainer': use one of task.role.LEARNER, task.role.COLLECTOR"):
        t.add_role("trainer")
    with pytest.raises(FrameworkError, match="unknown role"):
        t.has_role("trainer")


def test_roles_and_labels_are_independent():
    task = Task()
    with task.start(labels=["learner", "gpu"]):
        task.add_role(Role.COLLECTOR)
        assert task.match_labels("learner") and task.match_labels(["g*"])
        assert "collector" not in task.labels
        assert not task.has_role(Role.LEARNER)  # a label is not a role


def test_middleware_can_skip_itself_by_role_as_di_engines_do():
    # DI-engine's middleware: `if task.router.is_active and not task.has_role(task.role.LEARNER): return task.void()`
    task = Task()
    ran = []

    def learner_only():
        if not task.has_role(task.role.LEARNER):
            return task.void()
        return lambda ctx: ran.append(ctx.total_step)

    with task.start():
        task.add_role(task.role.COLLECTOR)
        task.use(learner_only())
        task.run(max_step=2)
    with task.start():
        task.add_role(task.role.LEARNER)
        task.use(learner_only())
        task.run(max_step=2)
    assert ran == [0, 1]


# -- 6. Context.renew() counts the step --------------------------------------------------------------------
@pytest.mark.parametrize("cls", [Context, OnlineRLContext, OfflineRLContext])
def test_context_renew_adds_one_to_total_step(cls):
    ctx = cls()
    assert ctx.total_step == 0
    ctx = ctx.renew()
    assert ctx.total_step == 1 and type(ctx) is cls
    ctx.total_step = 41
    assert ctx.renew().total_step == 42


def test_task_renew_counts_once(t):
    t.ctx.total_step = 5
    t.renew()
    assert t.ctx.total_step == 6
    t.renew()
    assert t.ctx.total_step == 7


def test_run_counts_each_step_once_with_a_given_context():
    task = Task()
    seen = []
    with task.start(ctx=OnlineRLContext()):
        task.use(lambda ctx: seen.append(ctx.total_step))
        task.run(max_step=4)
        assert task.ctx.total_step == 3
    assert seen == [0, 1, 2, 3]


def test_a_context_renewed_by_hand_keeps_counting_in_the_task():
    ctx = Context().renew().renew()  # total_step 2
    task = Task()
    seen = []
    with task.start(ctx=ctx):
        task.use(lambda c: seen.append(c.total_step))
        task.run(max_step=2)
    assert seen == [2, 3]


# -- DI-engine's distributed-docs pipelines, imports changed only ------------------------------------------
EXAMPLES = ["di_event_greeting.py", "di_parallel_greeting.py"]


@pytest.mark.parametrize("name", EXAMPLES)
def test_the_ported_examples_differ_from_di_engine_only_in_their_imports(name):
    """Every raytrain name in the file comes from an import of raytrain.framework[.context|.task|.parallel],
    whose DI-engine counterpart is the same path under ding.framework."""
    tree = ast.parse((ROOT / "examples" / name).read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            assert not any(a.name.startswith("raytrain") for a in node.names)
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("raytrain"):
            assert node.module in ("raytrain.framework", "raytrain.framework.context"), node.module
            names = {a.name for a in node.names}
            allowed = {"task", "Parallel"} if node.module == "raytrain.framework" else {"OnlineRLContext"}
            assert names <= allowed, names
    code = [n for n in tree.body if not isinstance(n, (ast.Import, ast.ImportFrom, ast.Expr))]
    assert "raytrain" not in "\n".join(ast.unparse(n) for n in code)


def test_the_event_system_greeting_example_runs():
    proc = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "di_event_greeting.py")], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    expected = ["Get msg: Hi"] + [f"Get msg: Hi {i} times" for i in range(10)]
    assert proc.stdout.splitlines() == expected
    assert "ray" not in proc.stderr.lower()


# -- DI-engine's module paths, with ding replaced by raytrain -----------------------------------------------
@pytest.mark.parametrize(
    "module,names",
    [
        ("raytrain.framework", ["task", "Task", "Context", "OnlineRLContext", "OfflineRLContext", "Parallel"]),
        ("raytrain.framework.task", ["task", "Task", "Role"]),
        ("raytrain.framework.context", ["Context", "OnlineRLContext", "OfflineRLContext"]),
        ("raytrain.framework.parallel", ["Parallel"]),
        ("raytrain.framework.wrapper", ["StepTimer"]),
    ],
)
def test_di_engines_import_paths_exist_under_raytrain(module, names):
    import importlib

    mod = importlib.import_module(module)
    for name in names:
        assert hasattr(mod, name), f"{module}.{name}"
    if module == "raytrain.framework.task":
        assert mod.task is framework.task  # one module-level task, whichever path imports it


def test_context_setdefault_as_di_engines_dict_context():
    # DI-engine's framework tests write `ctx.setdefault("pipeline", [])` then `ctx.pipeline.append(...)`.
    ctx = Context()
    first = ctx.setdefault("pipeline", [])
    first.append(0)
    assert ctx.setdefault("pipeline", ["ignored"]) is first and ctx.pipeline == [0]
    assert ctx.setdefault("total_step", 9) == 0

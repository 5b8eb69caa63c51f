"""DI-engine API compatibility of `raytrain.framework` on real Ray actors (issue 13).

Mode: the session's `ray.init(num_cpus=2)`; every `main` below runs inside a node actor. The examples are
started as a user would, joining the session's Ray through RAY_ADDRESS.
"""

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from raytrain.framework import NodeError, Parallel, Role, TransportKeywordWarning, task

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def _router_main():
    """What DI-engine code sees through `Parallel()` in a node, and roles by node id beside the run's labels."""
    router = Parallel()
    got = []
    router.on("ping", lambda sender: got.append(sender))
    with task.start():
        if router.node_id == 0:
            task.add_role(task.role.LEARNER)
        else:
            task.add_role(task.role.COLLECTOR)
        deadline = time.monotonic() + 30
        while not got and time.monotonic() < deadline:
            router.emit("ping", router.node_id)  # raw topics through the singleton router
            time.sleep(0.05)
        return {
            "node_id": router.node_id,
            "active": router.is_active,
            "same": router is Parallel() is task.router,
            "heard": sorted(set(got)),
            "roles": sorted(task.roles),
            "learner": task.has_role(task.role.LEARNER),
            "labels_match": task.match_labels("lab") and task.match_labels(f"node.{router.node_id}"),
        }


def test_parallel_in_a_node_is_that_nodes_router_and_roles_sit_beside_labels(ray_session):
    # DI-engine's transport keywords, its `address` among them, are accepted (one warning) and the run works.
    with pytest.warns(TransportKeywordWarning) as record:
        runner = Parallel.runner(n_parallel_workers=2, labels=["lab"], protocol="tcp", address="127.0.0.1", ports=50515)
    assert len([w for w in record if issubclass(w.category, TransportKeywordWarning)]) == 1
    first, second = runner(_router_main)
    assert first == {
        "node_id": 0, "active": True, "same": True, "heard": [1], "roles": [Role.LEARNER], "learner": True,
        "labels_match": True,
    }
    assert second == {
        "node_id": 1, "active": True, "same": True, "heard": [0], "roles": [Role.COLLECTOR], "learner": False,
        "labels_match": True,
    }


def _uncaught_main():
    # DI-engine's test_uncaught_exception, as written there (it never raised before: Parallel() was inactive).
    router = Parallel()
    if router.node_id == 0:
        time.sleep(0.1)
        raise Exception("uncaught exception")
    else:
        time.sleep(0.2)


def test_di_engine_code_that_raises_on_node_0_through_parallel_fails_the_run(ray_session):
    with pytest.raises(NodeError) as info:
        Parallel.runner(n_parallel_workers=2, topology="mesh")(_uncaught_main)
    assert info.value.node_id == 0
    assert "uncaught exception" in str(info.value)


def _retries_main():
    """Node 1 fails on its first attempt; every node returns the attempt it ended on."""
    router = Parallel()
    if router.node_id == 1 and router._retries == 0:
        raise RuntimeError("first attempt fails")
    return router.node_id, router.retries, router._retries


def test_router_retries_count_the_restarts_of_a_recovered_node(ray_session):
    results = Parallel.runner(n_parallel_workers=2, auto_recover=True, max_retries=1)(_retries_main)
    assert results == [(0, 0, 0), (1, 1, 1)]


def _wait_for_main():
    with task.start():
        if task.router.node_id == 0:
            ready = task.wait_for("ready", timeout=60, ignore_timeout_exception=True)
            missing = task.wait_for("never_sent", timeout=0.2, ignore_timeout_exception=True)
            return ready, missing
        time.sleep(0.3)
        task.emit("ready", 1, weights="w", only_remote=True)
        return None


def test_wait_for_across_nodes_with_ignore_timeout_exception(ray_session):
    results = Parallel.runner(n_parallel_workers=2)(_wait_for_main)
    assert results[0] == (((1,), {"weights": "w"}), None)


def _async_main():
    """DI-engine's async pattern in a node: forward returns the task, backward().sync() finishes the step."""
    log = []

    def step(ctx):
        log.append(f"pre{ctx.total_step}")
        yield
        log.append(f"post{ctx.total_step}")

    with task.start(async_mode=True):
        for _ in range(2):
            assert task.forward(step) is task
            assert task.backward().sync() is task
            task.renew()
        return log, task.ctx.total_step


def test_async_forward_backward_sync_in_a_node(ray_session):
    for log, total_step in Parallel.runner(n_parallel_workers=2)(_async_main):
        assert log == ["pre0", "post0", "pre1", "post1"]
        assert total_step == 2


def _env():
    import ray

    return {**os.environ, "RAY_ADDRESS": ray.get_runtime_context().gcs_address, "PYTHONFAULTHANDLER": "1"}


@pytest.fixture(scope="module")
def greetings(ray_session, tmp_path_factory):
    """The greeting example run both ways at once (its nodes reserve no CPU, and each spends 10 s asleep), each
    process's output in a file: {way: (process, file)}. Each driver gets its own job's lines only."""
    folder = tmp_path_factory.mktemp("greetings")
    example = str(ROOT / "examples" / "di_parallel_greeting.py")
    ways = {"python": [sys.executable, example],
            "raytrain run": [sys.executable, "-m", "raytrain", "run", example, "--main", "main", "--workers", "2"]}
    started = {}
    try:
        for way, argv in ways.items():
            out = folder / f"{way.replace(' ', '_')}.out"
            with out.open("w") as file:
                started[way] = (subprocess.Popen(argv, env=_env(), stdout=file, stderr=subprocess.STDOUT, text=True), out)
        yield started
    finally:
        for proc, _ in started.values():
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=30)


def _ended(started: tuple[subprocess.Popen, Path]) -> tuple[int, str]:
    proc, out = started
    return proc.wait(timeout=300), out.read_text()


def test_the_two_worker_greeting_example_runs(greetings):
    """DI-engine's docs' Parallel greeting, imports changed only, run as `python examples/...`."""
    returncode, out = _ended(greetings["python"])
    out = re.sub(r"\x1b\[[0-9;]*m", "", out)  # Ray colours the node prefix
    assert returncode == 0, out[-4000:]
    assert re.findall(r"\(node\.(\d) pid=\d+\) Get msg: Hi\s*$", out, re.MULTILINE) == ["0"], out[-4000:]


def test_the_two_worker_greeting_example_runs_with_raytrain_run(greetings):
    returncode, out = _ended(greetings["raytrain run"])  # to a file: no colour codes around Ray's node prefix (RAY_COLOR_PREFIX=0)
    assert returncode == 0, out[-4000:]
    assert "\x1b[" not in out
    assert re.findall(r"\(node\.(\d) pid=\d+\) Get msg: Hi\s*$", out, re.MULTILINE) == ["0"], out[-4000:]
    assert "2 nodes finished in" in out

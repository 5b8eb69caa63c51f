"""raytrain.framework on a real local Ray: each node a Ray actor, events through the nodes' inboxes.

Mode: the session's `ray.init(num_cpus=2)` (token auth on); `raytrain run` end to end joins it by address.
Every `main` below runs inside a node actor (pickled by value with this module).
"""

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from raytrain.errors import FrameworkError
from raytrain.framework import NodeError, Parallel, task
from raytrain.framework.router import receivers

pytestmark = pytest.mark.integration


def _barrier(event: str) -> None:
    """Emit `event` to the nodes this node's emits reach and wait until each of them emitted it too.

    A node's messages arrive in the order it sent them (its inbox puts them back in order), so when a peer's
    `event` has arrived, everything that peer emitted before it has been handed to this node's handlers.
    The topologies are symmetric: the nodes this node reaches are the nodes that reach it.
    """
    router = task.router
    peers = set(receivers(router.topology, router.node_ids, router.node_id))
    arrived: set[int] = set()
    everyone = threading.Event()

    def on_barrier(sender: int) -> None:
        arrived.add(sender)
        if arrived >= peers:
            everyone.set()

    task.on(event, on_barrier)
    if not peers:
        everyone.set()
    task.emit(event, router.node_id, only_remote=True)
    assert everyone.wait(60), f"node {router.node_id}: '{event}' came from {sorted(arrived)} of {sorted(peers)}"


def _hello_main(steps: int = 3):
    """Every node emits its id `steps` times (with a keyword); returns what it heard, and its labels."""
    heard = []
    with task.start():
        task.on("hello", lambda sender, step=None: heard.append((sender, step)))
        task.on("hello", lambda sender, step=None: heard.append(("second handler", sender)))
        me = task.router.node_id
        _barrier("subscribed")  # both handlers of every node are registered before anyone emits
        for step in range(steps):
            task.emit("hello", me, step=step, only_remote=True)
            time.sleep(0.05)
        _barrier("sent")  # every hello of the other nodes has arrived
        labels = sorted(task.labels)
    return {"me": me, "heard": heard, "labels": labels}


def test_mesh_every_node_hears_every_other_once_per_emit_with_kwargs(ray_session):
    results = Parallel.runner(3, topology="mesh", labels=["lab"])(_hello_main)
    assert [r["me"] for r in results] == [0, 1, 2]
    for r in results:
        others = {0, 1, 2} - {r["me"]}
        first = [h for h in r["heard"] if h[0] != "second handler"]
        # each emit reaches each other node once, each handler once per emit, kwargs included
        assert sorted(first) == sorted((o, s) for o in others for s in range(3))
        assert sorted(h[1] for h in r["heard"] if h[0] == "second handler") == sorted(o for o in others for _ in range(3))
        assert r["labels"] == ["distributed", "lab", f"node.{r['me']}"]


def test_star_leaves_hear_only_the_centre(ray_session):
    results = Parallel.runner(3, topology="star", node_ids=10)(_hello_main)
    centre, leaf_a, leaf_b = results
    assert (centre["me"], leaf_a["me"], leaf_b["me"]) == (10, 11, 12)
    assert sorted({h[0] for h in centre["heard"] if h[0] != "second handler"}) == [11, 12]
    assert {h[0] for h in leaf_a["heard"] if h[0] != "second handler"} == {10}
    assert {h[0] for h in leaf_b["heard"] if h[0] != "second handler"} == {10}


def test_alone_nobody_hears_anybody(ray_session):
    results = Parallel.runner(2, topology="alone", node_ids=[5, 7])(_hello_main)
    assert [r["me"] for r in results] == [5, 7]
    assert all(r["heard"] == [] for r in results)


def _finish_main():
    """Node 0 stops after 3 steps; the others would run forever."""
    with task.start():
        task.use(lambda ctx: time.sleep(0.02))
        if task.router.node_id == 0:
            task.run(max_step=3)
        else:
            task.run()
        return task.ctx.total_step


def test_a_node_that_stops_ends_every_other_nodes_run(ray_session):
    started = time.monotonic()
    steps = Parallel.runner(3)(_finish_main)
    assert steps[0] == 2
    assert time.monotonic() - started < 60
    assert all(s >= 0 for s in steps[1:])


def _failing_main():
    with task.start():
        task.use(lambda ctx: time.sleep(0.02))
        if task.router.node_id == 1:

            def explode(ctx):
                if ctx.total_step == 2:
                    raise ValueError("boom in node one")

            task.use(explode)
        task.run()


def test_an_exception_in_a_node_surfaces_in_the_caller_with_its_node_id_and_traceback(ray_session):
    started = time.monotonic()
    with pytest.raises(NodeError) as info:
        Parallel.runner(3)(_failing_main)
    assert info.value.node_id == 1
    text = str(info.value)
    assert "node 1 failed: ValueError: boom in node one" in text
    assert "in explode" in text and "Traceback" in text  # the node's own traceback
    # Only the node's own frames: not the caller's `ray.get`, Ray's internals or raytrain's runner, which said
    # more than the user's code did, nor the terminal colours of Ray's header.
    tb = info.value.remote_traceback
    assert tb.startswith("Traceback (most recent call last):\n"), tb
    assert "ray/_private" not in tb and "raytrain/framework/runner.py" not in tb and "\x1b[" not in tb and "ray::" not in tb, tb
    assert tb.rstrip().endswith("ValueError: boom in node one"), tb
    assert time.monotonic() - started < 60  # nodes 0 and 2, which would run forever, were stopped


def _recovering_main(marker: str, how: str):
    """Node 1 fails on its first attempt (an exception or a dead process); every node then exchanges events."""
    me = task.router.node_id
    with task.start():
        if me == 1 and not Path(marker).exists():
            Path(marker).write_text("failed once")
            if how == "exit":
                os._exit(3)
            raise RuntimeError("first attempt fails")
        got = []
        task.on("ping", lambda sender: got.append(sender))

        def ping(ctx):
            task.emit("ping", me, only_remote=True)
            time.sleep(0.1)

        task.use(ping)
        deadline = time.monotonic() + 30
        # (a restarted node may find the other's pings already waiting: it still sends a few of its own)
        while (not got or task.ctx.total_step < 5) and time.monotonic() < deadline:
            task.run(max_step=1)
            task.finish = False
            task.renew()
        time.sleep(0.5)
        return sorted(set(got))


@pytest.mark.parametrize("how", ["exception", "exit"])
def test_auto_recover_restarts_a_node_that_then_sends_and_receives(ray_session, tmp_path, how):
    marker = tmp_path / "failed"
    results = Parallel.runner(2, auto_recover=True, max_retries=2)(_recovering_main, str(marker), how)
    assert marker.read_text() == "failed once"
    assert results == [[1], [0]]


def _late_main(n: int):
    """Node 0 emits n events at once; node 1 subscribes 1.5 s later and still gets them all, in order."""
    with task.start():
        if task.router.node_id == 0:
            for i in range(n):
                task.emit("early", i, only_remote=True)
            task.router.flush()
            return None
        time.sleep(1.5)
        got = []
        done = threading.Event()

        def on_early(i):
            got.append(i)
            if len(got) == n:
                done.set()

        task.on("early", on_early)
        done.wait(60)
        return got


def test_no_event_is_lost_when_a_peer_subscribes_late(ray_session):
    _, got = Parallel.runner(2)(_late_main, 100)
    assert got == list(range(100))


def test_no_event_is_lost_in_a_burst_of_100000(ray_session):
    _, got = Parallel.runner(2)(_late_main, 100_000)
    assert len(got) == 100_000 and got == list(range(100_000))


def _isolated_main(tag: str):
    with task.start():
        heard = set()
        task.on("who", lambda t: heard.add(t))
        for _ in range(20):
            task.emit("who", tag, only_remote=True)
            time.sleep(0.05)
        _barrier("sent")  # every "who" of the other node has arrived
        return heard


def test_two_concurrent_runs_never_see_each_others_events(ray_session):
    results = {}

    def go(tag):
        results[tag] = Parallel.runner(2)(_isolated_main, tag)

    threads = [threading.Thread(target=go, args=(tag,)) for tag in ("run-a", "run-b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert results == {"run-a": [{"run-a"}, {"run-a"}], "run-b": [{"run-b"}, {"run-b"}]}


def _big_main():
    """Node 0 broadcasts a 10 MB array and waits for each receiver's checksum (a reply with wait_for)."""
    me = task.router.node_id
    with task.start():
        if me == 0:
            arr = np.arange(10 * 2**20 // 8, dtype=np.float64)
            sums = {}
            task.on("sum", lambda node, s, shape=None: sums.__setitem__(node, (s, shape)))
            time.sleep(0.5)
            task.emit("weights", {"w": arr}, version=3)
            deadline = time.monotonic() + 60
            while len(sums) < 3 and time.monotonic() < deadline:
                time.sleep(0.05)
            return sums
        (state,), kwargs = task.wait_for("weights", timeout=60)
        task.emit("sum", me, float(state["w"].sum()), shape=state["w"].shape)
        time.sleep(0.5)
        return kwargs


def test_a_large_payload_reaches_every_node_intact(ray_session):
    results = Parallel.runner(4)(_big_main)
    expected = float(np.arange(10 * 2**20 // 8, dtype=np.float64).sum())
    assert results[0] == {n: (expected, (10 * 2**20 // 8,)) for n in (1, 2, 3)}
    assert results[1:] == [{"version": 3}] * 3


def test_large_payloads_go_through_the_object_store_small_ones_inline(ray_session):
    import ray

    from raytrain.framework.parallel import LARGE_PAYLOAD_BYTES, decode, encode

    big = encode("event", "weights", (np.zeros(LARGE_PAYLOAD_BYTES // 8 + 1),), {})
    small = encode("event", "tick", (1, "x"), {"k": 2})
    assert isinstance(big, ray.ObjectRef) and isinstance(small, bytes)
    assert decode(small) == ((1, "x"), {"k": 2})
    assert decode(big)[0][0].shape == (LARGE_PAYLOAD_BYTES // 8 + 1,)


def _unpicklable_main():
    with task.start():
        if task.router.node_id == 0:
            task.emit("state", {"lock": threading.Lock()})
        time.sleep(0.2)


def test_emitting_an_unpicklable_object_names_the_event_and_the_type(ray_session):
    with pytest.raises(NodeError) as info:
        Parallel.runner(2)(_unpicklable_main)
    text = str(info.value)
    assert info.value.node_id == 0
    assert "cannot send event 'state' to other nodes" in text and "_thread.lock" in text


def _topics_main():
    """Raw router topics travel apart from task events."""
    me = task.router.node_id
    with task.start():
        raw, events = [], []
        task.router.on("topic", lambda *a, **k: raw.append((a, k)))
        task.on("topic", lambda *a, **k: events.append((a, k)))
        _barrier("subscribed")
        task.router.emit("topic", me, kind="raw")
        _barrier("sent")  # the other node's topic (sent before it, through the same inbox) has arrived
        return raw, events


def test_router_topics_are_separate_from_task_events(ray_session):
    (raw0, ev0), (raw1, ev1) = Parallel.runner(2)(_topics_main)
    assert raw0 == [((1,), {"kind": "raw"})] and raw1 == [((0,), {"kind": "raw"})]
    assert ev0 == [] and ev1 == []


def test_one_worker_runs_in_this_process_as_node_0():
    def main():
        return task.router.is_active, task.router.node_id, os.getpid()

    assert Parallel.runner(1)(main) == [(True, 0, os.getpid())]
    assert task.router.is_active is False


# -- raytrain run end to end ---------------------------------------------------------------------------
PIPELINE = '''
import sys, time
from raytrain.framework import task

def main():
    with task.start():
        me = task.router.node_id
        got = []
        task.on("hi", lambda n: got.append(n))
        def step(ctx):
            task.emit("hi", me, only_remote=True)
            time.sleep(0.05)
            if me == 1 and ctx.total_step == 5 and "fail" in task.router.labels:
                raise KeyError("node one gave up")
        task.use(step)
        task.run(**({} if "forever" in task.router.labels else {"max_step": 10}))
        time.sleep(0.5)
        print(f"node {me} heard {sorted(set(got))}", flush=True)
'''


def _raytrain_run(tmp_path, *args, **popen):
    import ray

    (tmp_path / "pipeline.py").write_text(PIPELINE)
    env = {**os.environ, "RAY_ADDRESS": ray.get_runtime_context().gcs_address, "PYTHONFAULTHANDLER": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "raytrain", "run", str(tmp_path / "pipeline.py"), "--main", "main", *args],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **popen,
    )


def test_raytrain_run_end_to_end(ray_session, tmp_path):
    proc = _raytrain_run(tmp_path, "--workers", "3")
    out, _ = proc.communicate(timeout=180)
    assert proc.returncode == 0, out
    for me in range(3):
        others = sorted({0, 1, 2} - {me})
        assert f"(node.{me} pid=" in out and f"node {me} heard {others}" in out, out
    assert "3 nodes finished in" in out


def test_raytrain_run_starts_a_local_ray_of_its_own_and_keeps_rays_messages_off_the_terminal(tmp_path):
    """With no address (the default), `raytrain run` starts a local Ray for the run, as train and tune do; Ray's
    own messages stay off the terminal as with them (it opened with Ray's token-authentication notice)."""
    (tmp_path / "pipeline.py").write_text(PIPELINE)
    # As a user's shell has it: no address, and no RAY_AUTH_MODE (Ray puts `token` in the environment of the
    # process that starts a local Ray, as this suite's Ray session did; with it set, Ray says nothing).
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RAY_AUTH_MODE")}
    proc = subprocess.run(
        [sys.executable, "-m", "raytrain", "run", str(tmp_path / "pipeline.py"), "--main", "main", "--workers", "2"],
        env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert "node 0 heard [1]" in out and "node 1 heard [0]" in out and "2 nodes finished in" in out, out[-4000:]
    assert "Token authentication" not in out, out[-4000:]


@pytest.mark.parametrize("form", ["folder", "file"])
def test_raytrain_run_nodes_import_the_modules_beside_main_from_any_directory(ray_session, tmp_path, form):
    """DI-engine's `ditask --package` layout: main's module imports a module and a package beside it. The nodes
    failed with `No module named 'helper'` unless raytrain was started from that folder (only main's own module
    went to them)."""
    import ray

    pkg = tmp_path / "pkg"
    (pkg / "tools").mkdir(parents=True)
    (pkg / "helper.py").write_text("def value():\n    return 41\n")
    (pkg / "tools" / "__init__.py").write_text("from .more import one\n")
    (pkg / "tools" / "more.py").write_text("def one():\n    return 1\n")
    (pkg / "mod.py").write_text(
        "import helper\nfrom tools import one\nfrom raytrain.framework import task\n\n\ndef main():\n"
        "    with task.start():\n        print(f'node {task.router.node_id} got {helper.value() + one()}', flush=True)\n")
    target, main = (str(pkg), "mod.main") if form == "folder" else (str(pkg / "mod.py"), "main")
    env = {**os.environ, "RAY_ADDRESS": ray.get_runtime_context().gcs_address}
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    proc = subprocess.run([sys.executable, "-m", "raytrain", "run", target, "--main", main, "--workers", "2"],
                          env=env, capture_output=True, text=True, timeout=300, cwd=elsewhere)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert "node 0 got 42" in out and "node 1 got 42" in out, out[-4000:]


def test_raytrain_run_ignores_what_main_returns(ray_session, tmp_path):
    """A main that returned something Ray cannot pickle (a lock) failed its node after the pipeline had run
    ("node 0 failed: TypeError: cannot pickle '_thread.lock' object", exit 1): raytrain run uses no result."""
    import ray

    (tmp_path / "locky.py").write_text(
        "import threading\nfrom raytrain.framework import task\n\n\ndef main():\n    with task.start():\n"
        "        print(f'node {task.router.node_id} ran', flush=True)\n    return threading.Lock()\n")
    env = {**os.environ, "RAY_ADDRESS": ray.get_runtime_context().gcs_address}
    proc = subprocess.run([sys.executable, "-m", "raytrain", "run", str(tmp_path / "locky.py"), "--main", "main",
                           "--workers", "2"], env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert "node 0 ran" in out and "node 1 ran" in out and "2 nodes finished in" in out, out[-4000:]


def test_raytrain_run_reports_a_failing_node(ray_session, tmp_path):
    proc = _raytrain_run(tmp_path, "--workers", "2", "--labels", "fail,forever")
    out, _ = proc.communicate(timeout=180)
    assert proc.returncode == 1, out
    assert "error: node 1 failed: KeyError: 'node one gave up'" in out
    assert 'raise KeyError("node one gave up")' in out  # the node's traceback


@pytest.mark.parametrize(("signum", "name"), [(signal.SIGINT, "Ctrl-C"), (signal.SIGTERM, "SIGTERM")])
def test_raytrain_run_ctrl_c_or_sigterm_stops_every_node(ray_session, tmp_path, signum, name):
    """SIGTERM (`kill`, a scheduler) too: `ray.init` installs Ray's own SIGTERM handler, which ended the driver
    at once with a native stack dump and left the stopping to Ray."""
    import ray

    # Started with SIGINT ignored, as a background job of a non-interactive shell (CI, nohup) starts it:
    # raytrain must still stop on Ctrl-C.
    proc = _raytrain_run(
        tmp_path, "--workers", "2", "--labels", "forever", start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            alive = [a for a in ray.util.list_named_actors(all_namespaces=True) if ".node." in a["name"]]
            if len(alive) == 2:
                break
            time.sleep(0.2)
        assert len(alive) == 2, f"the two nodes did not start within 120 s: {alive}"
        time.sleep(1.0)
        proc.send_signal(signum)
        try:
            out, _ = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            # PYTHONFAULTHANDLER (set by _raytrain_run): SIGABRT makes it print every thread's stack first.
            proc.send_signal(signal.SIGABRT)
            try:
                out, _ = proc.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                out, _ = proc.communicate()
            raise AssertionError(f"raytrain run did not stop within 60 s of {name}; its output and stacks:\n{out}") from None
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, out
    assert f"stopped by {name}: all 2 nodes stopped" in out
    assert "SIGTERM received" not in out  # Ray's handler's dump
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and [a for a in ray.util.list_named_actors(all_namespaces=True) if ".node." in a["name"]]:
        time.sleep(0.2)
    assert not [a for a in ray.util.list_named_actors(all_namespaces=True) if ".node." in a["name"]]


def test_raytrain_run_takes_main_in_the_entry_point_form(tmp_path):
    """`--main pipeline:main` (the module:function form of entry points, uvicorn and gunicorn) said "pipeline has no
    function 'pipeline:main'"."""
    (tmp_path / "pipeline.py").write_text(PIPELINE)
    from .conftest import invoke

    result = invoke(["run", str(tmp_path / "pipeline.py"), "--main", "pipeline:main"])
    assert result.exit_code == 0, result.output


def test_raytrain_run_bad_main_is_a_usage_error(tmp_path):
    (tmp_path / "pipeline.py").write_text(PIPELINE)
    from .conftest import invoke

    result = invoke(["run", str(tmp_path / "pipeline.py"), "--main", "mian"])
    assert result.exit_code == 2
    assert "has no function 'mian' (functions there: main)" in result.output


@pytest.mark.parametrize(("source", "said"), [
    ("def main()\n    pass\n", "--main main: cannot import pipeline: pipeline.py:1: SyntaxError: expected ':' (def main())"),
    ("import not_installed_anywhere_here\n", "--main main: cannot import pipeline: No module named "
                                             "'not_installed_anywhere_here'"),
])
def test_raytrain_run_of_a_module_that_cannot_be_imported_is_a_usage_error(tmp_path, monkeypatch, source, said):
    """It was `error: SyntaxError: expected ':' (pipeline.py, line 1)` (or `ModuleNotFoundError: ...`), exit 1."""
    (tmp_path / "pipeline.py").write_text(source)
    monkeypatch.chdir(tmp_path)
    from .conftest import invoke

    result = invoke(["run", "pipeline.py", "--main", "main"])
    assert result.exit_code == 2, result.output
    assert said in " ".join(result.output.split())


@pytest.mark.parametrize(("source", "what"), [
    ("async def main():\n    print('ran')\n", "a coroutine function (async def)"),
    ("def main():\n    print('ran')\n    yield\n", "a generator function (it yields)"),
])
@pytest.mark.parametrize("workers", ["1", "2"])
def test_raytrain_run_of_a_main_that_would_not_run_its_body_is_a_usage_error(tmp_path, workers, source, what):
    """Calling it only makes a coroutine or a generator: with one worker the body never ran, exit 0 ("1 node
    finished", and Python's `coroutine 'main' was never awaited`); with two, `cannot pickle 'coroutine' object` after
    the nodes had started, exit 1."""
    (tmp_path / "pipeline.py").write_text(source)
    from .conftest import invoke

    result = invoke(["run", str(tmp_path / "pipeline.py"), "--main", "main", "--workers", workers])
    assert result.exit_code == 2, result.output
    assert (f"--main main: main is {what}: calling it runs none of its body, and every node calls it once; name a "
            "plain function (def main(): ...), which may run a coroutine with asyncio.run") in " ".join(result.output.split())
    assert "ran" not in result.output


@pytest.mark.parametrize("workers", ["1", "2"])
def test_raytrain_run_of_a_main_that_needs_arguments_is_a_usage_error(tmp_path, workers):
    """Every node calls `main()` with none, as ditask does: it was `TypeError: main() missing 1 required
    positional argument: 'cfg'`, exit 1, after the nodes had started."""
    (tmp_path / "pipeline.py").write_text("def main(cfg, seed=0):\n    pass\n")
    from .conftest import invoke

    result = invoke(["run", str(tmp_path / "pipeline.py"), "--main", "main", "--workers", workers])
    assert result.exit_code == 2, result.output
    assert ("--main main: main(cfg, seed=0) takes arguments, and every node calls it with none (as DI-engine's ditask "
            "does): give cfg a default, or name a function that takes none") in " ".join(result.output.split())


@pytest.mark.parametrize(("args", "said"), [
    (["--workers", "2", "--topology", "ring"], "--topology ring: use one of mesh, star, alone"),
    (["--workers", "2", "--node-ids", "1,1"],
     "--node-ids 1,1: 2 ids, not all distinct, for --workers 2: give a first id (e.g. 10) or a comma-separated list"),
    (["--workers", "3", "--node-ids", "4,5"], "--node-ids 4,5: 2 ids, for --workers 3: give a first id"),
    (["--workers", "2", "--node-ids", "1,x"], "--node-ids 1,x: give a first id (e.g. 10)"),
    # A negative id ran as node -5; an empty item was dropped, so `1,,2` was two ids.
    (["--workers", "2", "--node-ids=-5"], "--node-ids -5: node ids are 0 or more: give a first id (e.g. 10)"),
    (["--workers", "3", "--node-ids", "1,,2"], "--node-ids 1,,2: an empty id between commas: give a first id"),
    # An empty label was dropped: `a,,b` ran with two labels and `,` with none, without a word.
    (["--labels", "learner,,collector"], "--labels learner,,collector: an empty label between commas: give "
     "comma-separated labels, e.g. --labels learner,collector"),
    (["--labels", ","], "--labels ,: an empty label between commas"),
    (["--workers", "2", "--max-retries", "5"], "--max-retries: restarts happen only with --auto-recover"),
    (["--address", "10.0.0.5:6379"], "--address: with --workers 1 the node runs in this process, without Ray"),
    (["--auto-recover", "--num-cpus", "1"], "--auto-recover, --num-cpus: with --workers 1 the node runs in this process"),
])
def test_raytrain_run_options_that_cannot_work_or_would_go_unused_are_usage_errors(tmp_path, args, said):
    """Named by their flag, exit 2, before anything starts (a bad topology or node-id list was exit 1 from
    the library; --address and --auto-recover with one worker, --max-retries without --auto-recover did nothing)."""
    (tmp_path / "pipeline.py").write_text(PIPELINE)
    from .conftest import invoke

    result = invoke(["run", str(tmp_path / "pipeline.py"), "--main", "main", *args])
    assert result.exit_code == 2, result.output
    assert said in " ".join(result.output.split())


def test_raytrain_run_nodes_that_do_not_all_fit_are_refused_instead_of_waiting_forever(ray_session, tmp_path):
    """Every node connects to every other before any runs; 3 nodes of 1 CPU in a Ray of 2 waited forever."""
    import ray

    proc = _raytrain_run(tmp_path, "--workers", "3", "--num-cpus", "1")
    try:
        out, _ = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 2, out
    assert ("3 nodes of num_cpus=1 CPUs each do not fit on the Ray cluster (1 machine with 2 CPUs): it has room for 2. "
            "Lower num_cpus (`--num-cpus`; 0 reserves none)") in " ".join(out.split())
    assert not [a for a in ray.util.list_named_actors(all_namespaces=True) if ".node." in a["name"]]


def test_runner_checks_num_cpus_and_max_retries():
    with pytest.raises(FrameworkError, match="num_cpus must be 0 or more, got -1"):
        Parallel.runner(2, num_cpus=-1)
    with pytest.raises(FrameworkError, match="max_retries must be 0 or more, got -2"):
        Parallel.runner(2, auto_recover=True, max_retries=-2)


def test_wait_for_timeout_names_the_event(ray_session):
    def main():
        with task.start():
            try:
                task.wait_for("never_sent", timeout=0.2)
            except TimeoutError as e:
                return str(e)

    assert "never_sent" in Parallel.runner(1)(main)[0]


def _waits_for_what_never_comes():
    with task.start():
        if task.router.node_id == 1:
            try:
                task.wait_for("model")
            except TimeoutError as e:  # DI-engine's code catches a wait's end as one
                return str(e)
            return "got it"
        time.sleep(0.5)
        task.emit("models", 1)  # a typo: nobody waits for it
        return "sent"


def test_a_wait_for_that_no_node_is_left_to_satisfy_ends_with_an_error_naming_it(ray_session):
    """Node 1 waited for ever after node 0, the only node that could send to it, had finished: the run hung until
    Ctrl-C. The wait now ends with an error that names the event and what arrived instead."""
    started = time.monotonic()
    results = Parallel.runner(2)(_waits_for_what_never_comes)
    assert time.monotonic() - started < 60
    assert results == ["sent", "wait_for('model'): every node that could send it (node 0) has finished, and no "
                               "'model' arrived (events that arrived while waiting: 'models')"]


def _waits_for_a_late_event():
    with task.start():
        if task.router.node_id == 1:
            return task.wait_for("model")[0]
        time.sleep(1.0)
        task.emit("model", 7)
        return None


def test_an_event_sent_just_before_its_sender_finishes_still_reaches_the_waiter(ray_session):
    assert Parallel.runner(2)(_waits_for_a_late_event) == [None, (7,)]


def test_runner_rejects_a_bad_topology():
    with pytest.raises(FrameworkError, match="unknown topology 'ring'"):
        Parallel.runner(2, topology="ring")


@pytest.mark.parametrize(
    "example,workers,expect",
    [
        ("cartpole_ppo.py", 3, r"reached mean evaluation return [\d.]+ >= 475"),
        ("agent_observer.py", 3, r"done: 10 rounds, best observer reward"),
    ],
)
def test_the_examples_run_with_raytrain_run(ray_session, example, workers, expect):
    """The shipped examples, launched like a user would: the PPO one reaches evaluation return 475."""
    import re

    import ray

    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "RAY_ADDRESS": ray.get_runtime_context().gcs_address, "PYTHONFAULTHANDLER": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "raytrain", "run", str(root / "examples" / example), "--main", "main", "--workers", str(workers)],
        env=env, capture_output=True, text=True, timeout=400,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert re.search(expect, out, re.IGNORECASE), out[-4000:]
    assert "(node.0 pid=" in out and "(node.2 pid=" in out

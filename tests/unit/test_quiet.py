"""raytrain.quiet: where Ray's own messages go (no Ray runtime: the package is imported, never started)."""

import io
import logging
import os
import warnings
from pathlib import Path

import pytest

from raytrain import quiet


@pytest.fixture
def console():
    """What Ray's console handler (set up when `ray` is imported) prints."""
    import ray  # noqa: F401
    from ray._private.log import PlainRayHandler

    (handler,) = [h for h in logging.getLogger("ray").handlers if isinstance(h, PlainRayHandler)]
    text = io.StringIO()
    old = handler.setStream(text)
    yield text
    handler.setStream(old)


@pytest.fixture
def messages(monkeypatch, console):
    monkeypatch.delenv("RAY_AIR_NEW_OUTPUT", raising=False)  # quiet_ray sets it; monkeypatch puts it back
    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("always")
        m = quiet.quiet_ray()
        m.shown = shown
        try:
            yield m
        finally:
            m.close()


def test_messages_wait_for_the_folder_and_never_create_it(messages, tmp_path):
    folder = tmp_path / "run"
    messages.write("before the folder is known")
    assert messages.log_to(folder) == folder / "ray.log"
    messages.write("before the folder exists")
    assert not folder.exists()  # the run makes its folder; the log never does
    folder.mkdir()
    messages.write("after")
    assert (folder / "ray.log").read_text().splitlines() == ["before the folder is known", "before the folder exists", "after"]


def test_a_run_that_fails_before_its_folder_exists_writes_nothing(messages, tmp_path):
    messages.log_to(tmp_path / "never")
    messages.write("Ray said something")
    messages.close()
    assert list(tmp_path.iterdir()) == []


def test_rays_log_records_below_error_and_its_warnings_go_to_the_log_others_stay(messages, tmp_path, console):
    import ray

    messages.log_to(tmp_path)
    logging.getLogger("ray.tune.somewhere").warning("Install gputil for GPU system monitoring.")
    logging.getLogger("ray.tune.somewhere").error("a real failure")
    inside_ray = str(Path(ray.__file__).parent / "tune" / "tune.py")
    warnings.warn_explicit("Consider boosting PBT performance", UserWarning, inside_ray, 735)
    warnings.warn_explicit("the user's own warning", UserWarning, str(tmp_path / "my_env.py"), 3)
    log = (tmp_path / "ray.log").read_text()
    assert "WARNING ray.tune.somewhere" in log and "Install gputil" in log
    assert "Consider boosting PBT performance" in log
    assert "a real failure" not in log and "a real failure" in console.getvalue()
    assert "Install gputil" not in console.getvalue()
    assert [str(w.message) for w in messages.shown] == ["the user's own warning"]
    assert quiet.worker_runtime_env() == {"env_vars": {"RAY_LOGGER_LEVEL": "error", quiet.QUIET_WORKER: "1"}}


def test_closed_messages_give_ray_its_console_back(messages, console):
    messages.close()
    logging.getLogger("ray.tune.somewhere").warning("shown again")
    assert "shown again" in console.getvalue()
    assert quiet.worker_runtime_env() is None


def test_verbose_changes_nothing(monkeypatch):
    monkeypatch.delenv("RAY_AIR_NEW_OUTPUT", raising=False)
    monkeypatch.setenv("RAYTRAIN_DEBUG", "1")
    assert quiet.quiet_ray() is None
    assert quiet.worker_runtime_env() is None
    import os

    assert "RAY_AIR_NEW_OUTPUT" not in os.environ


# What Ray 2.60's core worker prints (at ERROR) for each env runner actor RLlib starts.
NATIVE = (b"[2026-11-26 14:58:21,999 E 6070 6070] core_worker.cc:2465: Actor with class name: 'SingleAgentEnvRunner' "
          b"and ID: '75694eab' has constructor arguments in the object store and max_restarts > 0.\n")
NATIVE_WARNING = b"[2026-11-26 14:58:22,001 W 6070 6107] gcs_client.cc:12: a native warning\n"
FATAL = b"[2026-11-26 14:58:22,002 F 6070 6070] core_worker.cc:99: Check failed: something\n"


def _build_prints(*lines: bytes) -> None:
    """What a build does to this process's stderr: Ray's C++ code and Python both write to descriptor 2."""
    for line in lines:
        os.write(2, line)


def test_rays_native_lines_of_a_build_go_to_the_log_and_everything_else_is_shown_in_order(messages, tmp_path, capfd):
    messages.log_to(tmp_path)
    _build_prints(b"before\n")
    with quiet.native_lines_to_log():
        _build_prints(b"the user's env says hello\n", NATIVE, NATIVE_WARNING, FATAL, b"and goodbye\n")
    _build_prints(b"after\n")
    err = capfd.readouterr().err
    assert err == "before\nthe user's env says hello\n" + FATAL.decode() + "and goodbye\nafter\n"
    assert (tmp_path / "ray.log").read_text() == (NATIVE + NATIVE_WARNING).decode()


def test_a_build_that_fails_shows_every_line_rays_too(messages, tmp_path, capfd):
    messages.log_to(tmp_path)
    with pytest.raises(RuntimeError), quiet.native_lines_to_log():
        _build_prints(b"the user's env says hello\n", NATIVE)
        raise RuntimeError("the build failed")
    assert capfd.readouterr().err == "the user's env says hello\n" + NATIVE.decode()
    assert not (tmp_path / "ray.log").exists()


def test_in_a_quiet_jobs_worker_native_lines_leave_the_stream_only(monkeypatch, capfd):
    assert quiet._divert.messages is None
    monkeypatch.setenv(quiet.QUIET_WORKER, "1")
    with quiet.native_lines_to_log():
        _build_prints(NATIVE, b"a trial's own line\n")
    assert capfd.readouterr().err == "a trial's own line\n"


def test_without_quiet_native_lines_are_shown_as_they_come(capfd):
    assert quiet._divert.messages is None and quiet.QUIET_WORKER not in os.environ
    with quiet.native_lines_to_log():
        _build_prints(NATIVE)
        assert capfd.readouterr().err == NATIVE.decode()  # not held back until the end


def _raises_in_del(raise_it):
    """An object whose `__del__` calls `raise_it`: dropped at once by the caller, it reports what that raises to
    sys.unraisablehook."""

    class Finalized:
        def __del__(self):
            raise_it()

    return Finalized()


def _rays_sigterm_handler():
    """A function with the name and file of the SIGTERM handler of Ray's worker loop, which raises as it does."""
    import ray._private.worker

    code = compile("def sigterm_handler():\n    raise SystemExit(1)\n", ray._private.worker.__file__, "exec")
    space = {}
    exec(code, space)
    return space["sigterm_handler"]


@pytest.fixture
def unraisable(monkeypatch):
    """The unraisable exceptions that reach the hook raytrain's hook passes them on to."""
    seen = []
    monkeypatch.setattr("sys.unraisablehook", lambda u: seen.append(u.exc_type))
    return seen


def test_in_a_quiet_jobs_worker_rays_sigterm_inside_a_finalizer_is_not_printed(monkeypatch, unraisable):
    """An actor at its end: the raylet's SIGTERM lands in RLlib's LearnerGroup.__del__ (seen after a sweep's last table)."""
    monkeypatch.setenv(quiet.QUIET_WORKER, "1")
    quiet.quiet_sigterm_at_exit()
    quiet.quiet_sigterm_at_exit()  # once per process: a second call adds no second hook
    _raises_in_del(_rays_sigterm_handler())
    assert unraisable == []

    def someone_elses_exit():
        raise SystemExit(1)

    _raises_in_del(someone_elses_exit)
    _raises_in_del(lambda: 1 / 0)
    assert unraisable == [SystemExit, ZeroDivisionError]


def test_outside_a_quiet_jobs_worker_rays_sigterm_inside_a_finalizer_is_printed(monkeypatch, unraisable):
    """The driver, and every process with --verbose: nothing is hooked."""
    monkeypatch.delenv(quiet.QUIET_WORKER, raising=False)
    quiet.quiet_sigterm_at_exit()
    _raises_in_del(_rays_sigterm_handler())
    assert unraisable == [SystemExit]

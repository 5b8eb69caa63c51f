"""Ray's, Tune's and RLlib's own messages off the terminal and into a log file; all of them with --verbose.

Before this, `raytrain tune` opened with Ray's token-authentication WARNING, Tune's `reuse_actors`
UserWarning, RLlib's `RLModule(config=...)` DeprecationWarning from every trial, "Install gputil for GPU
system monitoring.", Tune's "Configuration for experiment" box and its TensorBoard hint (a /tmp/ray
folder where the results are not). Nothing there is for the user to act on; raytrain's own lines say what
matters (the run or experiment folder, the trial table, the best result).

One switch for all of these (`quiet_ray()`; nothing changes with --verbose / RAYTRAIN_DEBUG=1):

- this process: records of Ray's loggers (`ray.*`) below ERROR and Python warnings raised inside the Ray
  (or, from Tune's searcher, the Optuna) package go to `ray.log` in the run or experiment folder (kept in memory until that folder exists);
- Ray's worker processes (trials, env runners), which print through Ray to this terminal with their
  `(RaytrainPPO(<trial>) pid=...)` prefix: Ray reads `RAY_LOGGER_LEVEL` when a worker starts, and the
  job's runtime_env sets it to `error` there (`worker_runtime_env()`), so Ray's own loggers print errors
  only. RLlib's `ray.rllib` logger keeps its own WARNING level, and anything a trial prints still shows;
- Tune: its older console output (`RAY_AIR_NEW_OUTPUT=0`), which at the `verbose=0` raytrain gives it
  prints nothing; raytrain's live trial table replaces it;
- Ray's native (C++) log lines that this process writes straight to its stderr while RLlib builds an
  Algorithm (`native_lines_to_log()`). Ray 2.60's core worker prints one at ERROR level for every env runner
  actor (RLlib passes its config by reference and restarts failed env runners: "has constructor arguments in
  the object store and max_restarts > 0 ... the actor restart will fail"), which would open every run with
  env runners. The same line stays in Ray's own `python-core-driver-*.log` as well;
- in those workers, the SIGTERM of Ray's shutdown when it lands inside a finalizer (`quiet_sigterm_at_exit()`):
  Python's "Exception ignored in: ... SystemExit: 1" traceback after the sweep's last table.

Python's `warnings` are untouched outside the Ray package, so raytrain's (and the user's) show as before.
"""

from __future__ import annotations

import functools
import logging
import os
import re
import sys
import tempfile
import threading
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

LOG_NAME = "ray.log"
"""The file in the run or experiment folder that receives Ray's, Tune's and RLlib's messages."""


def _verbose() -> bool:
    return os.environ.get("RAYTRAIN_DEBUG", "") not in ("", "0")


class RayMessages:
    """Where Ray's own messages of this process go: a buffer, then `<folder>/ray.log` once the folder exists."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: list[str] = []
        self.path: Path | None = None

    def write(self, text: str) -> None:
        with self._lock:
            self._pending.append(text.rstrip("\n"))
            self._flush()

    def log_to(self, folder: str | Path) -> Path:
        """Send the messages (those so far too) to `folder`/ray.log; written once the folder exists."""
        with self._lock:
            self.path = Path(folder) / LOG_NAME
            self._flush()
        return self.path

    def close(self) -> None:
        """Write what is left, if the folder exists (a run that failed before its folder existed writes
        nothing), and give Ray's console back its messages."""
        with self._lock:
            self._flush()
            self._pending.clear()
        if _divert.messages is self:
            _divert.messages = None

    def _flush(self) -> None:
        # Only into a folder the run itself made: nothing is written before every check has passed.
        if self.path is None or not self._pending or not self.path.parent.is_dir():
            return
        try:
            with open(self.path, "a", encoding="utf-8") as fh:
                fh.write("".join(line + "\n" for line in self._pending))
        except OSError:
            return  # a log of Ray's chatter is not worth failing a run over; it stays in memory
        self._pending.clear()


class _Divert(logging.Filter):
    """On Ray's console handler, and on Python's last-resort handler: records of Ray's loggers below ERROR go to
    the messages instead of the terminal. (`ray.init(configure_logging=False)`, as the framework's runner calls
    it, clears Ray's handlers, so Ray's warnings then reach the terminal through Python's last resort.)"""

    def __init__(self) -> None:
        super().__init__("raytrain.quiet")
        self.messages: RayMessages | None = None
        self._format = logging.Formatter("%(asctime)s\t%(levelname)s %(name)s:%(lineno)s -- %(message)s")

    def filter(self, record: logging.LogRecord) -> bool:
        if self.messages is None or record.levelno >= logging.ERROR or record.name.partition(".")[0] != "ray":
            return True
        self.messages.write(self._format.format(record))
        return False


_divert = _Divert()
_show_warning = warnings.showwarning  # the one quiet_ray() found in place


# Packages whose warnings go to ray.log: Ray's, and Optuna's, which warns from inside Tune's searcher
# ("The reported value is ignored because this `step` is already reported") about calls only Tune makes.
QUIET_PACKAGES = ("ray", "optuna")


@functools.cache
def _quiet_folders() -> tuple[Path, ...]:
    import importlib.util

    folders = []
    for name in QUIET_PACKAGES:
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.origin:
            folders.append(Path(spec.origin).resolve().parent)
    return tuple(folders)


def _divert_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                    file: TextIO | None = None, line: str | None = None) -> None:
    messages = _divert.messages
    try:
        from_ray = messages is not None and any(f in _quiet_folders() for f in Path(filename).resolve().parents)
    except (OSError, ValueError):
        from_ray = False
    if from_ray and messages is not None:  # from_ray implies it; said again for the type checker
        messages.write(warnings.formatwarning(message, category, filename, lineno, line))
    else:
        _show_warning(message, category, filename, lineno, file, line)


def quiet_ray() -> RayMessages | None:
    """Keep Ray's messages off the terminal from now on (call it before ray.init). None with --verbose.

    Call `log_to(folder)` on the result once the run or experiment folder is known, and `close()` at the end.
    """
    global _show_warning
    if _verbose():
        _divert.messages = None
        return None
    messages = RayMessages()
    # Tune reads it when the sweep starts: its older console output prints nothing at verbose=0.
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
    import ray  # noqa: F401  (sets up the `ray` logger and its console handler)

    for handler in [*logging.getLogger("ray").handlers, logging.lastResort]:
        if handler is not None and _divert not in handler.filters:
            handler.addFilter(_divert)
    _divert.messages = messages
    if warnings.showwarning is not _divert_warning:  # (again, where something put its own back since)
        _show_warning = warnings.showwarning
        warnings.showwarning = _divert_warning
    return messages


QUIET_WORKER = "RAYTRAIN_QUIET_RAY"
"""Set to 1 in the worker processes of a job whose driver keeps Ray's messages off the terminal."""


def worker_runtime_env() -> dict[str, Any] | None:
    """The job's runtime_env for `ray.init`: Ray's own loggers print errors only in every worker process,
    and a trial's build keeps Ray's native lines off the stream to the terminal (`native_lines_to_log`)."""
    if _divert.messages is None:
        return None
    return {"env_vars": {"RAY_LOGGER_LEVEL": "error", QUIET_WORKER: "1"}}


def quiet_sigterm_at_exit() -> None:
    """In a worker of a quiet job (QUIET_WORKER): Ray's SIGTERM at the worker's end, raised inside an object's
    `__del__` or an atexit callback, is not printed. Once per process; elsewhere (a driver, --verbose) nothing.

    When the driver shuts its Ray down (`raytrain tune` at the sweep's end), the raylet sends each worker
    SIGTERM, and SIGKILL 0.2 s later, even one still finalizing objects in its last task (a trial actor in its
    stop). Ray's worker turns the SIGTERM into SystemExit; raised inside RLlib's `LearnerGroup.__del__`, Python
    printed it as "Exception ignored in: <function LearnerGroup.__del__ ...> ... SystemExit: 1", a traceback
    that Ray streamed to the terminal after the sweep's last table. Those alone are dropped (as
    Python drops a SystemExit raised anywhere else: the process ends); every other unraisable exception is
    printed as before.
    """
    if os.environ.get(QUIET_WORKER) != "1" or getattr(sys.unraisablehook, "_raytrain_sigterm", False):
        return
    hook = dropping_unraisable(lambda unraisable: _rays_sigterm(unraisable.exc_value), sys.unraisablehook)
    hook._raytrain_sigterm = True  # type: ignore[attr-defined]
    sys.unraisablehook = hook


def dropping_unraisable(dropped: Callable[[Any], bool], default: Callable[[Any], object]) -> Callable[[Any], None]:
    """A `sys.unraisablehook` that drops the unraisable exceptions `dropped` names (it is given what Python gives
    the hook) and hands every other one to `default`, the hook it replaces. For what Ray leaves behind in a
    finalizer that tells the user nothing: Ray's SIGTERM in a quiet worker (`quiet_sigterm_at_exit`), a half-built
    object of Ray's after an interrupt (the driver's, `cli.common`)."""

    def hook(unraisable: Any) -> None:
        if not dropped(unraisable):
            default(unraisable)

    return hook


_RAY_WORKER_FILE = os.path.join("ray", "_private", "worker.py")


def _rays_sigterm(error: BaseException | None) -> bool:
    """Whether `error` is the SystemExit of the SIGTERM handler of Ray's worker loop (`sigterm_handler` in
    ray/_private/worker.py's `Worker.main_loop`)."""
    if not isinstance(error, SystemExit):
        return False
    tb = error.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if code.co_name == "sigterm_handler" and code.co_filename.endswith(_RAY_WORKER_FILE):
            return True
        tb = tb.tb_next
    return False


# A line of Ray's native log as its C++ code prints it to stderr, below FATAL:
# "[2026-11-26 14:58:21,999 E 6070 6070] core_worker.cc:2465: Actor with class name: ..."
NATIVE_LINE = re.compile(rb"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} [DIWE] \d+ \d+\] [\w./-]+:\d+: ")


@contextmanager
def native_lines_to_log() -> Iterator[None]:
    """While the block runs, Ray's native log lines below FATAL that this process prints go to ray.log.

    For an Algorithm's build, which starts RLlib's actors. The process's stderr (file descriptor 2, where
    Ray's C++ code writes) goes to a temporary file for the block; afterwards every other line is written
    to the real stderr, in order. When the block raises, every line is, Ray's too: a build that fails
    writes no run folder, so its ray.log would never be written. Nothing changes with --verbose.

    In a trial's actor (a worker of a quiet job), whose stderr Ray streams to the driver's terminal, the
    native lines are left out of that stream only; Ray's `python-core-worker-*.log` keeps them, as the
    driver's `python-core-driver-*.log` does.
    """
    messages = _divert.messages
    if messages is None and os.environ.get(QUIET_WORKER) != "1":
        yield
        return
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    saved = os.dup(2)
    failed = True
    try:
        with tempfile.TemporaryFile() as captured:
            os.dup2(captured.fileno(), 2)
            try:
                yield
                failed = False
            finally:
                sys.stderr.flush()
                os.dup2(saved, 2)
                captured.seek(0)
                lines = captured.read().splitlines(keepends=True)
                native = [] if failed else [line for line in lines if NATIVE_LINE.match(line)]
                shown = lines if failed else [line for line in lines if not NATIVE_LINE.match(line)]
                if native and messages is not None:  # in a worker, Ray's own log files keep them
                    messages.write(b"".join(native).decode("utf-8", "replace"))
                with open(2, "wb", closefd=False) as stderr:
                    stderr.write(b"".join(shown))
    finally:
        os.close(saved)

"""What every command shares: the consoles, the error handler, common options."""

from __future__ import annotations

import functools
import os
import shlex
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Annotated, Any, NoReturn, ParamSpec, TypeVar

import typer
from rich.console import Console

from raytrain.errors import ConfigError, RaytrainError

P = ParamSpec("P")
R = TypeVar("R")

# Piped or logged output keeps whole tables (rich would cut them to 80 columns); no emoji codes
# (rich would print `config.yaml:100:` as an emoji).
out = Console(highlight=False, emoji=False, soft_wrap=True, width=None if sys.stdout.isatty() else 160)
err = Console(stderr=True, highlight=False, emoji=False, soft_wrap=True, width=None if sys.stderr.isatty() else 160)

SetOption = Annotated[
    list[str] | None,
    typer.Option("--set", "-s", help="Override a key, KEY=VALUE with VALUE parsed as YAML (repeatable).", metavar="KEY=VALUE"),
]
AddressOption = Annotated[
    str | None,
    typer.Option(help="Ray cluster to use (default: $RAY_ADDRESS, else a local Ray started on the spot)."),
]

ClusterOption = Annotated[
    Path | None,
    typer.Option("--cluster", help="Run on the cluster of this cluster YAML (address, auth mode and token set for you)."),
]


def verbose() -> bool:
    return os.environ.get("RAYTRAIN_DEBUG", "") not in ("", "0")


def say(lines: list[str]) -> None:
    """Print notices and warnings (stderr)."""
    for line in lines:
        style = "yellow" if line.startswith("warning") else "cyan" if line.startswith("override") else "dim"
        err.print(line, style=style, markup=False)


def write_output(output: Path, text: str, *, force: bool) -> None:
    """Write a command's `-o` file, refusing (exit 2, nothing written) what cannot be its file: a folder, a file
    in a folder that does not exist, an existing file without `force`."""
    from raytrain.errors import UsageError

    if output.is_dir():
        raise UsageError(f"-o {output}: is a folder; name the file to write")
    if not output.parent.is_dir():
        above = next((p for p in output.parents if p.exists()), None)
        if above is not None and not above.is_dir():
            raise UsageError(f"-o {output}: {above} is a file, not a folder")
        raise UsageError(f"-o {output}: the folder {output.parent} does not exist")
    if output.exists() and not force:
        raise UsageError(f"{output} exists; pass --force to overwrite it")
    try:
        output.write_text(text)
    except OSError as exc:
        raise UsageError(f"-o {output}: cannot write it: {exc.strerror or exc}") from None
    err.print(f"wrote {output}", markup=False)


def handle_errors(fn: Callable[P, R]) -> Callable[P, R]:
    """Turn RaytrainErrors into a message and an exit code; tracebacks only with --verbose."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except RaytrainError as exc:
            if verbose():
                err.print_exception()
            if isinstance(exc, ConfigError):
                for issue in exc.issues:
                    err.print(f"error: {issue}", style="red", markup=False)
            else:
                err.print(f"error: {exc}", style="red", markup=False)
            raise typer.Exit(exc.exit_code) from None
        except KeyboardInterrupt:
            err.print("interrupted", style="red")
            raise typer.Exit(130) from None
        except typer.Exit:
            raise
        except Exception as exc:  # a failure inside Ray/RLlib: say what, keep the traceback for --verbose
            if verbose():
                err.print_exception()
            else:
                from raytrain.imports import user_code_at

                err.print(f"error: {type(exc).__name__}: {_last_line(str(exc))}{user_code_at(exc)}", style="red",
                          markup=False)
                err.print("(run with --verbose for the traceback)", style="dim")
            raise typer.Exit(1) from None

    return wrapper


def _last_line(message: str) -> str:
    """`message`, or where it holds a traceback (Tune's TuneError carries a failed trial's whole one) its last
    line: the error itself. The traceback is for --verbose."""
    if "Traceback (most recent call last)" not in message:
        return message
    return next((line.strip() for line in reversed(message.splitlines()) if line.strip()), message)


def exit_now(status: int) -> NoReturn:
    """End this process with `status` at once (`os._exit`), once stdout and stderr are flushed: no atexit handler,
    no interpreter teardown. A closed pipe (`raytrain ... | head`) is no error here: nothing more can be written."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(status)


def argv() -> list[str]:
    return ["raytrain", *sys.argv[1:]]


_interrupted_by: list[tuple[str, float]] = []
"""The signal that interrupted this process, and when (time.monotonic)."""


def tune_loop_begun() -> bool:
    """Whether Tune's SIGUSR1 handler (its graceful stop) is installed: it comes with Tune's loop, a moment after
    `fit()` begins, and stays after it. Until then a SIGUSR1's default action ends the process."""
    import signal

    return signal.getsignal(signal.SIGUSR1) not in (signal.SIG_DFL, None)


class TuneStopOnTerm:
    """Turns the first SIGTERM into SIGUSR1, on which Tune saves its experiment state and returns from fit(),
    as it does on Ctrl-C. Install it after `ray.init`, whose own SIGTERM handler would end the driver at once.
    Before Tune's loop has begun, a SIGTERM is a KeyboardInterrupt, as a Ctrl-C is there.

    A second SIGTERM ends the process (`second_ends`), or is ignored where something sends two and the save must
    not be cut short (a Slurm job: the batch shell forwards one, Slurm sends its own; its SIGKILL still ends it).
    """

    def __init__(self, *, second_ends: bool = True, exp_dir: Path | None = None) -> None:
        self.received = False
        self.second_ends = second_ends
        self.exp_dir = exp_dir
        """The experiment folder; given, a SIGTERM that stopped the local Ray too ends the process (`_watch`)."""

    def install(self) -> TuneStopOnTerm:
        import signal

        signal.signal(signal.SIGTERM, self._handle)
        return self

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        import signal

        if self.received:
            if self.second_ends:
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                os.kill(os.getpid(), signal.SIGTERM)
            return
        self.received = True
        if not tune_loop_begun():
            # There is no state to save, and the SIGUSR1's default action would end the process with its local Ray
            # left running: stop as on Ctrl-C there.
            print("raytrain: SIGTERM before the trials started: stopping, with nothing to save", file=sys.stderr,
                  flush=True)
            raise KeyboardInterrupt
        print("raytrain: SIGTERM: saving Tune's state and stopping the trials", file=sys.stderr, flush=True)
        os.kill(os.getpid(), signal.SIGUSR1)
        if self.exp_dir is not None:
            import threading

            threading.Thread(target=self._watch, args=(self.exp_dir,), name="raytrain-term-watch", daemon=True).start()

    @staticmethod
    def _watch(exp_dir: Path, *, notice_s: float = 2.0, own_save_s: float = 3.0, save_s: float = 15.0) -> None:
        """When the SIGTERM went to every process of the command (systemd or Slurm stopping it), the local
        Ray's own processes got it too (`local_ray_lost`), and Tune, once it has saved its state, waits 60 s
        for a GCS that is shutting down to stop the trials, then Ray ends the process with a native error.
        Or Tune's loop is itself held in a call to the stopped GCS (`remove_placement_group`, after a trial actor
        the signal ended), and Tune never gets to its save. Here: once Tune has saved its state, or it has been
        saved beside it, kill what is left of the local Ray and exit 130 naming the resume
        (`end_sweep_over_a_lost_ray`, with the statuses Tune last saved before the signal).
        A SIGTERM to this process alone, or
        to its process group (where Ray's processes are not), leaves Ray running: nothing is done, and Tune
        stops the trials in order."""
        import time

        from raytrain.ray_session import local_ray_lost
        from raytrain.tune import state as tune_state

        signalled = time.time()
        before = tune_state.statuses(exp_dir)  # as Tune last saved them, before the signal
        while not local_ray_lost():
            if time.time() - signalled > notice_s:
                return
            time.sleep(0.1)

        end_sweep_over_a_lost_ray(
            exp_dir, signalled, before, status=130, own_save_s=own_save_s, save_s=save_s,
            said="the SIGTERM stopped the local Ray's own processes too (it went to every process of the command, as "
                 "systemd and Slurm send it), so the trials cannot be stopped in order. ")


def end_sweep_over_a_lost_ray(exp_dir: Path, asked: float | None, before: dict[str, str], *, status: int,
                              said: str = "", own_save_s: float = 3.0, save_s: float = 15.0) -> NoReturn:
    """End a sweep whose local Ray is gone, once Tune, asked at `asked` (time.time()) to stop (SIGUSR1), has saved
    its state: wait for that save (an `experiment_state-*.json` written since); if none came in `own_save_s`, save it
    with Tune's own save from this thread (`save_state_beside_a_blocked_tune`: Tune's loop may be held in a call
    to the stopped GCS), and wait for it at most `save_s` in all. Where Tune's own save came but has a trial ended
    that `before` (the statuses Tune last saved before the loss) had running (Tune saw its actor die first:
    ERROR, which `tune resume --restart-errored` would start over from scratch), it is saved again with that
    trial as it was then. `asked` None: Tune's loop has ended, and its last save stands. Then say so (`said`
    first), kill what is left of the local Ray, and exit with `status` naming the resume."""
    import time

    from raytrain.ray_session import abandon_local_ray
    from raytrain.tune import state as tune_state
    from raytrain.tune.run import release_driver, save_state_beside_a_blocked_tune

    def saved() -> bool:
        try:
            return asked is None or any(p.stat().st_mtime >= asked for p in exp_dir.glob(tune_state.STATE_GLOB))
        except OSError:
            return False

    started = asked if asked is not None else time.time()
    while not saved() and time.time() - started < own_save_s:
        time.sleep(0.1)
    why_not = not_again = None
    if not saved():
        why_not = save_state_beside_a_blocked_tune(exp_dir)
    elif asked is not None and (ended := tune_state.ended_since(before, tune_state.statuses(exp_dir))):
        if why := save_state_beside_a_blocked_tune(exp_dir, as_of=before):
            not_again = f" ({len(ended)} trial(s) ended with the local Ray are saved as ended: {why})"
    while not saved() and time.time() - started < save_s:
        time.sleep(0.1)
    state = (f"Tune saved its state{not_again or ''}" if saved() else
             f"Tune's state is as it last saved it ({why_not})" if why_not else "Tune's state is as it last saved it")
    print(f"raytrain: {said}{state}: continue the sweep with `raytrain tune resume {shlex.quote(str(exp_dir))}`",
          file=sys.stderr, flush=True)
    abandon_local_ray()
    release_driver(exp_dir)
    exit_now(status)


class LocalRayWatch:
    """While Tune's loop runs a sweep on the local Ray this process started (`during_fit`): when that Ray loses its
    raylet or GCS with no SIGTERM to this process (`ray stop` on the machine, the OOM killer, a signal to Ray's
    processes alone; `local_ray_core_lost`), ask Tune to stop (SIGUSR1, as `TuneStopOnTerm` does) and end the
    sweep with its state saved, exit 1 (`end_sweep_over_a_lost_ray`). Before, Tune took the trials' actors for
    failed (a failure counted, error.txt, a retry waiting for a node that was gone) and Ray ended the process 60 s
    later with "Failed to connect to GCS within 60 seconds" and no word of resuming.

    Checked every `every_s` from a thread of its own, the GCS asked each time (0.3 ms: a raylet SIGTERMed alone
    lingers, its node dead to the GCS at once). Where Tune's `fit()` returns (on the SIGUSR1, or by itself where
    every trial's actor died with that Ray and none may be retried), its last save stands and the sweep ends there;
    where it has not returned `own_save_s` after the SIGUSR1 (Tune's loop held in a call to the stopped GCS), the
    watch's thread ends it. A SIGTERM's own watch (`term`) has a lost Ray in hand."""

    def __init__(self, exp_dir: Path, term: TuneStopOnTerm, every_s: float = 0.5, own_save_s: float = 3.0) -> None:
        import threading

        self.exp_dir = exp_dir
        self.term = term
        self.every_s = every_s
        self.own_save_s = own_save_s
        self.lost: list[str] = []
        self._returned = threading.Event()
        self._ending = threading.Lock()

    @contextmanager
    def during_fit(self) -> Iterator[None]:
        """Around Tune's `fit()`; ends the process (exit 1) after it where the local Ray was lost under it, unless
        every trial had finished."""
        import threading

        from raytrain.ray_session import local_ray_core_lost, started_local_ray

        if not started_local_ray():
            yield
            return
        self._returned.clear()
        threading.Thread(target=self._run, name="raytrain-ray-watch", daemon=True).start()
        try:
            yield
        finally:
            self._returned.set()
            if not self.lost and not self.term.received:
                from raytrain.tune import state as tune_state

                lost = local_ray_core_lost(probe=True)
                if lost and (sys.exc_info()[0] is not None
                             or any(s != "TERMINATED" for s in tune_state.statuses(self.exp_dir).values())):
                    self._say(lost)
                    self.lost = lost
            if self.lost:
                with self._ending:  # the watch's thread may be ending it already
                    end_sweep_over_a_lost_ray(self.exp_dir, None, {}, status=1)

    def _run(self) -> None:
        import signal
        import time

        from raytrain.ray_session import local_ray_core_lost
        from raytrain.tune import state as tune_state

        while not self._returned.wait(self.every_s):
            if self.term.received:
                return
            lost = local_ray_core_lost(probe=True)
            if not lost or self._returned.is_set() or not tune_loop_begun():  # else the SIGUSR1 would end the process
                continue
            asked = time.time()
            before = tune_state.statuses(self.exp_dir)  # as Tune last saved them
            self._say(lost)
            self.lost = lost
            os.kill(os.getpid(), signal.SIGUSR1)
            if self._returned.wait(self.own_save_s):
                return  # `during_fit` ends it
            with self._ending:
                end_sweep_over_a_lost_ray(self.exp_dir, asked, before, status=1)

    @staticmethod
    def _say(lost: list[str]) -> None:
        print(f"raytrain: the local Ray this sweep started stopped under it ({', '.join(lost)}: `ray stop` on this "
              "machine, the OOM killer, or a signal to Ray's processes alone), so its trials cannot go on: ending the "
              "sweep with Tune's state saved", file=sys.stderr, flush=True)


def interrupting_signal() -> str | None:
    """What interrupted this process through `interrupt_on_signals`: `Ctrl-C`, `SIGTERM`, or None."""
    return _interrupted_by[0][0] if _interrupted_by else None


def local_ray_lost_to_the_signal(*, notice_s: float = 1.0) -> bool:
    """Whether the SIGTERM that interrupted this process (`interrupt_on_signals`) stopped the local Ray it started
    too (`local_ray_lost`): it went to every process of the command. Ray's processes may take a moment to end after
    the signal, so this waits until `notice_s` after it; a Ctrl-C (which Ray's processes block), no interruption,
    or a Ray this process joined is never that, and is answered at once."""
    import time

    from raytrain.ray_session import local_ray_lost, started_local_ray

    if interrupting_signal() != "SIGTERM" or not started_local_ray():
        return False
    deadline = _interrupted_by[0][1] + notice_s
    while not local_ray_lost():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
    return True


def _rays_half_built(unraisable: Any) -> bool:
    """After an interruption: whether an unraisable exception is that of an object of Ray's that the
    KeyboardInterrupt left half made (an Algorithm's build interrupted), failing in `__del__` on an attribute never
    set ("Exception ignored in: <function LearnerGroup.__del__ ...> AttributeError: ... '_is_shut_down'"), which
    tells the user nothing. Those are dropped; any other unraisable exception is printed as before."""
    module = getattr(unraisable.object, "__module__", None) or ""
    return module.startswith("ray.") and isinstance(unraisable.exc_value, AttributeError)


def interrupt_on_signals(*, second_term_ends: bool = True) -> None:
    """Ctrl-C and SIGTERM (a scheduler, `kill`) both raise KeyboardInterrupt: training stops with a
    checkpoint, `raytrain run` stops every node.

    Installed explicitly because a process started in the background by a non-interactive shell
    inherits SIGINT as ignored, and SIGTERM would otherwise end the run without a checkpoint.
    A second signal while the checkpoint is being written ends the process at once; with
    `second_term_ends=False` a second SIGTERM is ignored instead (a Slurm job's driver gets one from Slurm
    and one forwarded by the batch shell; Slurm's SIGKILL after KillWait still ends it).
    """
    import signal
    import time

    from raytrain.quiet import dropping_unraisable  # here, not inside the handler (the import lock)

    def first(signum: int, frame: FrameType | None) -> None:
        _interrupted_by.append(("Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name, time.monotonic()))
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL if second_term_ends else signal.SIG_IGN)
        sys.unraisablehook = dropping_unraisable(_rays_half_built, sys.unraisablehook)
        from raytrain.interrupts import raise_or_hold

        raise_or_hold()  # now, or at the end of a block that must not be cut in two (an iteration's row)

    signal.signal(signal.SIGINT, first)
    signal.signal(signal.SIGTERM, first)

"""The `raytrain` command line: one typer sub-app per command group. Renders; never decides."""

from __future__ import annotations

import os
from typing import Any, NoReturn

import typer
from typer.core import TyperGroup

from raytrain import __version__
from raytrain.cli import cluster_cmd, config_cmd, nfs_cmd, run_cmd, slurm_cmd, train_cmd, tune_cmd


class _RaytrainGroup(TyperGroup):
    """The root command: refuses an empty argument before any command parses it (`empty_argument`)."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:  # typer's own click Context
        if (empty := empty_argument(args)) is not None:
            where, what = empty
            raise typer.BadParameter(what, ctx=ctx, param_hint=where)
        return super().parse_args(ctx, args)


app = typer.Typer(
    cls=_RaytrainGroup,
    name="raytrain",
    help="Train and sweep RLlib PPO agents on your own Ray cluster from one YAML file.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"raytrain {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Show tracebacks on errors (also RAYTRAIN_DEBUG=1)."),
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
) -> None:
    if verbose:
        os.environ["RAYTRAIN_DEBUG"] = "1"


def empty_argument(args: list[str]) -> tuple[str, str] | None:
    """(which argument, what is wrong) of the first empty one among a command's `args` (before `--`), else None.

    No raytrain argument takes an empty value, and a path argument `''` is read as `.`: `eval ''` looked at the
    current directory, and `--address ''` meant a local Ray to `train` but failed `run` once Ray had started. What
    follows `--` is a command of the user's own (`cluster exec FILE -- ...`), empties included.
    """
    for i, arg in enumerate(args):
        if arg == "--":
            return None
        flag = args[i - 1] if i and args[i - 1].startswith("-") and "=" not in args[i - 1] else None
        if arg.startswith("-") and arg.endswith("=") and len(arg) > 2:
            flag, arg = arg[:-1], ""
        if arg.strip():
            continue
        if flag is not None:
            return flag, f"empty: give a value, or leave {flag} out"
        return (f"argument {i + 1} (after {args[i - 1]})" if i else "argument 1"), "empty: give a value"
    return None


app.add_typer(config_cmd.app, name="config")
app.add_typer(tune_cmd.app, name="tune")
app.add_typer(cluster_cmd.app, name="cluster")
app.add_typer(nfs_cmd.app, name="nfs")
app.add_typer(slurm_cmd.app, name="slurm")
train_cmd.register(app)
run_cmd.register(app)


def main() -> None:
    """The `raytrain` process: the command, then an exit that skips only the interpreter's own teardown."""
    import sys

    if not (sys.stdout.isatty() and sys.stderr.isatty()):
        # Ray colours the prefix of each line a worker prints, `(node.1 pid=...)`; in a file or a pipe (a Slurm
        # job's output, CI logs) the escape codes are noise. Ray's documented switch, unless the user set it.
        os.environ.setdefault("RAY_COLOR_PREFIX", "0")
    try:
        os.getcwd()
    except FileNotFoundError:  # torch's oneMKL then ends the process with a FATAL ERROR, exit 2, no word of why
        print("error: the current directory no longer exists (it was deleted, or its file system went away): cd to "
              "one that does", file=sys.stderr)
        exit_process(2)
    try:
        app()
        code: str | int | None = 0
    except SystemExit as done:
        code = done.code
    exit_process(code)


def exit_process(code: str | int | None) -> NoReturn:
    """End this process as `sys.exit(code)` would, minus the interpreter's teardown when torch or Ray was loaded.

    A normal exit waits for non-daemon threads, runs the atexit handlers (Ray's shutdown, which stops the
    local Ray this process started; logging's flush) and then tears the interpreter down, which with torch
    and Ray loaded takes 1.5 s or more after the command's work is done and its last line printed. This
    does the first two the same way and then ends the process (`os._exit`), once stdout and stderr are flushed.
    """
    import sys

    if "torch" not in sys.modules and "ray" not in sys.modules:
        sys.exit(code)
    import atexit
    import threading

    from raytrain.ray_session import abandon_local_ray, local_ray_lost

    if local_ray_lost():  # the signal that stopped this command stopped its local Ray too: nothing to shut down
        abandon_local_ray()
    for thread in threading.enumerate():
        if thread is not threading.current_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    if code is None:
        status = 0
    elif isinstance(code, int):
        status = code
    else:  # sys.exit("message"): the message on stderr, status 1
        print(code, file=sys.stderr)
        status = 1
    from raytrain.cli.common import exit_now

    exit_now(status)

"""`raytrain run`: launch a middleware pipeline on N nodes (DI-engine's `ditask`)."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Annotated, Any

import typer

from raytrain.cli.common import (
    AddressOption,
    ClusterOption,
    err,
    handle_errors,
    interrupt_on_signals,
    interrupting_signal,
)
from raytrain.errors import UsageError
from raytrain.imports import import_module, module_failed, put_first_on_path
from raytrain.ray_session import cluster_address


def load_main(target: Path, main: str) -> Callable[..., Any]:
    """The function `main` names, from a Python file or a directory holding modules or a package."""
    target = target.expanduser().resolve()
    given = main  # as written, for the messages
    if main.count(":") == 1:  # module:function, as entry points (and uvicorn, gunicorn) write it
        main = main.replace(":", ".")
    if not target.exists():
        raise UsageError(f"{target}: no such file or directory (give a .py file or the folder of your package)")
    from raytrain.framework.runner import importing_main

    with importing_main() as refused:
        try:
            return _load_main(target, main, given)
        except UsageError:
            if refused:  # its own runner call, whatever the import made of that error
                raise UsageError(refused[0]) from None
            raise


def _load_main(target: Path, main: str, given: str) -> Callable[..., Any]:
    module_name, _, func_name = main.rpartition(".")
    if target.is_file():
        if target.suffix != ".py":
            raise UsageError(f"{target}: not a Python file (give a .py file or the folder of your package)")
        put_first_on_path(str(target.parent))
        if module_name in ("", target.stem):
            spec = importlib.util.spec_from_file_location(target.stem, target)
            if spec is None or spec.loader is None:
                raise UsageError(f"{target}: Python cannot load this file as a module")
            module = importlib.util.module_from_spec(spec)
            sys.modules[target.stem] = module
            try:
                spec.loader.exec_module(module)
            except BaseException as exc:
                del sys.modules[target.stem]
                if not isinstance(exc, Exception):
                    raise
                failed = exc if isinstance(exc, ImportError) else module_failed(exc, target.stem)
                raise UsageError(f"--main {given}: cannot import {target.stem}: {failed}") from None
        else:
            module = _import(module_name, given)
    else:
        for path in (target.parent, target) if (target / "__init__.py").exists() else (target,):
            put_first_on_path(str(path))
        if not module_name:
            raise UsageError(f"--main {given}: give module.function, e.g. --main my_pipeline.main")
        module = _import(module_name, given)
    fn = getattr(module, func_name, None)
    if not callable(fn):
        found = sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith("_") and getattr(v, "__module__", None) == module.__name__)
        raise UsageError(f"--main {given}: {module.__name__} has no function '{func_name}' (functions there: {', '.join(found) or 'none'})")
    what = ("a coroutine function (async def)" if inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn)
            else "a generator function (it yields)" if inspect.isgeneratorfunction(fn) else None)
    if what is not None:
        raise UsageError(f"--main {given}: {func_name} is {what}: calling it runs none of its body, and every node calls "
                         "it once; name a plain function (def main(): ...), which may run a coroutine with asyncio.run")
    try:
        inspect.signature(fn).bind()
    except TypeError:
        needed = next(p.name for p in inspect.signature(fn).parameters.values()
                      if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))
        raise UsageError(f"--main {given}: {func_name}{inspect.signature(fn)} takes arguments, and every node calls it "
                         f"with none (as DI-engine's ditask does): give {needed} a default, or name a function that "
                         "takes none") from None
    except ValueError:  # no signature to read (a builtin): calling it tells
        pass
    return fn


def _import(module_name: str, main: str) -> ModuleType:
    try:
        return import_module(module_name)
    except ImportError as e:  # ModuleFailedError too: a syntax error or an exception in the module, at its line
        if isinstance(e, ModuleNotFoundError) and e.name and module_name.startswith(e.name):
            raise UsageError(f"--main {main}: no module '{e.name}' in the given folder or on the Python path") from None
        raise UsageError(f"--main {main}: cannot import {module_name}: {e}") from None


def _labels(value: str | None) -> list[str]:
    """`--labels a,b`: each label, none empty (an empty one was dropped without a word)."""
    if value is None or not value.strip():  # --labels '': none, as written
        return []
    labels = [label.strip() for label in value.split(",")]
    if not all(labels):
        raise UsageError(f"--labels {value}: an empty label between commas: give comma-separated labels, e.g. "
                         "--labels learner,collector")
    return labels


def _node_ids(value: str | None, workers: int) -> int | list[int] | None:
    if value is None:
        return None
    wanted = f"give a first id (e.g. 10) or a comma-separated list of {workers} distinct ids"
    items = value.split(",")
    if len(items) > 1 and not all(v.strip() for v in items):
        raise UsageError(f"--node-ids {value}: an empty id between commas: {wanted}")
    try:
        ids = [int(v) for v in items]
    except ValueError:
        raise UsageError(f"--node-ids {value}: {wanted}") from None
    if any(i < 0 for i in ids):
        raise UsageError(f"--node-ids {value}: node ids are 0 or more: {wanted}")
    if len(ids) == 1 and workers > 1:
        return ids[0]
    if len(ids) != workers or len(set(ids)) != len(ids):
        raise UsageError(f"--node-ids {value}: {len(ids)} id{'s' if len(ids) != 1 else ''}"
                         f"{'' if len(set(ids)) == len(ids) else ', not all distinct'}, for --workers {workers}: {wanted}")
    return ids


def _check_options(workers: int, topology: str, address_or_cluster: tuple[str | None, Path | None],
                   auto_recover: bool, max_retries_given: bool, num_cpus: float) -> None:
    """Options that cannot work, or that nothing would use, refused by name before anything starts."""
    from raytrain.framework.router import TOPOLOGIES

    if topology not in TOPOLOGIES:
        raise UsageError(f"--topology {topology}: use one of {', '.join(TOPOLOGIES)}")
    if max_retries_given and not auto_recover:
        raise UsageError("--max-retries: restarts happen only with --auto-recover; add it, or leave --max-retries out")
    if workers == 1:
        address, cluster = address_or_cluster
        unused = [flag for flag, given in (("--address", address), ("--cluster", cluster), ("--auto-recover", auto_recover),
                                           ("--num-cpus", num_cpus)) if given]
        if unused:
            raise UsageError(f"{', '.join(unused)}: with --workers 1 the node runs in this process, without Ray "
                             f"(as DI-engine's ditask does), so nothing would use {'them' if len(unused) > 1 else 'it'}: "
                             "give --workers 2 or more to run the nodes as Ray actors")


def run(
    target: Annotated[Path, typer.Argument(metavar="PACKAGE_OR_FILE", help="A .py file, or the folder of your package/modules.")],
    main: str = typer.Option(..., "--main", "-m", help="The function each node runs: `main` in the file, or module.function (module:function too)."),
    workers: int = typer.Option(1, "--workers", "-n", min=1, help="How many nodes (1 runs in this process)."),
    topology: str = typer.Option("mesh", help="mesh (all hear all), star (node 0 and its leaves) or alone."),
    labels: str | None = typer.Option(None, help="Comma-separated labels every node has (task.match_labels)."),
    node_ids: str | None = typer.Option(None, "--node-ids", help="First node id (e.g. 10) or a comma-separated list."),
    address: AddressOption = None,
    cluster: ClusterOption = None,
    auto_recover: bool = typer.Option(False, "--auto-recover", help="Restart a node whose main fails or whose process dies."),
    max_retries: int | None = typer.Option(None, "--max-retries", min=0, show_default=False,
                                           help="Restarts per node with --auto-recover.  [default: 3]"),
    num_cpus: float = typer.Option(0, "--num-cpus", min=0, help="CPUs each node reserves on the cluster (0: none)."),
) -> None:
    """Run a middleware pipeline (raytrain.framework) on N nodes, each a Ray actor: the counterpart of `ditask`."""
    _run(target, main, workers, topology, labels, node_ids, (address, cluster), (auto_recover, max_retries), num_cpus)


@handle_errors
def _run(
    target: Path,
    main: str,
    workers: int,
    topology: str,
    labels: str | None,
    node_ids: str | None,
    address_or_cluster: tuple[str | None, Path | None],
    recovery: tuple[bool, int | None],
    num_cpus: float,
) -> None:
    auto_recover, max_retries = recovery
    _check_options(workers, topology, address_or_cluster, auto_recover, max_retries is not None, num_cpus)
    ids = _node_ids(node_ids, workers)
    label_list = _labels(labels)
    address = cluster_address(*address_or_cluster)  # before Ray is imported
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")  # every node's lines, each prefixed with its node id
    from raytrain.framework import Parallel

    fn = load_main(target, main)
    runner = Parallel.runner(
        n_parallel_workers=workers,
        topology=topology,
        labels=label_list,
        node_ids=ids,
        auto_recover=auto_recover,
        max_retries=3 if max_retries is None else max_retries,
        ray_address=address,
        num_cpus=num_cpus,
    )
    from raytrain.quiet import quiet_ray

    # Ray's own messages below ERROR (a local Ray's token-authentication notice): off the terminal, as with
    # eval, which has no folder to log them to either (--verbose prints them). What the nodes print still shows.
    messages = quiet_ray()
    started = time.perf_counter()
    try:
        runner.connect()  # Ray first: `ray.init` installs its own SIGTERM handler, which would end this at once
        interrupt_on_signals()  # Ctrl-C and SIGTERM stop every node, even where SIGINT came in ignored
        runner.run_for_effect(fn)
    except KeyboardInterrupt:
        err.print(f"stopped by {interrupting_signal() or 'Ctrl-C'}: all {workers} nodes stopped", style="red")
        raise typer.Exit(130) from None
    finally:
        if messages is not None:
            messages.close()
    err.print(f"{workers} node{'s' if workers > 1 else ''} finished in {time.perf_counter() - started:.1f} s", style="dim")


def register(app: typer.Typer) -> None:
    app.command("run")(run)

"""`raytrain run`: launch a middleware pipeline on N nodes (DI-engine's `ditask`)."""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Annotated, Any

import typer

from raytrain.cli.common import AddressOption, ClusterOption, err, handle_errors, interrupt_on_signals
from raytrain.errors import UsageError
from raytrain.imports import import_module
from raytrain.ray_session import cluster_address


def load_main(target: Path, main: str) -> Callable[..., Any]:
    """The function `main` names, from a Python file or a directory holding modules or a package."""
    target = target.expanduser().resolve()
    if not target.exists():
        raise UsageError(f"{target}: no such file or directory (give a .py file or the folder of your package)")
    module_name, _, func_name = main.rpartition(".")
    if target.is_file():
        if target.suffix != ".py":
            raise UsageError(f"{target}: not a Python file (give a .py file or the folder of your package)")
        sys.path.insert(0, str(target.parent))
        if module_name in ("", target.stem):
            spec = importlib.util.spec_from_file_location(target.stem, target)
            if spec is None or spec.loader is None:
                raise UsageError(f"{target}: Python cannot load this file as a module")
            module = importlib.util.module_from_spec(spec)
            sys.modules[target.stem] = module
            try:
                spec.loader.exec_module(module)
            except BaseException:
                del sys.modules[target.stem]
                raise
        else:
            module = _import(module_name, main)
    else:
        for path in (target.parent, target) if (target / "__init__.py").exists() else (target,):
            sys.path.insert(0, str(path))
        if not module_name:
            raise UsageError(f"--main {main}: give module.function, e.g. --main my_pipeline.main")
        module = _import(module_name, main)
    fn = getattr(module, func_name, None)
    if not callable(fn):
        found = sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith("_") and getattr(v, "__module__", None) == module.__name__)
        raise UsageError(f"--main {main}: {module.__name__} has no function '{func_name}' (functions there: {', '.join(found) or 'none'})")
    return fn


def _import(module_name: str, main: str) -> ModuleType:
    try:
        return import_module(module_name)
    except ModuleNotFoundError as e:
        if e.name and module_name.startswith(e.name):
            raise UsageError(f"--main {main}: no module '{e.name}' in the given folder or on the Python path") from None
        raise


def _node_ids(value: str | None, workers: int) -> int | list[int] | None:
    if value is None:
        return None
    try:
        ids = [int(v) for v in value.split(",") if v.strip()]
    except ValueError:
        raise UsageError(f"--node-ids {value}: give a first id (e.g. 10) or a comma-separated list of {workers} ids") from None
    return ids[0] if len(ids) == 1 and workers > 1 else ids


def run(
    target: Annotated[Path, typer.Argument(metavar="PACKAGE_OR_FILE", help="A .py file, or the folder of your package/modules.")],
    main: str = typer.Option(..., "--main", "-m", help="The function each node runs: `main` in the file, or module.function."),
    workers: int = typer.Option(1, "--workers", "-n", min=1, help="How many nodes (1 runs in this process)."),
    topology: str = typer.Option("mesh", help="mesh (all hear all), star (node 0 and its leaves) or alone."),
    labels: str | None = typer.Option(None, help="Comma-separated labels every node has (task.match_labels)."),
    node_ids: str | None = typer.Option(None, "--node-ids", help="First node id (e.g. 10) or a comma-separated list."),
    address: AddressOption = None,
    cluster: ClusterOption = None,
    auto_recover: bool = typer.Option(False, "--auto-recover", help="Restart a node whose main fails or whose process dies."),
    max_retries: int = typer.Option(3, "--max-retries", min=0, help="Restarts per node with --auto-recover."),
    num_cpus: float = typer.Option(0, "--num-cpus", min=0, help="CPUs each node reserves on the cluster (0: none)."),
) -> None:
    """Run a middleware pipeline (raytrain.framework) on N nodes, each a Ray actor: the counterpart of `ditask`."""
    _run(target, main, workers, topology, labels, node_ids, (address, cluster), auto_recover, max_retries, num_cpus)


@handle_errors
def _run(
    target: Path,
    main: str,
    workers: int,
    topology: str,
    labels: str | None,
    node_ids: str | None,
    address_or_cluster: tuple[str | None, Path | None],
    auto_recover: bool,
    max_retries: int,
    num_cpus: float,
) -> None:
    address = cluster_address(*address_or_cluster)  # before Ray is imported
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")  # every node's lines, each prefixed with its node id
    from raytrain.framework import Parallel

    fn = load_main(target, main)
    runner = Parallel.runner(
        n_parallel_workers=workers,
        topology=topology,
        labels=[label.strip() for label in (labels or "").split(",") if label.strip()],
        node_ids=_node_ids(node_ids, workers),
        auto_recover=auto_recover,
        max_retries=max_retries,
        ray_address=address,
        num_cpus=num_cpus,
    )
    interrupt_on_signals()  # Ctrl-C and SIGTERM stop every node, even where SIGINT came in ignored
    from raytrain.quiet import quiet_ray

    # Ray's own messages below ERROR (a local Ray's token-authentication notice): off the terminal, as with
    # eval, which has no folder to log them to either (--verbose prints them). What the nodes print still shows.
    messages = quiet_ray()
    started = time.perf_counter()
    try:
        runner(fn)
    except KeyboardInterrupt:
        err.print(f"stopped by Ctrl-C: all {workers} nodes stopped", style="red")
        raise typer.Exit(130) from None
    finally:
        if messages is not None:
            messages.close()
    err.print(f"{workers} node{'s' if workers > 1 else ''} finished in {time.perf_counter() - started:.1f} s", style="dim")


def register(app: typer.Typer) -> None:
    app.command("run")(run)

"""`raytrain nfs exports FILE`: the NFS server's side of a cluster's shared storage."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from raytrain.cli.common import SetOption, handle_errors

app = typer.Typer(help="The NFS share of a cluster's checkpoints (see nfs/ for the setup scripts).", no_args_is_help=True, rich_markup_mode=None)


@app.command()
@handle_errors
def exports(
    file: Annotated[Path, typer.Argument(help="Cluster YAML: every node's address may mount the share.")],
    set_: SetOption = None,
    export: str | None = typer.Option(None, "--export", help="Exported directory (default: storage.nfs.export, else /nfsroot)."),
    options: str | None = typer.Option(None, "--options", help="Options per node (default: storage.nfs.export_options, else rw,sync,no_subtree_check,no_root_squash)."),
) -> None:
    """Print the /etc/exports line for the cluster's nodes: each node's own address with its options, never `*`,
    a network, a netgroup or a wildcard."""
    from raytrain.cluster.plan import exports_line
    from raytrain.config.cluster import EXPORT_PATH, OPTIONS_RE, check_export, load_cluster
    from raytrain.errors import UsageError

    if export is not None and not EXPORT_PATH.fullmatch(export):
        raise UsageError(f"--export must be an absolute path of letters, digits and `._/-` (no spaces), got {export!r}")
    if export is not None:
        try:
            check_export(export)
        except ValueError as exc:
            raise UsageError(f"--export {export}: {exc}") from None
    if options is not None and not OPTIONS_RE.fullmatch(options):
        raise UsageError(f"--options must be a comma-separated option list without spaces or quotes, got {options!r}")
    cfg = load_cluster(file, set_ or [])
    typer.echo(exports_line(cfg, export, options))

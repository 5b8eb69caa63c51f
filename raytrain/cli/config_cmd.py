"""`raytrain config ...`: validate, show, schema, import-rllib."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from raytrain.cli.common import SetOption, err, handle_errors, out, say, write_output

if TYPE_CHECKING:
    from raytrain.errors import ConfigError

app = typer.Typer(help="Check, show and convert config files.", no_args_is_help=True, rich_markup_mode=None)


KindOption = Annotated[
    str | None,
    typer.Option("--kind", help="train, sweep, cluster or slurm (default: told from the file's top-level sections)."),
]


def _print_failure(exc: ConfigError) -> None:
    for issue in exc.issues:
        err.print(f"error: {issue}", style="red", markup=False)
    hint = getattr(exc, "kind_hint", None)
    if hint:
        err.print(f"note: {hint}", style="dim", markup=False)


@app.command()
@handle_errors
def validate(
    files: Annotated[list[Path], typer.Argument(help="Train, sweep or cluster files to check.")],
    set_: SetOption = None,
    kind: KindOption = None,
    rllib: bool = typer.Option(True, help="Also run RLlib's (and, for sweeps, Tune's) own validation (imports Ray)."),
) -> None:
    """Check train, sweep and cluster files with the checks `train`, `tune` and `cluster up` run; start nothing.

    A sweep's base and every trial config are checked, a cluster's schema and the plan of every command
    `cluster up` would run (no host is contacted).
    """
    from raytrain.config.kind import check_kind
    from raytrain.errors import ConfigError
    from raytrain.validate import check_file

    check_kind(kind)
    failed = 0
    for file in files:
        try:
            checked = check_file(file, set_ or [], kind=kind, rllib=rllib)
        except ConfigError as exc:
            failed += 1
            _print_failure(exc)
            continue
        say(checked.notices)
        out.print(f"ok: {file} ({checked.kind}: {checked.checked})", style="green", markup=False)
    if failed:
        raise typer.Exit(2)


@app.command()
@handle_errors
def show(
    file: Annotated[Path, typer.Argument(help="Train, sweep or cluster file.")],
    set_: SetOption = None,
    kind: KindOption = None,
    json_: bool = typer.Option(False, "--json", help="Print JSON: {kind, ...} (train: raytrain, rllib; sweep: sweep, base; cluster: cluster, commands)."),
) -> None:
    """Print the resolved config: a train config and its RLlib builder calls, a sweep and its base, or a
    cluster and the commands `cluster up` would run on each node (nothing is run)."""
    import yaml

    from raytrain.errors import ConfigError
    from raytrain.validate import check_file

    try:
        checked = check_file(file, set_ or [], kind=kind, rllib=False)
    except ConfigError as exc:
        _print_failure(exc)
        raise typer.Exit(2) from None
    say(checked.notices)

    def section(title: str, data: Any) -> None:
        out.print(title, style="bold", markup=False)
        out.print(yaml.safe_dump(data, sort_keys=False).rstrip(), markup=False)

    if checked.kind == "train":
        from raytrain.rllib.translate import rllib_calls

        resolved = checked.loaded.config.to_yaml_dict()
        calls = rllib_calls(checked.loaded.config)
        if json_:
            out.print_json(data={"kind": "train", "raytrain": resolved, "rllib": calls})
            return
        section("# resolved raytrain config", resolved)
        out.print()
        section("# RLlib: PPOConfig() builder calls (only what is set; the rest is RLlib's default)", calls)
    elif checked.kind == "sweep":
        loaded = checked.loaded
        sweep = loaded.sweep.model_dump(mode="json", exclude_none=True)
        base = loaded.base.config.to_yaml_dict()
        # What a trial runs: its folder and checkpoints are the sweep's (`name`, `checkpoint:` above), so the base
        # config's own (experiment.name 'cp' and checkpoint_frequency 10 beside the sweep's cp_grid and 5) are left out.
        from raytrain.config.sweep_load import SWEEP_OWNS

        for key in SWEEP_OWNS:
            base["experiment"].pop(key.removeprefix("experiment."), None)
        if json_:
            out.print_json(data={"kind": "sweep", "sweep": sweep, "base": base, "experiment_dir": str(loaded.experiment_dir)})
            return
        section("# resolved sweep", sweep)
        out.print()
        section("# base train config of every trial (with the sweep's `set:` and `stop:`; its name, storage and "
                "checkpoints are the sweep's)", base)
        out.print(f"\n# experiment folder: {loaded.experiment_dir}", markup=False)
    elif checked.kind == "slurm":
        resolved = checked.loaded.model_dump(mode="json", exclude_none=True)
        if json_:
            out.print_json(data={"kind": "slurm", "slurm": resolved})
            return
        section("# resolved Slurm file (the batch script: raytrain tune|train FILE --slurm THIS --dry-run)", resolved)
    else:
        from raytrain.cluster.plan import firewall_ports

        cfg = checked.loaded
        resolved = cfg.model_dump(mode="json", exclude_none=True)
        ports = [{"port": p, "what": what} for p, what in firewall_ports(cfg)]
        if json_:
            commands = [{"node": n, "command": c} for n, c in checked.commands]
            out.print_json(data={"kind": "cluster", "cluster": resolved, "commands": commands, "firewall_ports": ports})
            return
        section("# resolved cluster", resolved)
        out.print("\n# commands `raytrain cluster up` runs, per node (as --dry-run prints them; nothing was run)",
                  style="bold", markup=False)
        for node, command in checked.commands:
            out.print(f"[{node}] {command}", markup=False)
        out.print("\n# ports to open between the nodes", style="bold", markup=False)
        for p in ports:
            out.print(f"{p['port']}: {p['what']}", markup=False)


@app.command()
@handle_errors
def schema(
    output: Path | None = typer.Option(None, "-o", "--output", help="Write to this file instead of stdout."),
    kind: str = typer.Option("train", "--kind", help="Which file: train, sweep (raytrain tune), cluster (raytrain cluster) or slurm (--slurm)."),
    force: bool = typer.Option(False, "--force", help="Overwrite OUTPUT if it exists."),
) -> None:
    """Print the JSON Schema of train, sweep, cluster or slurm files (for editor completion, e.g. yaml-language-server)."""
    from raytrain.config.docs import json_schema
    from raytrain.errors import UsageError

    if kind not in ("train", "sweep", "cluster", "slurm"):
        raise UsageError(f"--kind {kind!r}: choose train, sweep, cluster or slurm")
    text = json.dumps(json_schema(kind), indent=2)
    if output:
        write_output(output, text + "\n", force=force)
    else:
        typer.echo(text)


@app.command("import-rllib")
@handle_errors
def import_rllib(
    file: Annotated[Path, typer.Argument(help="An RLlib tuned-example YAML (the `rllib train -f` format).")],
    output: Path | None = typer.Option(None, "-o", "--output", help="Write the raytrain YAML here (default: stdout)."),
    experiment: str | None = typer.Option(None, help="Which experiment of the file to convert, when it holds several."),
    force: bool = typer.Option(False, "--force", help="Overwrite OUTPUT if it exists."),
) -> None:
    """Convert RLlib's former tuned-example YAML into a raytrain config (a grid sweep where it has grid_search
    values), listing what cannot be translated."""
    import yaml

    from raytrain.config import aliases
    from raytrain.config.import_rllib import convert
    from raytrain.config.load import load_source
    from raytrain.config.source import Source, read_yaml
    from raytrain.config.sweep_load import load_sweep_source

    source = read_yaml(file)
    result = convert(source, experiment)
    header = f"# Converted from {file} by `raytrain config import-rllib`.\n"
    notes = [f"notice: {n}" for n in result.notes]
    if result.space:
        # A sweep: validated as `raytrain tune` validates one (the train config, the space over it).
        swept = load_sweep_source(result.sweep_source(str(file)), file, storage="skip")
        loaded, notices = swept.base, swept.notices
        data = result.sweep()
        data["train"] = loaded.config.to_yaml_dict(only_written=True)
        header = (f"# Converted from {file} by `raytrain config import-rllib`: a grid sweep over its grid_search "
                  "values; run it with `raytrain tune THIS_FILE`.\n")
        notes.append(f"notice: {file}: its grid_search values ({', '.join(result.space)}) became a grid sweep "
                     "(search.algorithm grid, space:), with the train config embedded as train:; run it with "
                     "raytrain tune")
    else:
        # Validate a copy through the same path `raytrain train` takes (aliases, schema, env, stop).
        loaded = load_source(Source(json.loads(json.dumps(result.data)), dict(result.origins), str(file)))
        notices = loaded.notices
        data = loaded.config.to_yaml_dict(only_written=True)
    if "storage_path" in result.data["experiment"]:  # as written: `~/ray_results`, not this machine's home
        (data["train"] if result.space else data)["experiment"]["storage_path"] = result.data["experiment"]["storage_path"]
    text = yaml.safe_dump(data, sort_keys=False)
    if result.untranslated:
        header += "# Not translated (no counterpart on RLlib's new API stack or in raytrain):\n"
        header += "".join(f"#   {line}\n" for line in result.untranslated)
    say([n.removesuffix(aliases.RENAME_HINT) for n in notices] + notes)
    for line in result.untranslated:
        err.print(f"not translated: {line}", style="yellow", markup=False)
    if output:
        write_output(output, header + text, force=force)
    else:
        typer.echo(header + text, nl=False)

"""`raytrain config ...`: validate, show, schema, import-rllib."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from raytrain.cli.common import SetOption, err, handle_errors, out, say

app = typer.Typer(help="Check, show and convert config files.", no_args_is_help=True, rich_markup_mode=None)


@app.command()
@handle_errors
def validate(
    files: Annotated[list[Path], typer.Argument(help="Config files to check.")],
    set_: SetOption = None,
    rllib: bool = typer.Option(True, help="Also build the PPOConfig and run RLlib's own validation (imports Ray)."),
) -> None:
    """Check config files: schema, old names, env ids, stop metrics, cross-field rules."""
    from raytrain.config.load import load_config
    from raytrain.errors import ConfigError, ConfigIssue

    failed = 0
    for file in files:
        try:
            loaded = load_config(file, set_ or [])
            if rllib:
                from raytrain.rllib.translate import build_ppo_config

                try:
                    build_ppo_config(loaded.config).validate()
                except Exception as exc:  # RLlib raises ValueError and friends
                    raise ConfigError([ConfigIssue(str(file), "", f"RLlib rejects the config: {exc}")]) from None
        except ConfigError as exc:
            failed += 1
            for issue in exc.issues:
                err.print(f"error: {issue}", style="red", markup=False)
            continue
        say(loaded.notices + loaded.warnings)
        out.print(f"ok: {file}", style="green", markup=False)
    if failed:
        raise typer.Exit(2)


@app.command()
@handle_errors
def show(
    file: Annotated[Path, typer.Argument(help="Config file.")],
    set_: SetOption = None,
    json_: bool = typer.Option(False, "--json", help="Print JSON: {raytrain: ..., rllib: ...}."),
) -> None:
    """Print the resolved raytrain config and the exact RLlib builder calls it becomes."""
    import yaml

    from raytrain.config.load import load_config
    from raytrain.rllib.translate import rllib_calls

    loaded = load_config(file, set_ or [])
    say(loaded.notices + loaded.warnings)
    resolved = loaded.config.to_yaml_dict()
    calls = rllib_calls(loaded.config)
    if json_:
        out.print_json(data={"raytrain": resolved, "rllib": calls})
        return
    out.print("# resolved raytrain config", style="bold", markup=False)
    out.print(yaml.safe_dump(resolved, sort_keys=False).rstrip(), markup=False)
    out.print("\n# RLlib: PPOConfig() builder calls (only what is set; the rest is RLlib's default)", style="bold", markup=False)
    out.print(yaml.safe_dump(calls, sort_keys=False).rstrip(), markup=False)


@app.command()
@handle_errors
def schema(
    output: Path | None = typer.Option(None, "-o", "--output", help="Write to this file instead of stdout."),
    kind: str = typer.Option("train", "--kind", help="Which file: train, sweep (raytrain tune) or cluster (raytrain cluster)."),
) -> None:
    """Print the JSON Schema of train, sweep or cluster files (for editor completion, e.g. yaml-language-server)."""
    from raytrain.config.docs import json_schema
    from raytrain.errors import UsageError

    if kind not in ("train", "sweep", "cluster"):
        raise UsageError(f"--kind {kind!r}: choose train, sweep or cluster")
    text = json.dumps(json_schema(kind), indent=2)
    if output:
        output.write_text(text + "\n")
        err.print(f"wrote {output}", markup=False)
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
    """Convert RLlib's former tuned-example YAML into a raytrain config, listing what cannot be translated."""
    import yaml

    from raytrain.config.import_rllib import convert
    from raytrain.config.load import load_source
    from raytrain.config.source import Source, read_yaml

    source = read_yaml(file)
    result = convert(source, experiment)
    # Validate a copy through the same path `raytrain train` takes (aliases, schema, env, stop).
    loaded = load_source(Source(json.loads(json.dumps(result.data)), {}, str(file)))
    text = yaml.safe_dump(loaded.config.to_yaml_dict(), sort_keys=False)
    header = f"# Converted from {file} by `raytrain config import-rllib`.\n"
    if result.untranslated:
        header += "# Not translated (no counterpart on RLlib's new API stack or in raytrain):\n"
        header += "".join(f"#   {line}\n" for line in result.untranslated)
    say([n.replace(f"{file}: ", "") for n in loaded.notices] + [f"notice: {n}" for n in result.notes])
    for line in result.untranslated:
        err.print(f"not translated: {line}", style="yellow", markup=False)
    if output:
        if output.exists() and not force:
            from raytrain.errors import UsageError

            raise UsageError(f"{output} exists; pass --force to overwrite it")
        output.write_text(header + text)
        err.print(f"wrote {output}", markup=False)
    else:
        typer.echo(header + text, nl=False)

"""`raytrain cluster up|down|status|check|exec|netcheck|dashboard FILE`."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from raytrain.cli.common import SetOption, err, handle_errors, interrupt_on_signals, out

if TYPE_CHECKING:
    from raytrain.cluster.lifecycle import Status
    from raytrain.cluster.runner import Runner
    from raytrain.config.cluster import ClusterConfig

app = typer.Typer(help="Start, stop and inspect an on-prem Ray cluster over SSH.", no_args_is_help=True, rich_markup_mode=None)

FileArg = Annotated[Path, typer.Argument(help="Cluster YAML (head, workers, ssh, storage, auth).")]


def _load(file: Path, set_: list[str] | None, *, starting: bool = False, insecure: bool = False) -> ClusterConfig:
    from raytrain.config.cluster import load_cluster

    return load_cluster(file, set_ or [], starting=starting, insecure=insecure)


def _token_file(cfg: ClusterConfig) -> str:
    """The token's path as messages show it (under ~, the same on every machine)."""
    return f"~/{cfg.token_path}"


def _warn_exposure(cfg: ClusterConfig) -> None:
    from raytrain.config.cluster import exposure_warnings

    for text in exposure_warnings(cfg):
        err.print(f"warning: {text}", style="yellow", markup=False)


InsecureOption = Annotated[bool, typer.Option("--insecure", help="Allow a network-open dashboard with auth disabled.")]


def _print_commands(runner: Runner) -> None:
    """What a dry run would have run: one line per command, prefixed with its node."""
    for node, command in runner.recorded():
        out.print(f"[{node}] {command}", markup=False)


def _runner(cfg: ClusterConfig, dry_run: bool = False) -> Runner:
    from raytrain.cluster.runner import DryRunner, SSHRunner

    return DryRunner(cfg.ssh) if dry_run else SSHRunner(cfg.ssh)


@app.command()
@handle_errors
def check(file: FileArg, set_: SetOption = None, insecure: InsecureOption = False) -> None:
    """The preflight alone: SSH, Python/Ray versions, head ports, shared storage, on all nodes in parallel."""
    from rich.table import Table

    from raytrain.cluster.lifecycle import check as run_check
    from raytrain.errors import ClusterError

    cfg = _load(file, set_, starting=True, insecure=insecure)
    _warn_exposure(cfg)
    report = run_check(cfg, _runner(cfg))
    table = Table(title=f"cluster {cfg.name}", title_justify="left")
    for col in ("node", "hostname", "python", "ray"):
        table.add_column(col)
    for node, v in report.versions.items():
        table.add_row(node, v.get("hostname", ""), v.get("python", ""), v.get("ray", ""))
    out.print(table)
    if not report.ok:
        raise ClusterError("preflight failed:\n  " + "\n  ".join(report.problems))
    out.print("preflight ok", style="green")


@app.command()
@handle_errors
def up(
    file: FileArg,
    set_: SetOption = None,
    dry_run: bool = typer.Option(False, "--dry-run", help="Print every command per host; start nothing."),
    restart: bool = typer.Option(False, "--restart", help="Stop a running cluster first, then start it again."),
    insecure: InsecureOption = False,
) -> None:
    """Preflight, start the head, then the workers in parallel; wait until every node is alive."""
    from raytrain.cluster import lifecycle, plan

    cfg = _load(file, set_, starting=True, insecure=insecure)
    _warn_exposure(cfg)
    runner = _runner(cfg, dry_run)
    # Ctrl-C and SIGTERM stop what `up` started, on every host, before it exits (a SIGTERM ended it at once, and a
    # background `up` whose SIGINT came in ignored went on): no half-started cluster is left behind.
    interrupt_on_signals()
    report = lifecycle.up(cfg, runner, restart=restart, on_step=lambda t: err.print(t, style="dim", markup=False))
    ports = "ports to open between the nodes: " + ", ".join(f"{p} ({what})" for p, what in plan.firewall_ports(cfg))
    if dry_run:
        _print_commands(runner)
        err.print(ports, markup=False)
        return
    if report.already_up:
        mounted = [m.node for m in report.mounts if m.action == "mounted"]
        changed = f"only mounted the share on {', '.join(mounted)}" if mounted else "nothing changed"
        err.print(f"cluster {cfg.name} is already up; {changed} (use --restart to restart it)", markup=False)
    else:
        err.print(f"cluster {cfg.name} up in {report.seconds:.1f} s", markup=False)
    if not report.already_up and all(n.node_name in report.versions for n in cfg.nodes):
        # What `up` just read: the nodes it waited for and the versions its preflight checked.
        shown = lifecycle.status(cfg, runner, known=report.nodes, versions=[report.versions[n.node_name] for n in cfg.nodes])
    else:
        shown = lifecycle.status(cfg, runner)
    _print_status(cfg, shown)
    if cfg.head.dashboard.enabled and cfg.auth.mode == "token":
        # The path, never the token itself: output ends up in logs and terminals others read.
        out.print(f"dashboard login: paste the token from {_token_file(cfg)} "
                  "into its \"Authentication Token Required\" box", markup=False)
    err.print(ports, markup=False)


def _interactive() -> bool:
    """Whether someone at a terminal can answer a question."""
    import sys

    return sys.stdin.isatty()


@app.command()
@handle_errors
def down(
    file: FileArg,
    set_: SetOption = None,
    yes: bool = typer.Option(False, "-y", "--yes", help="Do not ask."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the command per host; stop nothing."),
) -> None:
    """Stop the workers, then the head."""
    from raytrain.cluster import lifecycle
    from raytrain.errors import ClusterError

    cfg = _load(file, set_)
    if dry_run:
        runner = _runner(cfg, dry_run=True)
        lifecycle.down(cfg, runner)
        _print_commands(runner)
        return
    if not yes:
        what = f"every Ray process of cluster {cfg.name} on {len(cfg.nodes)} node(s)"
        if not _interactive():
            from raytrain.errors import UsageError

            raise UsageError(f"cluster down asks before it stops {what}, and no one can answer (stdin is not a "
                             "terminal): pass --yes")
        if not typer.confirm(f"stop {what}?"):
            err.print("nothing stopped", markup=False)
            raise typer.Exit(1)
    results = lifecycle.down(cfg, _runner(cfg))
    failed = [r for r in results if not r.ok]
    for r in results:
        err.print(f"{r.node}: {'stopped' if r.ok else 'FAILED'}", markup=False)
        for note in (n for n in r.stderr.splitlines() if n.startswith("note: ")) if r.ok else ():
            err.print(f"  {note}", markup=False)
    if failed:
        raise ClusterError("could not stop every node:\n  " + "\n  ".join(r.describe() for r in failed))


@app.command()
@handle_errors
def status(file: FileArg, set_: SetOption = None, json_: bool = typer.Option(False, "--json", help="Print JSON.")) -> None:
    """Nodes alive, dead and not joined; resources; the dashboard URL. Exit 0 when every node of FILE is alive,
    1 when not (the head down, a node dead or not joined)."""
    from dataclasses import asdict

    from raytrain.cluster import lifecycle

    cfg = _load(file, set_)
    st = lifecycle.status(cfg, _runner(cfg))
    if json_:
        typer.echo(json.dumps(asdict(st), indent=2))
    else:
        _print_status(cfg, st)
    problem = lifecycle.not_up(cfg, st, str(file))
    if problem is not None:
        err.print(problem, markup=False)
        raise typer.Exit(1)


@app.command("exec")
@handle_errors
def exec_(
    file: FileArg,
    command: Annotated[list[str], typer.Argument(help="The command (after --). One word is run as a shell line on each node, as ssh runs it (`-- 'df -h /data; uptime'`); several are run as they are, each quoted (`-- ls '$HOME'` lists a folder named $HOME). It runs in the SSH user's login environment, without the cluster's venv on PATH or its Ray token (`raytrain cluster status FILE` asks Ray with them).")],
    node: Annotated[list[str] | None, typer.Option("--node", help="Only these nodes (name or host; repeatable).")] = None,
    set_: SetOption = None,
    dry_run: bool = typer.Option(False, "--dry-run", help="Print the exact command per host; run nothing."),
) -> None:
    """Run a command on all (or some) nodes in parallel; each line prefixed with its node."""
    from raytrain.cluster import lifecycle
    from raytrain.errors import UsageError

    cfg = _load(file, set_)
    nodes = cfg.nodes
    if node:
        nodes = [n for n in cfg.nodes if n.node_name in node or n.host in node]
        unknown = set(node) - {n.node_name for n in nodes} - {n.host for n in nodes}
        if unknown:
            raise UsageError(f"no node named {', '.join(sorted(unknown))}; nodes: {', '.join(n.node_name for n in cfg.nodes)}")
    runner = _runner(cfg, dry_run)
    results = lifecycle.exec_(cfg, runner, shlex.join(command) if len(command) > 1 else command[0], nodes)
    if dry_run:
        _print_commands(runner)
        return
    for r in results:
        for line in r.stdout.splitlines():
            out.print(f"[{r.node}] {line}", markup=False)
        for line in r.stderr.splitlines():
            err.print(f"[{r.node}] {line}", markup=False)
    summary = ", ".join(f"{r.node}={r.returncode}" for r in results)
    err.print(f"exit codes: {summary}", markup=False)
    if any(not r.ok for r in results):
        raise typer.Exit(1)


@app.command()
@handle_errors
def netcheck(
    file: FileArg,
    set_: SetOption = None,
    size_mb: float = typer.Option(64.0, "--size-mb", min=0.001, help="Size of the object moved each way."),
    pings: int = typer.Option(50, min=1, help="Actor round trips per node."),
    json_: bool = typer.Option(False, "--json", help="Print JSON."),
) -> None:
    """Latency and bandwidth between the head and each node, measured by moving objects through Ray."""
    from raytrain.cluster import plan
    from raytrain.errors import ClusterError

    cfg = _load(file, set_)
    result = _runner(cfg).run(cfg.head, plan.netcheck(cfg, size_mb, pings), timeout=600)
    if not result.ok:
        raise ClusterError(f"netcheck failed on the head (is the cluster up?):\n  {result.describe()}")
    rows = json.loads(result.stdout.strip().splitlines()[-1])
    if json_:
        typer.echo(json.dumps(rows, indent=2))
        return
    from rich.table import Table

    names = {n.ip: n.node_name for n in cfg.nodes}
    table = Table(title=f"cluster {cfg.name}: head to each node through Ray ({size_mb:g} MB objects)", title_justify="left")
    for col in ("node", "address", "round trip p50", "max", "head -> node", "node -> head"):
        table.add_column(col, justify="left" if col in ("node", "address") else "right")
    for r in rows:
        name = names.get(r["node"], "?") + (" (head)" if r["head"] else "")
        table.add_row(name, r["node"], f"{r['rtt_p50_ms']:.2f} ms", f"{r['rtt_max_ms']:.1f} ms",
                      f"{r['head_to_node_mb_s']:,.0f} MB/s", f"{r['node_to_head_mb_s']:,.0f} MB/s")
    out.print(table)
    missing = sorted(set(names) - {r["node"] for r in rows})
    if missing:
        err.print(f"not measured (not alive in the cluster): {', '.join(names[m] for m in missing)}", style="yellow", markup=False)


@app.command()
@handle_errors
def dashboard(file: FileArg, set_: SetOption = None, port: int = typer.Option(8265, help="Local port.")) -> None:
    """Forward the head's dashboard to localhost over SSH (like `ray dashboard`); Ctrl-C to stop."""
    from raytrain.cluster.runner import SSHRunner

    cfg = _load(file, set_)
    if cfg.head.local:
        out.print(f"the dashboard is local: {cfg.dashboard_url}", markup=False)
        return
    err.print(f"dashboard: http://127.0.0.1:{port}  (Ctrl-C to close the tunnel)", markup=False)
    if cfg.auth.mode == "token":
        err.print(f"log in with the token in {_token_file(cfg)}", markup=False)
    d = cfg.head.dashboard
    SSHRunner(cfg.ssh).forward(cfg.head, port, d.tunnel_target, d.port)


def _print_status(cfg: ClusterConfig, st: Status) -> None:
    from rich.table import Table

    table = Table(title=f"cluster {cfg.name} at {st.address}", title_justify="left")
    for col in ("node", "role", "ip", "state", "CPU", "GPU", "python", "ray"):
        table.add_column(col)
    for n in st.nodes:
        res = n["resources"]
        table.add_row(n["name"], n["role"], n["ip"], n["state"], f"{res.get('CPU', '-')}", f"{res.get('GPU', '-')}", str(n.get("python", "")), str(n.get("ray", "")))
    for n in st.extra:
        table.add_row(n.get("hostname") or "?", "(not in file)", n["ip"], "alive" if n["alive"] else "dead", f"{n['resources'].get('CPU', '-')}", "", "", "")
    out.print(table)
    hint = "  (raytrain cluster dashboard FILE to reach it from here)" if cfg.dashboard_tunneled else ""
    out.print(f"dashboard: {st.dashboard_url}{hint}", markup=False)
    if cfg.auth.mode == "token":
        out.print(f"auth: token ({_token_file(cfg)}); drivers: raytrain train/tune --cluster FILE", markup=False)

"""`raytrain config validate` and `config show`: any raytrain file checked as its own command checks it.

It sits above `raytrain.config`: a train file is also checked by RLlib, a sweep by Tune's own checks and a
cluster file by planning `cluster up`, so this module reaches into rllib, tune and cluster; the config
package itself imports none of them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from raytrain.config.kind import KINDS, check_kind, detect_kind, is_rllib_example
from raytrain.errors import ConfigError


@dataclass
class CheckedFile:
    """A file checked the way its own command checks it, before that command would start anything."""

    path: str
    kind: str
    told_by: str
    """Why it is this kind: `--kind`, the sections found, or `no sweep or cluster section`."""
    loaded: Any
    """LoadedConfig (train), LoadedSweep (sweep) or ClusterConfig (cluster)."""
    notices: list[str] = field(default_factory=list)
    checked: str = ""
    """What was checked, e.g. `the base and 8 trial configs`."""
    commands: list[tuple[str, str]] = field(default_factory=list)
    """cluster: (node, command) of every command `cluster up` would run, as its --dry-run prints them."""


def check_file(path: str | Path, overrides: list[str] | None = None, *, kind: str | None = None,
               rllib: bool = True) -> CheckedFile:
    """Check any raytrain file with the checks its command runs; touches no host and leaves nothing written.

    train: the schema and, with `rllib`, RLlib's `PPOConfig.validate()` (as `raytrain train`).
    sweep: the sweep, its base and every trial config at the ends of each searched range, the storage
    path's write probe and, with `rllib`, RLlib's and Tune's own checks (as `raytrain tune`).
    cluster: the schema for starting it (as `cluster up`) and the plan of every command `up` runs, built
    with the dry-run runner (as `cluster up --dry-run`).

    Raises:
        ConfigError: with every problem found; its `kind_hint` (or None) says which kind the file was
            checked as and why, for a file that may be of another kind.
    """
    from raytrain.config.source import read_yaml

    check_kind(kind)
    source = None
    try:
        source = read_yaml(path)
        detected, sections = detect_kind(source)
    except ConfigError:
        if kind is None:
            raise
        detected, sections = kind, []  # unreadable or mixed: the loader of the given kind says why
    hint: str | None
    if kind is None:
        kind = detected
        told_by = f"it has {', '.join(sections)}" if sections else "it has no sweep or cluster section"
        others = " or ".join(f"--kind {k}" for k in KINDS if k != kind)
        hint = f"{path} was checked as a {kind} file ({told_by}); if it is another kind, pass {others}"
    else:
        told_by = "--kind"
        hint = (f"{path} was checked as a {kind} file (--kind), but its sections look like a {detected} file"
                if detected != kind else None)
    try:
        checked = {"train": _check_train, "sweep": _check_sweep, "cluster": _check_cluster, "slurm": _check_slurm}[kind](
            str(path), overrides or [], rllib)
    except ConfigError as exc:
        # An old RLlib file's error names the command that takes it.
        exc.kind_hint = None if source is not None and is_rllib_example(source) else hint
        raise
    checked.told_by = told_by
    return checked


def _check_train(path: str, overrides: list[str], rllib: bool) -> CheckedFile:
    from raytrain.config.load import load_config
    from raytrain.train_run import storage_checked

    loaded = load_config(path, overrides)
    storage_checked(loaded)  # as `train` and `train --dry-run` check it: a file created and removed
    if rllib:
        from raytrain.rllib.translate import check_with_rllib

        loaded.warnings.extend(check_with_rllib(loaded.config, loaded.source, path))
    return CheckedFile(path, "train", "", loaded, loaded.notices + loaded.warnings,
                       "the schema" + (" and RLlib's validation" if rllib else ""))


def _check_sweep(path: str, overrides: list[str], rllib: bool) -> CheckedFile:
    from raytrain.config.sweep_load import load_sweep, sample_values, searched

    # "probe": the same storage check `raytrain tune` and `tune --dry-run` run; it creates and removes one
    # file and leaves nothing behind.
    loaded = load_sweep(path, overrides, storage="probe")
    if rllib:
        from raytrain.tune.build import check, plan

        loaded.warnings.extend(check(loaded, plan(loaded)))
    trials = sum(len(sample_values(dist)) for _, dist in searched(loaded.sweep))
    what = f"the base and {trials} trial config(s)"
    return CheckedFile(path, "sweep", "", loaded, loaded.notices + loaded.warnings,
                       what + (", with RLlib's and Tune's own checks" if rllib else ""))


def _check_cluster(path: str, overrides: list[str], rllib: bool) -> CheckedFile:
    from raytrain.cluster import lifecycle
    from raytrain.cluster.runner import DryRunner
    from raytrain.config.cluster import exposure_warnings, load_cluster

    cfg = load_cluster(path, overrides, starting=True)
    runner = DryRunner(cfg.ssh)  # records the commands; no host is contacted, no token written
    lifecycle.up(cfg, runner)
    notices = [f"warning: {text}" for text in exposure_warnings(cfg)]
    return CheckedFile(path, "cluster", "", cfg, notices,
                       f"the schema and the start plan: {len(cfg.nodes)} node(s), {len(runner.commands)} commands, "
                       "no host contacted", list(runner.commands))


def _check_slurm(path: str, overrides: list[str], rllib: bool) -> CheckedFile:
    from raytrain.config.slurm import load_slurm

    cfg = load_slurm(path, overrides)
    return CheckedFile(path, "slurm", "", cfg, [], f"the schema: {cfg.nodes} node(s), no job submitted")

"""Which kind of raytrain file a YAML file is (train, sweep or cluster), told from its top-level sections."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from raytrain.config.source import Source
from raytrain.errors import ConfigError, ConfigIssue

KINDS = ("train", "sweep", "cluster", "slurm")
"""Every kind of raytrain file: `raytrain train FILE`, `raytrain tune FILE`, `raytrain cluster up FILE`,
`--slurm FILE`."""


def _fields() -> dict[str, set[str]]:
    from raytrain.config.aliases import KEY_ALIASES, SECTION_ALIASES, UNSUPPORTED
    from raytrain.config.cluster import ClusterConfig
    from raytrain.config.schema import RaytrainConfig
    from raytrain.config.slurm import SlurmConfig
    from raytrain.config.sweep import SweepConfig

    return {
        # Old RLlib names may sit at the top level of a flat train config (`num_workers:`, `framework:`, and
        # `env:` for the env id, which a cluster's `env:` must not be told from).
        "train": (set(RaytrainConfig.model_fields) | set(SECTION_ALIASES) | set(KEY_ALIASES) | set(UNSUPPORTED)
                  | {"framework", "env"}),
        "sweep": set(SweepConfig.model_fields),
        "cluster": set(ClusterConfig.model_fields),
        "slurm": set(SlurmConfig.model_fields),
    }


def telling_sections() -> dict[str, list[str]]:
    """For the sweep and cluster kinds, the top-level sections only that kind has (a train file has none of them)."""
    fields = _fields()
    return {
        kind: sorted(fields[kind] - set().union(*(f for k, f in fields.items() if k != kind)))
        for kind in ("sweep", "cluster", "slurm")
    }


def detect_kind(source: Source) -> tuple[str, list[str]]:
    """The kind of a parsed file and the sections that told it.

    A file with any sweep-only section (`base`, `search`, `space`, ...) is a sweep, with any cluster-only
    section (`head`, `workers`, `ssh`, ...) a cluster, and anything else a train config (whose loader then
    names every unknown section). A file with sections of both a sweep and a cluster is refused.
    """
    keys = set(source.data) if isinstance(source.data, dict) else set()
    found = {kind: [s for s in sections if s in keys] for kind, sections in telling_sections().items()}
    hits = {kind: sections for kind, sections in found.items() if sections}
    if len(hits) > 1:
        told = "; ".join(f"{', '.join(s)} ({kind})" for kind, s in hits.items())
        last = list(hits.values())[-1][0]
        raise ConfigError([ConfigIssue(
            source.where((last,)) or source.file, last,
            f"cannot tell which kind of raytrain file this is: it has sections of more than one kind: {told}. "
            "Split it into one file per kind, or pass --kind train|sweep|cluster",
        )])
    if hits:
        kind, sections = next(iter(hits.items()))
        return kind, sections
    return "train", []


def check_kind(kind: str | None) -> None:
    """Refuse a `--kind` that is not one of KINDS (exit 2)."""
    from raytrain.errors import UsageError

    if kind is not None and kind not in KINDS:
        raise UsageError(f"--kind {kind!r}: choose {', '.join(KINDS[:-1])} or {KINDS[-1]}")


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
    try:
        detected, sections = detect_kind(read_yaml(path))
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
        exc.kind_hint = hint
        raise
    checked.told_by = told_by
    return checked


def _check_train(path: str, overrides: list[str], rllib: bool) -> CheckedFile:
    from raytrain.config.load import load_config

    loaded = load_config(path, overrides)
    if rllib:
        from raytrain.rllib.translate import build_ppo_config

        try:
            build_ppo_config(loaded.config).validate()
        except Exception as exc:  # RLlib raises ValueError and friends
            raise ConfigError([ConfigIssue(path, "", f"RLlib rejects the config: {exc}")]) from None
    return CheckedFile(path, "train", "", loaded, loaded.notices + loaded.warnings,
                       "the schema" + (" and RLlib's validation" if rllib else ""))


def _check_sweep(path: str, overrides: list[str], rllib: bool) -> CheckedFile:
    from raytrain.config.sweep_load import load_sweep, sample_values, searched

    # "probe": the same storage check `raytrain tune` and `tune --dry-run` run; it creates and removes one
    # file and leaves nothing behind.
    loaded = load_sweep(path, overrides, storage="probe")
    if rllib:
        from raytrain.tune.build import check, plan

        check(loaded, plan(loaded))
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

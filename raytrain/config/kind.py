"""Which kind of raytrain file a YAML file is (train, sweep or cluster), told from its top-level sections."""

from __future__ import annotations

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

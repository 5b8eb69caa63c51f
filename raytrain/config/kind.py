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


def _train_only() -> set[str]:
    """The top-level sections only a train config has (`environment`, `training`, old RLlib names, ...)."""
    fields = _fields()
    return fields["train"] - set().union(*(f for k, f in fields.items() if k != "train"))


def detect_kind(source: Source) -> tuple[str, list[str]]:
    """The kind of a parsed file and the sections that told it.

    A file with any sweep-only section (`base`, `search`, `space`, ...) is a sweep, with any cluster-only
    section (`head`, `workers`, `ssh`, ...) a cluster, and anything else a train config (whose loader then
    names every unknown section). A file with sections of two kinds (a sweep's and a cluster's, or a train
    config's own `environment:` beside a sweep's `checkpoint:`) is refused: ConfigError at the last of them.
    """
    keys = list(source.data) if isinstance(source.data, dict) else []
    found = {kind: [s for s in sections if s in keys] for kind, sections in telling_sections().items()}
    hits = {kind: sections for kind, sections in found.items() if sections}
    # A train config's own sections beside them: a stray setting of a train config (`checkpoint:`, `workers:`)
    # or a stray section of another file, not a file of that kind; its loader places the stray key.
    own = _train_only()
    train_only = [k for k in keys if k in own]
    if hits and train_only:
        hits = {"train": train_only, **hits}
    if len(hits) > 1:
        told = "; ".join(f"{', '.join(s)} ({kind})" for kind, s in hits.items())
        last = list(hits.values())[-1][0]
        raise ConfigError([ConfigIssue(
            source.where((last,)) or source.file, last,
            f"cannot tell which kind of raytrain file this is: it has sections of more than one kind: {told}. "
            f"Split it into one file per kind, or pass --kind {', '.join(KINDS[:-1])} or {KINDS[-1]}",
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


_TAKEN_BY = {
    "train": "train it with `raytrain train {file}`",
    "sweep": "run it with `raytrain tune {file}`",
    "cluster": "start it with `raytrain cluster up {file}`, or give it as `--cluster {file}`",
    "slurm": "give it as `--slurm {file}` to `raytrain tune` or `raytrain train`",
}
KIND_NAMES = {"train": "a train config", "sweep": "a sweep file", "cluster": "a cluster file", "slurm": "a Slurm file"}


def taken_by(kind: str, file: str | None) -> str:
    """The command that takes a file of `kind`: `train it with raytrain train FILE`."""
    return _TAKEN_BY[kind].format(file=file or "the file")


def raytrain_kind(source: Source) -> str | None:
    """The kind of a raytrain file (a train config, a sweep, a cluster or a Slurm file), told by its sections; None
    for a file that has none of them at its top level (RLlib's tuned examples: `NAME: {env, run, config}`)."""
    data = source.data
    if not isinstance(data, dict) or not set(data) & set().union(*telling_sections().values(), _train_only()):
        return None
    try:
        return detect_kind(source)[0]
    except ConfigError:
        return None


def other_kind(source: Source, expected: str) -> tuple[str, str] | None:
    """(kind, "a sweep file (it has base, search)") for a file whose sections say it is not of kind `expected`;
    None for a file of that kind, or one whose kind cannot be told."""
    try:
        kind, sections = detect_kind(source)
    except ConfigError:
        return None
    if kind == expected:
        return None
    told = f"it has {', '.join(sections)}" if sections else "it has no section of a sweep, cluster or Slurm file"
    return kind, f"{KIND_NAMES[kind]} ({told})"


def is_rllib_example(source: Source) -> bool:
    """Whether a file is in RLlib's former tuned-example format (`NAME: {env:, run:, config:}`), which
    `raytrain config import-rllib` converts: experiments only, none of them a section of any raytrain file."""
    data = source.data
    if not isinstance(data, dict) or not data or is_rllib_experiment(data):
        return False
    known = set().union(*_fields().values())
    return all(isinstance(v, dict) and k not in known and ("run" in v or "config" in v) for k, v in data.items())


def is_rllib_experiment(data: object) -> bool:
    """Whether `data` is one experiment of that format written with no name above it (`env:, run:, config:` at the
    top level, as `tune.run(**spec)` takes it): a `run:` name or a `config:` mapping, and no raytrain section."""
    if not isinstance(data, dict) or not (isinstance(data.get("run"), str) or isinstance(data.get("config"), dict)):
        return False
    raytrain_keys = set().union(*_fields().values()) - {"stop", "env"}
    return not set(data) & raytrain_keys


def wrong_kind(source: Source, expected: str) -> ConfigError | None:
    """For a file that failed the checks of `expected`'s loader: the one error that says it is a file of another
    kind and which command takes it (instead of an `unknown section` error per section), or None."""
    convert = f"convert it with `raytrain config import-rllib {source.file or 'FILE'} -o NEW.yaml`"
    if is_rllib_example(source):
        return ConfigError([ConfigIssue(
            source.file, "", f"RLlib's former tuned-example format (NAME: {{env, run, config}}), not a raytrain file: {convert}")])
    if is_rllib_experiment(source.data):
        return ConfigError([ConfigIssue(
            source.file, "", f"an RLlib experiment (env, run, config at the top level), not a raytrain file: {convert}")])
    found = other_kind(source, expected)
    if found is None:
        return None
    kind, what = found
    return ConfigError([ConfigIssue(source.file, "", f"{what}, not {KIND_NAMES[expected]}: {taken_by(kind, source.file)}")])

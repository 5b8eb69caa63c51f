"""Load and check a sweep file before anything starts: every invalid combination is an error with its reason."""

from __future__ import annotations

import copy
import difflib
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from raytrain.config.kind import other_kind, wrong_kind
from raytrain.config.load import ENV_CONFIG, LoadedConfig, as_space, flow_yaml, load_source, pydantic_issues
from raytrain.config.schema import SECTIONS, section_keys, whole_numbers_only
from raytrain.config.source import Source, apply_overrides, did_you_mean, read_yaml
from raytrain.config.sweep import SweepConfig
from raytrain.errors import ConfigError, ConfigIssue, config_warning
from raytrain.metrics import known_metrics
from raytrain.paths import path_problem
from raytrain.sweeps import ALGORITHMS, settings_in, trial_overrides
from raytrain.sweeps.base import Issue, KeyPath
from raytrain.sweeps.space import Choice, Grid, LogUniform, QUniform, RandInt, Uniform

# Sections whose keys can be searched over; environment.env_config.<key> and experiment.seed too.
SEARCHABLE_SECTIONS = ("training", "model", "env_runners", "learners", "resources", "evaluation")


@dataclass
class LoadedSweep:
    sweep: SweepConfig
    base: LoadedConfig
    """The base train config with `set:` applied and the sweep's stop criteria."""
    source: Source
    notices: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    made: list[Path] = field(default_factory=list)
    """The folders `take_free_name(hold=True)` made, outermost first (`unmake` removes them while empty)."""

    @property
    def metric(self) -> str:
        return self.sweep.search.metric or self.base.config.return_metric

    @property
    def name(self) -> str:
        return self.sweep.name or f"{self.base.config.experiment.name}_{self.sweep.search.algorithm}"

    @property
    def experiment_dir(self) -> Path:
        return Path(self.sweep.checkpoint.storage_path) / self.name

    def name_issues(self) -> list[ConfigIssue]:
        """The experiment name is one path component and its folder stays under checkpoint.storage_path.

        The schema refuses such names already; this is the check at the place the folder is made, which
        also covers a default name built from the base config and a `storage_path/<name>` that is a
        symlink leading out.
        """
        from raytrain.paths import inside

        if self.sweep.name is not None:
            where, key = self.source.where(("name",)), "name"
        else:
            where, key = self.base.source.where(("experiment", "name")), "experiment.name"
        problem = check_name(self.name)
        if problem is None and not inside(self.sweep.checkpoint.storage_path, self.experiment_dir):
            problem = (
                f"the experiment folder {self.experiment_dir} leads outside checkpoint.storage_path "
                f"{self.sweep.checkpoint.storage_path} (it resolves to {self.experiment_dir.resolve()})"
            )
        return [ConfigIssue(where, key, problem)] if problem else []

    def take_free_name(self, hold: bool = False) -> str | None:
        """If the experiment folder already holds an experiment, move this sweep to `<name>_2`, `_3`, ...

        With `hold` (a sweep about to start here), the folder chosen is made and held for this process
        (`hold_folder`), and one another process holds is taken too: of two sweeps of one name started together,
        the second found the name still free, started Ray, and failed (exit 1) once the first had written its state.

        Returns a notice when the name changed. Nothing in the existing folder is touched.
        """
        from raytrain.paths import hold_folder

        def used(path: Path) -> bool:
            if path.exists() and any(path.iterdir()):
                return True
            if not hold:
                return False
            if path.is_symlink():  # not made here (name_issues says where such a link leads)
                return True
            missing = [p for p in (path, *path.parents) if not p.exists()]
            path.mkdir(parents=True, exist_ok=True)
            self.made += reversed(missing)
            return not hold_folder(path) or any(path.iterdir())

        if not used(self.experiment_dir):
            return None
        old, base = self.experiment_dir, self.name
        i = 2
        while used(Path(self.sweep.checkpoint.storage_path) / f"{base}_{i}"):
            i += 1
        self.sweep.name = f"{base}_{i}"
        if issues := self.name_issues():  # `<name>_<i>` may be a symlink that leads out
            raise ConfigError(issues)
        there = _experiment_there(old) if any(old.iterdir()) else "a sweep another raytrain process is starting now"
        return f"notice: {old} already holds {there}; this sweep goes to {self.experiment_dir}"

    def unmake(self) -> None:
        """Remove the folders `take_free_name(hold=True)` made that are still empty: a sweep that fails before it
        writes anything (a joined cluster too small for its trials: exit 2) leaves nothing behind."""
        for path in reversed(self.made):
            try:
                path.rmdir()
            except OSError:
                break  # not empty (or gone): what is above it stays too
        self.made.clear()

    def import_paths(self) -> list[str]:
        """The user's code the sweep names by import path: the env's class and PBT's explore function."""
        from raytrain.imports import user_paths

        pbt = self.sweep.pbt
        return user_paths(self.base.config.environment.env, pbt.custom_explore_fn if pbt else None)

    def hyperparameters(self) -> list[str]:
        """Every dotted key the sweep varies."""
        return searched_keys(self.sweep)


def _dropped_by_the_search(sweep: SweepConfig, key: str, value: Any, source: Source,
                           drawn: dict[str, Any]) -> str | None:
    """Why a `set:` value that is not under `space:` is still replaced in every trial (an algorithm's own search of
    it, a seed drawn per trial), or None. It was dropped without a word. `drawn`: `trial_overrides(sweep)`."""
    from raytrain.sweeps import DRAWN_SEED

    if key not in drawn:
        return None
    for settings in settings_in(sweep):
        for key_path, _ in settings.searched():
            if key_path[-1] == key:
                return (f"is also varied under {'.'.join(key_path[:-1])} ({source.where(key_path)}): every trial "
                        "starts from a value drawn there and drops this one; keep one of them")
    assert key == DRAWN_SEED
    return ("every trial draws its own seed (from search.seed: trials with the same hyperparameters would otherwise "
            "be copies of each other), and this one would be dropped: remove it (search.seed makes the seeds "
            f"reproducible), or give every trial this seed with space: {{{DRAWN_SEED}: {{distribution: choice, values: "
            f"[{value}]}}}}")


def _searched_within(key: str, value: Any, space: Collection[str]) -> list[str]:
    """The searched keys that a `set:` entry writes: the key itself, or the keys its mapping holds
    (`environment.env_config: {size: 5}` writes `environment.env_config.size`)."""
    found = []
    for searched in space:
        if searched == key:
            found.append(searched)
        elif searched.startswith(key + ".") and isinstance(value, dict):
            node: Any = value
            for part in searched[len(key) + 1:].split("."):
                node = node.get(part, _ABSENT) if isinstance(node, dict) else _ABSENT
            if node is not _ABSENT:
                found.append(searched)
    return found


_ABSENT = object()


def _flatten(data: dict[str, Any]) -> dict[str, Any]:
    """`set:` entries as dotted keys: `{training: {lr: 1}}` and `{training.lr: 1}` mean the same."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        if "." not in key and isinstance(value, dict) and key in SECTIONS:
            out.update({f"{key}.{k}": v for k, v in value.items()})
        else:
            out[key] = value
    return out


# The base config's `experiment` keys that a sweep does not use, and the sweep's own key that does it.
SWEEP_OWNS = {
    "experiment.name": "name",
    "experiment.storage_path": "checkpoint.storage_path",
    "experiment.checkpoint_frequency": "checkpoint.frequency",
    "experiment.num_to_keep": "checkpoint.num_to_keep",
    "experiment.checkpoint_at_end": "checkpoint.at_end",
}


def sweep_owns(key: str) -> str | None:
    if key in SWEEP_OWNS:
        return f"is not used by a sweep (its experiment folder and checkpoints are its own): write {SWEEP_OWNS[key]} in the sweep file"
    return None


def check_key(key: str) -> str | None:
    """None if `key` names a searchable raytrain field, else what is wrong with it."""
    parts = key.split(".")
    if key == "experiment.seed" or (parts[:2] == ["environment", "env_config"] and len(parts) > 2):
        return None
    if parts[0] == "stop":
        return ("is not a trial setting: a trial stops on the sweep's own top-level `stop:` "
                f"(`stop: {{{key.partition('.')[2] or 'training_iteration'}: ...}}`), the base config's when it has none")
    if parts[0] == "experiment":
        return sweep_owns(key) or "is not searchable: of `experiment`, a sweep varies only experiment.seed"
    if key == "environment.env":
        return "is not a trial setting: a sweep trains the base config's env (vary environment.env_config.<key>)"
    if len(parts) == 1 and (owner := next((s for s in SEARCHABLE_SECTIONS if key in section_keys(s)), None)):
        return f"is not a searchable key; did you mean '{owner}.{key}'?"
    if len(parts) != 2 or parts[0] not in SEARCHABLE_SECTIONS:
        return (
            "is not a searchable key: use a dotted `section.key` with section one of "
            f"{', '.join(SEARCHABLE_SECTIONS)} (or environment.env_config.<key>, experiment.seed)"
        )
    names = section_keys(parts[0])
    if parts[1] not in names:
        from raytrain.config.aliases import KEY_ALIASES, describe

        if parts[1] in KEY_ALIASES:
            section, new, _ = KEY_ALIASES[parts[1]]
            return f"is {describe(parts[1])}; search over {section}.{new} instead"
        near = difflib.get_close_matches(parts[1], names, n=1, cutoff=0.6)
        return "is not a key of the train config" + (f"; did you mean '{parts[0]}.{near[0]}'?" if near else "")
    return None


def sample_values(dist: Any) -> list[Any]:
    """Values to try a trial config with: the bounds, or every listed value."""
    if isinstance(dist, list):
        return dist
    if isinstance(dist, (Choice, Grid)):
        return dist.values
    if isinstance(dist, RandInt):
        return [dist.low, dist.high - 1]
    return [dist.low, dist.high]


def searched(sweep: SweepConfig, *, domains_only: bool = False) -> list[tuple[KeyPath, Any]]:
    """(path in the sweep file, distribution) of every hyperparameter the sweep samples or perturbs.

    domains_only: only those that are Tune search domains (not PB2's bounds).
    """
    spaces: list[tuple[KeyPath, Any]] = [(("space", k), d) for k, d in sweep.space.items()]
    for settings in settings_in(sweep):
        if settings.tune_domains or not domains_only:
            spaces += settings.searched()
    return spaces


def searched_keys(sweep: SweepConfig) -> list[str]:
    """The dotted key of every hyperparameter the sweep samples or perturbs, each once."""
    return list(dict.fromkeys(path[-1] for path, _ in searched(sweep)))


def trial_source(base: Source, overrides: dict[str, Any], where: str | None = None) -> Source:
    """A copy of the base Source with dotted overrides applied (the config one trial runs)."""
    src = Source(copy.deepcopy(base.data), dict(base.origins), base.file, dict(base.written))
    for key, value in overrides.items():
        node = src.data
        parts = key.split(".")
        for p in [p for p in src.written if p[: len(parts)] == tuple(parts)]:
            del src.written[p]  # the value is the sweep's now
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = value
        if where:
            src.origins[tuple(parts)] = where
    return src


def _check_storage(path: str) -> str | None:
    """None when files can be written in `path` (or in where it will be created); writes nothing lasting.

    The same probe for `--dry-run` and the real run (create and delete a file): `os.access` says yes to
    root where every write then fails (`/proc/x`).
    """
    from raytrain.paths import probe_writable

    problem = probe_writable(path)
    return f"{problem}; choose a directory you can write to" if problem else None


def check_name(name: str) -> str | None:
    """None when `name` is one path component (the experiment folder directly under the storage path)."""
    if name in ("", ".", "..") or "/" in name or "\0" in name:
        return (
            f"{name!r} is not a folder name: the experiment folder is checkpoint.storage_path/<name>, so the "
            "name must be one path component (no '/', not '.' or '..')"
        )
    return None


DOTTED_KEY_MAPPINGS = (("set",), ("space",), ("pbt", "hyperparam_mutations"), ("pb2", "hyperparam_bounds"))
"""The sweep file's mappings keyed by a train config's dotted paths (`space: {training.lr: ...}`): `--set
space.training.lr.high=...` reaches into their entries."""


def load_sweep(path: str | Path, overrides: list[str] | None = None, *, storage: str = "probe") -> LoadedSweep:
    """Read and check a sweep file (and its base train config). Raises ConfigError with every problem.

    Writes nothing: the experiment folder is created by the run, once every check has passed.
    storage: "probe" checks that checkpoint.storage_path is writable, with the probe the run's own writes
    would pass (`--dry-run` and the real run alike); "skip" leaves it to the machine that runs the sweep
    (--submit: the head).
    """
    return load_sweep_source(read_yaml(path), path, overrides, storage=storage)


def load_sweep_source(source: Source, path: str | Path, overrides: list[str] | None = None, *,
                      storage: str = "probe") -> LoadedSweep:
    """`load_sweep` of a sweep file already read (or made: `config import-rllib`) into `source`; a `base:` is
    relative to `path`."""
    if storage not in ("probe", "skip"):
        raise ValueError(f"storage must be 'probe' or 'skip', not {storage!r}")
    notices = apply_overrides(source, overrides or [], DOTTED_KEY_MAPPINGS)
    try:
        sweep = SweepConfig.model_validate(source.data)
    except ValidationError as exc:
        raise wrong_kind(source, "sweep") or ConfigError(pydantic_issues(exc, source, SweepConfig)) from None
    issues: list[ConfigIssue] = []
    warnings: list[str] = []
    taken: dict[KeyPath, str] = {}  # the sweep's settings taken from the base config, and their key there

    def issue(key_path: KeyPath, message: str) -> None:
        issues.append(ConfigIssue(source.where(key_path), taken.get(key_path, ".".join(key_path)), message))

    try:
        base = _load_base(path, sweep, source, issue)
    except ConfigError as exc:
        raise ConfigError(issues + exc.issues) from None
    notices += base.notices + _seed_replaced(sweep, base)
    warnings += base.warnings
    taken.update(_take_checkpoint_settings(sweep, source, base))
    _check_algorithm(sweep, issue, warnings.append)
    _check_hyperparameters(sweep, source, base.source, issue, warnings.append)
    known = known_metrics(base.config.experiment.return_window, base.config.evaluation.evaluation_interval is not None)
    _check_metric(sweep.search.metric or base.config.return_metric, known, issue)
    if (backwards := _ranked_backwards(sweep, source, sweep.search.metric or base.config.return_metric)) is not None:
        warnings.append(backwards)
    for settings in settings_in(sweep):
        settings.check(sweep, known, issue)
    if not base.config.stop and sweep.time_budget_s is None and not _asha_ends_trials(sweep):
        warnings.append("warning: no stop criteria (stop:, here or in the base config) and no time_budget_s: every "
                        "trial trains until Ctrl-C; add e.g. `stop: {training_iteration: 100}` to the sweep file")
    if (late := _perturbed_too_late(sweep, base.config.stop)) is not None:
        warnings.append(late)
    warnings += _starts_outside_bounds(sweep, source)
    if sweep.checkpoint.frequency == 0 and not sweep.checkpoint.at_end:
        warnings.append(config_warning(source.where(("checkpoint", "at_end")), "checkpoint.at_end", (
            "false with checkpoint.frequency 0: the trials write no checkpoint at all, so the leaderboard names none, "
            "eval has nothing to evaluate and tune resume starts stopped trials over; set at_end: true (the default) "
            "or a frequency")))
    loaded = LoadedSweep(sweep, base, source, notices, warnings)
    if path_problem(sweep.checkpoint.storage_path) is None:  # else said of the storage path; name_issues follows links
        issues += loaded.name_issues()
    _check_storage_path(sweep.checkpoint.storage_path, storage == "probe", issue)
    if issues:
        raise ConfigError(issues)
    return loaded


def _seed_replaced(sweep: SweepConfig, base: LoadedConfig) -> list[str]:
    """A notice when the base config's own `experiment.seed` is replaced by the seed each trial draws (a `set:` of it is
    refused): `config validate` said ok, and the seed written was not used."""
    from raytrain.sweeps import DRAWN_SEED

    if ("experiment", "seed") not in base.source.origins or base.config.experiment.seed is None or DRAWN_SEED in sweep.space \
            or DRAWN_SEED not in trial_overrides(sweep):
        return []
    seed = base.config.experiment.seed
    drawn = (f"each trial draws its own seed from search.seed ({sweep.search.seed})" if sweep.search.seed is not None
             else "each trial draws its own seed, and search.seed is unset: set search.seed: N to draw the same seeds "
                  "each time")
    where = base.source.where(("experiment", "seed"))
    return [f"notice: {where}: experiment.seed: {seed} is not used by the sweep's trials: {drawn} (to give every trial "
            f"this seed: space: {{{DRAWN_SEED}: {{distribution: choice, values: [{seed}]}}}})"]


def _drawn_range(distribution: Any) -> tuple[float, float] | None:
    """The least and the most a `space:` distribution draws, or None when it draws something else than numbers."""
    if isinstance(distribution, Choice | Grid):
        numbers = [v for v in distribution.values if isinstance(v, int | float) and not isinstance(v, bool)]
        return (min(numbers), max(numbers)) if numbers and len(numbers) == len(distribution.values) else None
    if isinstance(distribution, RandInt):
        return distribution.low, distribution.high - 1  # high excluded
    return distribution.low, distribution.high


def _starts_outside_bounds(sweep: SweepConfig, source: Source) -> list[str]:
    """A warning for each PB2 bound whose key `space:` also searches beyond it: `space:` gives the trials' starts,
    and PB2 explores (within the bounds) only its bottom trials, so a top trial kept its value outside them."""
    if sweep.search.algorithm != "pb2" or sweep.pb2 is None:
        return []
    said = []
    for key, (low, high) in sweep.pb2.hyperparam_bounds.items():
        if key not in sweep.space or (drawn := _drawn_range(sweep.space[key])) is None:
            continue
        if drawn[0] < low or drawn[1] > high:
            at = source.where(("pb2", "hyperparam_bounds", key))
            said.append(config_warning(source.where(("space", key)), f"space.{key}", (
                f"draws trials' starts from [{drawn[0]:g}, {drawn[1]:g}], outside pb2.hyperparam_bounds [{low:g}, "
                f"{high:g}] ({at}): PB2 explores only its bottom trials, so a top trial keeps such a value to the end; "
                f"draw within the bounds, or leave {key} out of space: (PB2 then draws each start within them)")))
    return said


def _perturbed_too_late(sweep: SweepConfig, stop: dict[str, float]) -> str | None:
    """A warning when every trial of a PBT or PB2 sweep ends before its first perturbation, else None."""
    from raytrain.sweeps.pb2 import PB2Config
    from raytrain.sweeps.pbt import PBTConfig

    defaults = {"pbt": PBTConfig, "pb2": PB2Config}
    algorithm = sweep.search.algorithm
    if algorithm not in defaults:
        return None
    settings = getattr(sweep, algorithm) or defaults[algorithm]()
    last = stop.get(settings.time_attr) if settings.time_attr == "training_iteration" else None
    if last is None or settings.perturbation_interval < last:
        return None
    return (f"warning: {algorithm}.perturbation_interval ({settings.perturbation_interval:g}) is not below "
            f"stop.training_iteration ({last:g}): every trial ends before {algorithm.upper()}'s first exploit, so the "
            "sweep is a random search; lower the interval")


def _asha_ends_trials(sweep: SweepConfig) -> bool:
    """Whether ASHA schedules the sweep: it ends every trial at its max_t."""
    return sweep.search.algorithm == "asha" or (
        sweep.search.algorithm == "optuna" and sweep.optuna is not None and sweep.optuna.pruner == "asha")


def _load_base(path: str | Path, sweep: SweepConfig, source: Source, issue: Issue) -> LoadedConfig:
    """The base train config, with `set:` and the sweep's stop applied; raises ConfigError when it is invalid."""
    if sweep.base is not None:
        given = Path(sweep.base).expanduser()  # ~/configs/base.yaml, as storage paths take it
        base_path = (Path(path).parent / given).resolve()
        if base_path.is_dir():
            raise ConfigError([ConfigIssue(source.where(("base",)), "base",
                                           f"{base_path} is a folder: give the train config's file in it")])
        if not base_path.is_file():
            raise ConfigError([ConfigIssue(source.where(("base",)), "base",
                                           f"no such file: {base_path}{did_you_mean(base_path)}")])
        base_source = read_yaml(base_path)
        if found := other_kind(base_source, "train"):
            # Not a train config with mistakes: every one of its sections would be "unknown".
            kind, what = found
            own = base_source.data.get("base") if kind == "sweep" else None
            raise ConfigError([ConfigIssue(
                source.where(("base",)), "base",
                f"{base_path} is {what}, not a train config: give the train config (the file `raytrain train` "
                "takes) that every trial starts from" + (f"; that sweep's own base is {own}" if isinstance(own, str) else ""),
            )])
        shown = str(given) if given.is_absolute() else str(Path(path).parent / sweep.base)
        base_source.file = shown
        base_source.origins = {k: v.replace(str(base_path), shown) for k, v in base_source.origins.items()}
    else:
        base_source = Source(
            copy.deepcopy(sweep.train or {}),
            {p[1:]: w for p, w in source.origins.items() if p[:1] == ("train",) and len(p) > 1},
            str(path),
            {p[1:]: w for p, w in source.written.items() if p[:1] == ("train",) and len(p) > 1},
        )
    fixed = _flatten(sweep.set)
    drawn = trial_overrides(sweep) if fixed else {}
    for key in list(fixed):
        problem = check_key(key) if not key.startswith(("experiment.", "environment.")) else sweep_owns(key)
        if problem:
            issue(("set", key), problem)
            del fixed[key]  # said once: not again as an unknown section of the base config
        elif (space := as_space(fixed[key])) is not None and check_key(key) is None and not key.startswith(ENV_CONFIG):
            # a train config is told to write it in a sweep file: this file is that sweep (an env_config value may be
            # a mapping: warned of by load_source)
            issue(("set", key), f"is a search, and set: gives every trial one value: move it to space: "
                                f"{flow_yaml({key: space})}")
            del fixed[key]
        elif searched := _searched_within(key, fixed[key], sweep.space):
            # every trial takes the searched value: the set one would be dropped unsaid
            for inner in searched:
                below = tuple(inner[len(key) + 1:].split(".")) if inner != key else ()
                # the line of the searched key in the set mapping: written nested (`environment: {env_config: ...}`)
                # or under the dotted key
                nested = ("set", *inner.split("."))
                issue(nested if nested in source.origins else ("set", key, *below),
                      f"is also searched under space: ({source.where(('space', inner))}): every trial would take the "
                      "searched value and drop this one; keep one of them")
            del fixed[key]
        elif (dropped := _dropped_by_the_search(sweep, key, fixed[key], source, drawn)) is not None:
            issue(("set", key), dropped)
            del fixed[key]
    base_source = trial_source(base_source, fixed, None)
    for key in fixed:
        # A dotted key is one YAML key (`training.gamma: ...`); a nested one, a path (`training: {gamma: ...}`).
        where = source.origins.get(("set", key)) or source.where(("set", *key.split(".")))
        if where is not None:
            base_source.origins[tuple(key.split("."))] = where
        if (written := source.written.get(("set", key)) or source.written.get(("set", *key.split(".")))) is not None:
            base_source.written[tuple(key.split("."))] = written
    if sweep.stop:
        base_source.data["stop"] = dict(sweep.stop)
        for key in sweep.stop:
            if (where := source.where(("stop", key))) is not None:
                base_source.origins[("stop", key)] = where
            if (written := source.written.get(("stop", key))) is not None:
                base_source.written[("stop", key)] = written
    return load_source(base_source, searched=searched_keys(sweep))


def _take_checkpoint_settings(sweep: SweepConfig, source: Source, base: LoadedConfig) -> dict[KeyPath, str]:
    """The base config's experiment.storage_path and checkpoint settings that it writes and the sweep's
    `checkpoint:` does not: the sweep takes them, so a base config that names the lab's shared folder keeps
    the sweep's checkpoints there too. Their origins become the base config's lines.

    Returns {the sweep's key path: the base config's dotted key} of each setting taken.
    """
    written = base.config.experiment.model_fields_set
    taken: dict[KeyPath, str] = {}
    for key, own in SWEEP_OWNS.items():
        name, (section, _, field_name) = key.partition(".")[2], own.partition(".")
        if section != "checkpoint" or name not in written or field_name in sweep.checkpoint.model_fields_set:
            continue
        setattr(sweep.checkpoint, field_name, getattr(base.config.experiment, name))  # the same bounds as there
        if (where := base.source.where(("experiment", name))) is not None:
            source.origins[(section, field_name)] = where
        taken[(section, field_name)] = key
    return taken


def _check_algorithm(sweep: SweepConfig, issue: Issue, warn: Callable[[str], None]) -> None:
    """The settings sections belong to the chosen algorithm, and the algorithm's own checks."""
    algorithm = ALGORITHMS[sweep.search.algorithm]
    for settings in settings_in(sweep):
        if settings.key not in algorithm.sections:
            issue((settings.key,), algorithm.misplaced(settings.key))
    algorithm.check(sweep, issue, warn)


def _check_hyperparameters(sweep: SweepConfig, source: Source, base: Source, issue: Issue,
                           warn: Callable[[str], None]) -> None:
    """Every hyperparameter names a real key, and every value gives a valid trial config; a warning for one that no
    trial's config reads (its switch is off and not searched)."""
    from raytrain.config.load import idle_settings

    keys = searched_keys(sweep)
    for key_path, dist in searched(sweep):
        key = key_path[-1]
        problem = check_key(key) or _fractions_for_whole_numbers(key, dist)
        if problem:
            issue(key_path, problem)
            continue
        idle: str | None = None
        for value in sample_values(dist):
            try:
                trial = load_source(trial_source(base, {key: value}, source.where(key_path)))
            except ConfigError as exc:
                issue(key_path, f"with {key} = {value!r} a trial's config is invalid: {exc.issues[0].message}")
                break
            idle = idle_settings(trial.config, keys).get(tuple(key.split(".")))  # type: ignore[arg-type]
        else:
            if idle is not None:
                warn(config_warning(source.where(key_path), ".".join(key_path),
                                    f"is searched, and no trial reads it: it {idle}; the sweep would rank noise"))


def _fractions_for_whole_numbers(key: str, dist: Any) -> str | None:
    """What is wrong with a distribution that draws fractions for a setting that takes whole numbers, else None.

    Its bounds are valid trial values, so the trial configs tried at them pass; the values between them were
    refused only by the first trial, after Ray started (`Input should be a valid integer`), with no line.
    """
    import math

    fractions = isinstance(dist, Uniform | LogUniform) or (
        isinstance(dist, QUniform) and (dist.q % 1 or dist.low % 1))
    if not fractions or not whole_numbers_only(key):
        return None
    how = f"quniform with q {dist.q:g}" if isinstance(dist, QUniform) else dist.distribution
    return (f"takes a whole number, and {how} draws fractions: use {{distribution: randint, low: {math.ceil(dist.low)}, "
            f"high: {math.floor(dist.high) + 1}}} (high excluded)")


def _ranked_backwards(sweep: SweepConfig, source: Source, metric: str) -> str | None:
    """A warning when the sweep ranks its trials the wrong way round: a return lowest first, a loss highest first."""
    mode = sweep.search.mode
    better = "higher" if "episode_return" in metric or "episode_reward" in metric else (
        "lower" if metric.endswith("loss") or "_loss" in metric else None)
    if better is None or (mode == "max") == (better == "higher"):
        return None
    written = "mode" in (source.data.get("search") or {})
    what = "a return" if better == "higher" else "a loss"
    return config_warning(
        source.where(("search", "mode")), "search.mode",
        f"{mode}{'' if written else ' (the default)'} ranks the trial with the {'lowest' if mode == 'min' else 'highest'} "
        f"{metric} best, and {what} is better {better}: the leaderboard, best.yaml and PBT's exploits would favour "
        f"the worst trial; use mode: {'max' if better == 'higher' else 'min'}"
        + (" (or leave it out)" if better == "higher" else ""))


def _check_metric(metric: str, known: set[str], issue: Issue) -> None:
    """Trials are ranked on a metric PPO reports."""
    if metric not in known:
        near = difflib.get_close_matches(metric, sorted(known), n=1, cutoff=0.6)
        issue(("search", "metric"), "is a metric PPO never reports" + (f"; did you mean '{near[0]}'?" if near else ""))


def _check_storage_path(storage_path: str, probe: bool, issue: Issue) -> None:
    if ".." in Path(storage_path).parts:
        # Tune and the OS could read `a/../b` differently (a symlink `a`); the folder must be unambiguous.
        issue(("checkpoint", "storage_path"), f"{storage_path!r} contains '..': write the folder it means")
    problem = _check_storage(storage_path) if probe else None
    if problem:
        issue(("checkpoint", "storage_path"), problem)


def _experiment_there(folder: Path) -> str:
    """What the notice of `take_free_name` says of the experiment in `folder`, and what can be done with it."""
    import json

    from raytrain.tune import state
    from raytrain.tune.results import META_FILE

    try:
        plan = json.loads((folder / META_FILE).read_text()).get("plan")
    except (OSError, ValueError, AttributeError):
        plan = None
    if state.finished(folder, plan) is not None or state.cut_by_the_budget(folder):  # ended, or out of time
        return f"a finished experiment (its leaderboard: `raytrain tune status {folder}`)"
    return f"an experiment (continue it with `raytrain tune resume {folder}`)"

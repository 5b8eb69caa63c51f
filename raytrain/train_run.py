"""`raytrain train` from a config file to a finished run: prepare, plan, start.

    prepared = prepare(file, overrides, resume=..., notify=print)   # every check; nothing written, no Ray
    print(plan(prepared))                                           # what --dry-run shows
    outcome = start(prepared, argv)                                 # Ray, the build, the run folder, the loop

The order is the promise: every check that needs no Ray (config, run folder, checkpoint, writability,
RLlib's own validation) raises in `prepare`, a `UsageError` or `ConfigError` (exit 2); `start` then joins
Ray, builds the Algorithm (and restores it), and only then writes the run folder, so a run that cannot
start leaves nothing behind.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from raytrain.config.schema import RaytrainConfig
from raytrain.config.source import Source
from raytrain.errors import ConfigIssue, config_warning
from raytrain.runs import RunFolder
from raytrain.training import IterationReport, TrainOutcome

if TYPE_CHECKING:
    from raytrain.config.load import LoadedConfig


def _ignore(*args: object) -> None:
    return None


@dataclass(frozen=True)
class PreparedTrain:
    """A checked `raytrain train`: what runs, where it is recorded, what it continues from."""

    cfg: RaytrainConfig
    calls: dict[str, dict[str, Any]]
    """The RLlib builder calls (`rllib_calls`), recorded as rllib_config.json."""
    address: str | None
    """The Ray cluster to join (None: RAY_ADDRESS, else a local Ray)."""
    where: str
    """The run folder as --dry-run shows it (a new run's start time as `STAMP_PLACEHOLDER`)."""
    resumed: RunFolder | None = None
    """The run folder continued (--resume), or None for a new run."""
    checkpoint: Path | None = None
    """The checkpoint the run continues from (with `resumed`)."""
    run_dir: Path | None = None
    """A new run's exact folder (a Slurm job's, named at submit time); None: a new one under storage_path/name."""
    source: Source | None = None
    """Where each config field was written (file:line), for the checks made once Ray is joined."""
    finished: tuple[str, str] | None = None
    """With `resumed`: (stop key, what was reached) when its checkpoint's iteration already met a stop criterion
    (nothing to resume), else None."""


def prepare(
    file: Path | None,
    overrides: list[str],
    *,
    address: str | None = None,
    cluster: Path | None = None,
    resume: Path | None = None,
    run_dir: Path | None = None,
    notify: Callable[[str], None] = _ignore,
) -> PreparedTrain:
    """Check and resolve everything a run needs, without Ray and without writing anything.

    Args:
        file: the train config YAML; with `resume`, optional (the run folder's config.yaml is used).
        overrides: `--set KEY=VALUE` items.
        address: the Ray cluster to join; `cluster`, a cluster YAML, names it instead and sets this
            driver's auth environment (before anything here imports Ray, which reads it on import).
        resume: a run folder to continue from its latest complete checkpoint.
        run_dir: a new run goes into exactly this folder instead of a new one under storage_path/name.
        notify: told each notice and warning line (overrides applied, checkpoints skipped, no stop criteria).

    Raises:
        UsageError: no config and no run folder, not a run folder, no checkpoint, a run folder not writable.
        ConfigError: the config is invalid, its storage path not writable, or RLlib rejects it.
    """
    from raytrain.config.load import load_config, load_source
    from raytrain.config.source import read_yaml
    from raytrain.errors import ConfigError, UsageError
    from raytrain.paths import probe_writable
    from raytrain.ray_session import cluster_address, ray_address
    from raytrain.rllib.translate import rllib_calls
    from raytrain.runs import STAMP_PLACEHOLDER, where_it_imported

    address = cluster_address(address, cluster)
    folder = None
    if resume is not None:
        folder = RunFolder.open(resume)
        busy, warning = folder.trained_now()
        if busy:
            raise UsageError(f"{folder.path} is being trained right now, by {busy}: two runs in one folder overwrite "
                             "each other's checkpoints. Let it end, or stop it (Ctrl-C there, or `kill` it: it saves a "
                             "checkpoint), then resume; nothing was changed")
        if warning:
            notify(warning)
        damaged = folder.damaged()
        if damaged:
            raise UsageError(f"cannot resume {folder.path}: {damaged}; nothing was changed")
        refuse_moving(folder.path, overrides)
        source_name = str(file) if file is not None else str(folder.path / "config.yaml")
        try:
            if file is None:
                loaded = load_source(read_yaml(source_name), overrides)
            else:
                loaded = load_config(file, overrides)
        except ConfigError as exc:
            raise where_it_imported(exc, folder.path) from None
        if file is not None:
            for line in resumed_with_file(folder, loaded):
                notify(line)
        checkpoint = folder.latest_checkpoint(on_skip=notify)
        if checkpoint is None:
            raise UsageError(
                f"{folder.path} has no complete checkpoint to resume from (checkpoints/checkpoint_<n>/ with a "
                "readable raytrain_state.json); start a new run with `raytrain train CONFIG.yaml`"
            )
        problem = probe_writable(folder.path)
        if problem:
            raise UsageError(f"cannot resume in {folder.path}: {problem}")
        if not folder.claim():
            raise UsageError(f"{folder.path} is being trained right now, by another raytrain process of this machine, "
                             "which holds the folder (it started moments ago): two runs in one folder overwrite each "
                             "other's checkpoints. Let it end, or stop it, then resume; nothing was changed")
        where = str(folder.path)
    else:
        if file is None:
            raise UsageError("give a config file (raytrain train CONFIG.yaml) or --resume RUN_DIR")
        source_name = str(file)
        loaded = load_config(file, overrides)
        checkpoint = None
        base = storage_checked(loaded)
        where = str(run_dir) if run_dir is not None else f"{base}/{STAMP_PLACEHOLDER}"
    from raytrain.cluster.lifecycle import storage_warning

    # A new run only: a resumed one stays in its folder.
    outside = None if folder is not None else storage_warning(cluster, loaded.config.experiment.storage_path,
                                                              "experiment.storage_path")
    for line in loaded.notices + loaded.warnings + ([outside] if outside else []):
        notify(line)
    cfg = loaded.config
    calls = rllib_calls(cfg)
    if not cfg.stop:
        notify("warning: no stop criteria: training runs until Ctrl-C")
    if not cfg.experiment.checkpoint_frequency and not cfg.experiment.checkpoint_at_end:
        notify(config_warning(
            loaded.source.where(("experiment", "checkpoint_at_end")), "experiment.checkpoint_at_end",
            "false with experiment.checkpoint_frequency 0: the run writes no checkpoint at all (none along the way, at "
            "its end or on Ctrl-C), so there is nothing to resume or evaluate; set checkpoint_at_end: true (the default) "
            "or a frequency"))
    if cfg.resources.placement_strategy is not None:
        notify(config_warning(
            loaded.source.where(("resources", "placement_strategy")), "resources.placement_strategy",
            f"{cfg.resources.placement_strategy} applies to a sweep's trials only (Tune places each trial's actors "
            "in one placement group with it); `raytrain train` runs RLlib's Algorithm in its own process, where "
            "RLlib places no group, so Ray places its env runners and learners by its default policy"))

    # RLlib's own checks, before Ray starts and before anything is written (importing RLlib takes seconds).
    from raytrain.rllib.translate import check_with_rllib
    from raytrain.training import check_train_cpus

    local = ray_address(address) is None  # a local Ray: its CPUs are known before it starts
    for line in check_with_rllib(cfg, loaded.source, source_name,
                                 network=folder is None or checkpoint is None,  # a resumed run's env made its network
                                 then=(lambda: check_train_cpus(cfg, loaded.source)) if local else None):
        notify(line)
    if folder is not None and checkpoint is not None:
        misfit = _misfit(cfg, loaded.source, checkpoint)
        if misfit is not None:
            raise ConfigError([misfit])
    finished = None
    if folder is not None and checkpoint is not None:
        from raytrain.metrics import met_stop, stop_reached
        from raytrain.runs import MetricsWriter, read_state

        state = read_state(checkpoint)
        iteration = state["iteration"]
        row: dict[str, Any] = next((r for r in reversed(MetricsWriter(folder).rows) if r.get("training_iteration") == iteration), {})
        # What the checkpoint itself records, where metrics.jsonl lacks its row (deleted, or cut short)
        saved = {"training_iteration": iteration, "time_total_s": state.get("time_total_s"),
                 "num_env_steps_sampled_lifetime": state.get("num_env_steps_sampled_lifetime"),
                 cfg.return_metric: state.get(cfg.return_metric)}
        row = {**{k: v for k, v in saved.items() if v is not None}, **row}
        if (key := met_stop(row, cfg.stop)) is not None:
            finished = (key, str(stop_reached(row, cfg.stop)))
    return PreparedTrain(cfg, calls, address, where, folder, checkpoint, None if folder else run_dir, loaded.source, finished)


def storage_checked(loaded: LoadedConfig) -> Path:
    """The experiment folder a new run of `loaded` goes in (storage_path/<name>), once a file was created and removed
    there (or where it will be created): `train`, `--dry-run` and `config validate` check it alike.

    Raises:
        ConfigError: the folder cannot be written (at experiment.storage_path).
    """
    from raytrain.errors import ConfigError
    from raytrain.paths import path_problem, probe_writable
    from raytrain.runs import experiment_dir

    exp, source = loaded.config.experiment, loaded.source
    problem = path_problem(exp.storage_path)
    if problem:  # before experiment_dir, which follows the links
        raise ConfigError([ConfigIssue(source.where(("experiment", "storage_path")), "experiment.storage_path",
                                       f"not writable: {problem}; choose a folder you can write to")])
    base = experiment_dir(exp.storage_path, _name(loaded.config), source.where(("experiment", "name")))
    problem = probe_writable(base)
    if problem:
        raise ConfigError([ConfigIssue(source.where(("experiment", "storage_path")), "experiment.storage_path",
                                       f"{problem}; run folders go to {base}/: choose a folder you can write to")])
    return base


def refuse_moving(run: Path, overrides: list[str]) -> None:
    """A resume's `--set experiment.name=...` or `experiment.storage_path=...` of another value than the run's: the run
    stays in its folder, and the new value, printed as applied, went into its config.yaml, which then named a place
    the run is not in. Its own values pass (a requeued `train --slurm` job resumes with the storage path it set).

    Raises:
        UsageError: such an override, exit 2.
    """
    import yaml

    from raytrain.config.source import parse_override
    from raytrain.errors import UsageError
    from raytrain.paths import same_path

    try:
        recorded = yaml.safe_load(RunFolder(run).read_config_yaml()).get("experiment") or {}
    except (OSError, ValueError, AttributeError, yaml.YAMLError):
        recorded = {}
    for text in overrides:
        path, value = parse_override(text)
        if path == ("experiment",) and isinstance(value, dict):
            given = value
        elif len(path) == 2 and path[0] == "experiment":
            given = {path[1]: value}
        else:
            continue
        keys = [k for k in ("name", "storage_path") if k in given
                and not (given[k] == recorded.get(k) or k == "storage_path" and same_path(given[k], recorded.get(k)))]
        if keys:
            raise UsageError(f"--set {text}: a resumed run stays in its folder, {run}, so experiment.{keys[0]} cannot "
                             "change: to train elsewhere, start a new run (raytrain train CONFIG.yaml), or copy the "
                             "run folder there and resume the copy; nothing was changed")


def resumed_with_file(folder: RunFolder, loaded: LoadedConfig) -> list[str]:
    """A resume given a config file: the run keeps its place, and what the file changes is told.

    The file's `experiment.name` or `storage_path` of another value than the run's is refused, as a `--set` of one is
    (`refuse_moving`): the run stays in its folder, and its config.yaml named the other place. One the file leaves
    out (a name the env gives) takes the run's. Returns a notice for each other setting the file changes from the
    run's config, at the file's line (a `--set` has its own `override:` line).

    Raises:
        ConfigError: the file moves the run.
    """
    from raytrain.config.load import load_source
    from raytrain.config.source import parse_yaml
    from raytrain.errors import ConfigError, ConfigIssue
    from raytrain.paths import same_path

    try:
        recorded = load_source(parse_yaml(folder.read_config_yaml(), str(folder.path / "config.yaml"))).config
    except (ConfigError, OSError, ValueError):
        return []  # an unreadable record: nothing to compare with
    cfg, source = loaded.config, loaded.source
    for key in ("name", "storage_path"):
        had, given = getattr(recorded.experiment, key), getattr(cfg.experiment, key)
        if given == had or key == "storage_path" and same_path(given, had):
            continue
        if ("experiment", key) in source.origins:
            raise ConfigError([ConfigIssue(
                source.where(("experiment", key)), f"experiment.{key}",
                f"a resumed run stays in its folder, {folder.path}, whose experiment.{key} is {had}: write that (or leave "
                "it out), or start a new run (raytrain train FILE); nothing was changed")])
        setattr(cfg.experiment, key, had)
    was, now = _settings(recorded), _settings(cfg)
    notices = []
    for key, value in now.items():
        where = source.origins.get(tuple(key.split(".")))
        if value == was.get(key) or where is None or where.startswith("--set "):
            continue
        before = f"{was[key]} in the run" if key in was else "unset in the run"
        notices.append(f"notice: {where}: {key}: {value} here ({before}): the resumed run trains on with it")
    return notices


def _settings(cfg: RaytrainConfig) -> dict[str, Any]:
    """{section.key: value} of the settings `cfg` gives a value."""
    return {f"{section}.{key}": value for section, values in cfg.to_yaml_dict().items() if isinstance(values, dict)
            for key, value in values.items()}


def _misfit(cfg: RaytrainConfig, source: Source, checkpoint: Path) -> ConfigIssue | None:
    """Whether the network `cfg` builds cannot take `checkpoint`'s weights (`network_misfit`); a checkpoint whose
    own config.yaml cannot be read is left to RLlib's restore."""
    from raytrain.config.load import load_source
    from raytrain.config.source import parse_yaml
    from raytrain.errors import ConfigError
    from raytrain.rllib.fit import network_misfit

    try:
        text = (checkpoint / "config.yaml").read_text()
        saved = load_source(parse_yaml(text, str(checkpoint / "config.yaml"))).config
    except (OSError, UnicodeDecodeError, ConfigError):
        return None
    return network_misfit(cfg, source, checkpoint, saved)


def plan(prepared: PreparedTrain) -> str:
    """What `raytrain train --dry-run` prints: the RLlib builder calls, the run folder, the checkpoint resumed."""
    import yaml

    lines = [
        "# would train with these RLlib builder calls",
        yaml.safe_dump(prepared.calls, sort_keys=False).rstrip(),
        f"# run folder: {prepared.where}",
    ]
    if prepared.checkpoint:
        lines.append(f"# resuming from: {prepared.checkpoint}")
    if prepared.finished:
        lines.append(f"# nothing to resume: {prepared.finished[1]} at that checkpoint")
    return "\n".join(lines)


def start(
    prepared: PreparedTrain,
    argv: list[str],
    *,
    on_iteration: Callable[[IterationReport], None] = _ignore,
    on_line: Callable[[str], None] = _ignore,
    on_note: Callable[[str], None] = _ignore,
    on_connected: Callable[[], None] = _ignore,
    on_interrupted: Callable[[TrainOutcome], None] = _ignore,
) -> TrainOutcome:
    """Join Ray, build (and restore) the Algorithm, record the run folder, train until a stop criterion or Ctrl-C.

    Args:
        prepared: from `prepare`.
        argv: the command line recorded in the run folder's command.txt.
        on_iteration: told after each iteration.
        on_line: told what the run is (its folder; what trains where).
        on_note: told the lesser things (earlier config files kept, where Ray's messages go, checkpoints pruned).
        on_connected: called once Ray is up and before the build: where a caller installs its signal handlers
            (`ray.init` installs Ray's own SIGTERM handler).
        on_interrupted: told how an interrupted run ended, once its checkpoint is saved and Ray's messages are
            written to the run folder, before anything is stopped (see `Trainer.on_interrupted`); it may end the
            process.

    Raises:
        TrainError: the cluster cannot be joined.
        ConfigError: the joined Ray cannot place the config's actors (nothing built or written; exit 2).
    """
    from raytrain.quiet import quiet_ray
    from raytrain.training import Trainer, check_train_cpus, connect_for_build, connected_ray

    cfg = prepared.cfg
    messages = quiet_ray()  # Ray's own messages: into the run folder's ray.log (--verbose: to the terminal)
    ray_where = connect_for_build(prepared.address)
    assert prepared.source is not None  # prepare() sets it
    check_train_cpus(cfg, prepared.source, connected_ray(ray_where))

    def interrupted(outcome: TrainOutcome) -> None:
        if messages is not None:
            messages.close()
        on_interrupted(outcome)

    on_connected()
    trainer = Trainer(cfg, on_iteration=on_iteration, on_message=on_note, on_interrupted=interrupted)
    try:
        trainer.build(prepared.checkpoint)
        # Built (and restored): now the run is recorded.
        folder = _record(prepared, argv, on_note)
        trainer.folder = folder
        on_line(f"run folder: {folder.path}")
        if messages is not None:
            log = messages.log_to(folder.path)
            on_note(f"Ray's own messages go to {log} (--verbose prints them here)")
        on_line(
            f"training PPO on {cfg.environment.env} ({ray_where})"
            + (f", resuming from {prepared.checkpoint.name}" if prepared.checkpoint else "")
        )
        return trainer.run()
    finally:
        trainer.stop()
        if messages is not None:
            messages.close()


def _name(cfg: RaytrainConfig) -> str:
    """experiment.name, which validation always sets (its default is `ppo_<env>`)."""
    assert cfg.experiment.name is not None
    return cfg.experiment.name


def _record(prepared: PreparedTrain, argv: list[str], on_note: Callable[[str], None]) -> RunFolder:
    """Write the run's setup (config, RLlib calls, command line, versions); a resume keeps the earlier config files numbered."""
    cfg, calls = prepared.cfg, prepared.calls
    if prepared.resumed is not None:
        n = prepared.resumed.record_resume(cfg.to_yaml_dict(), calls, argv)
        on_note(f"earlier config kept as config.{n}.yaml, rllib_config.{n}.json")
        if prepared.checkpoint is not None:
            moved = prepared.resumed.set_aside_after(prepared.checkpoint, time.strftime("%Y-%m-%d_%H-%M-%S"))
            if moved:
                on_note(moved)
        return prepared.resumed
    if prepared.run_dir is not None:
        prepared.run_dir.mkdir(parents=True, exist_ok=True)  # made by the submission; the script and the job's log are in it
        folder = RunFolder(prepared.run_dir)
    else:
        folder = RunFolder.create(cfg.experiment.storage_path, _name(cfg))
    folder.claim()
    folder.write_setup(cfg.to_yaml_dict(), calls, argv)
    return folder

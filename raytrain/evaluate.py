"""`raytrain eval`: load a checkpoint and run fresh episodes with the greedy policy."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from raytrain.config.load import load_config, load_source
from raytrain.config.schema import RaytrainConfig
from raytrain.config.source import Source, override_text
from raytrain.errors import ConfigError, ConfigIssue, TrainError, UsageError
from raytrain.runs import (
    COPIED_IN_PART,
    STATE_FILE,
    RunFolder,
    absolute,
    checkpoint_number,
    config_lost,
    rllib_state_missing,
    run_of_checkpoints,
    runs_held,
    where_it_imported,
)
from raytrain.tune.results import LEADERBOARD_FILE, META_FILE, experiments_in, file_given_for_results, newest, some_of

if TYPE_CHECKING:
    from ray.rllib.algorithms.algorithm import Algorithm


@dataclass
class EvalResult:
    checkpoint: str
    episodes: int
    returns: list[float]
    lengths: list[int]

    def summary(self) -> dict[str, str | float]:
        r = self.returns
        return {
            "checkpoint": self.checkpoint,
            "episodes": self.episodes,
            "return_mean": statistics.fmean(r),
            "return_std": statistics.pstdev(r) if len(r) > 1 else 0.0,
            "return_min": min(r),
            "return_max": max(r),
            "length_mean": statistics.fmean(self.lengths),
        }


TUNE_CHECKPOINT = "rllib_checkpoint.json"
"""What marks a checkpoint a sweep's trial saved (RLlib's own files; its config is the trial's params.json)."""


def _tune_checkpoints(trial_dir: Path) -> list[Path]:
    """A sweep trial's checkpoints, oldest first (Tune names them checkpoint_<n>, n from 0)."""
    numbered = sorted((n, p) for p in trial_dir.glob("checkpoint_*") if (n := checkpoint_number(p)) is not None)
    return [p for _, p in numbered if (p / TUNE_CHECKPOINT).is_file()]


def _is_trial_dir(path: Path) -> bool:
    return (path / "params.json").is_file()


def resolve_checkpoint(path: str | Path, on_skip: Callable[[str], None] | None = None) -> Path:
    """A checkpoint folder, or a run folder (its latest complete checkpoint), as an absolute path.

    Also a sweep trial's checkpoint (what `raytrain tune` prints as the best checkpoint), or a trial folder
    (its latest checkpoint). A relative path is taken from the working directory. `on_skip` is told about
    each checkpoint of a run folder that is passed over because its state file cannot be read.

    Raises:
        UsageError: `path` is none of these (checked without Ray).
    """
    p = absolute(path)
    if p.name.endswith((".partial", ".deleting")):
        raise UsageError(f"{path} is an incomplete checkpoint (being written or deleted, or abandoned); give a complete one")
    copied_in_part = f"{COPIED_IN_PART}: give a complete one"
    if (p / STATE_FILE).is_file():
        if not (p / "config.yaml").is_file() and not _is_trial_dir(p.parent):
            raise UsageError(f"{path} has no config.yaml (the run's config, which raytrain writes in every checkpoint): "
                             + copied_in_part)
        if (incomplete := rllib_state_missing(p)) is None:
            return p
        run = RunFolder(p.parent.parent) if p.parent.name == "checkpoints" else None
        other = run.latest_checkpoint() if run is not None and (run.path / "config.yaml").is_file() else None
        raise UsageError(f"{path} {incomplete}: give a complete one" + (f", such as {other}" if other else ""))
    if (holder := run_of_checkpoints(p)) is not None:
        p = holder  # a run's checkpoints folder: the run, its latest checkpoint
    if (p / "config.yaml").is_file() and (p / TUNE_CHECKPOINT).is_file() and not (p / "checkpoints").exists():
        raise UsageError(f"{path} is a checkpoint without its {STATE_FILE} (raytrain writes it last, in every "
                         f"checkpoint): {copied_in_part}")
    if (p / "config.yaml").is_file():
        latest = RunFolder(p).latest_checkpoint(on_skip)
        if latest is not None:
            return latest
        raise UsageError(f"{path} is a run folder without a complete checkpoint (nothing to evaluate yet)")
    if (p / TUNE_CHECKPOINT).is_file() and _is_trial_dir(p.parent):
        if (incomplete := rllib_state_missing(p)) is not None:
            raise UsageError(f"{path} {incomplete}: give a complete one")
        return p
    if _is_trial_dir(p):
        trial = _tune_checkpoints(p)
        if trial:
            return trial[-1]
        raise UsageError(f"{path} is a sweep trial without a checkpoint (nothing to evaluate yet)")
    if (p / LEADERBOARD_FILE).is_file():
        best = _best_checkpoint(p)
        if best is not None:
            if on_skip is not None and (left := _unfinished(p)):
                on_skip(f"note: {path} has not finished ({left}; `raytrain tune resume {path}` continues it): its best "
                        "trial so far is evaluated")
            return best
        raise UsageError(f"{path}: no trial on its leaderboard has a checkpoint (nothing to evaluate)")
    if (p / META_FILE).is_file():
        raise UsageError(f"{path} is a sweep that has not finished (no leaderboard yet): give one of its trial folders "
                         f"(`raytrain tune status {path}` lists them)")
    if not p.exists():
        raise UsageError(f"{path} does not exist")
    if p.is_file() and (p.parent / STATE_FILE).is_file():
        raise UsageError(f"{path} is a file of the checkpoint {p.parent}: give the checkpoint folder, "
                         f"`raytrain eval {p.parent}`")
    if p.is_file() and (given := file_given_for_results(p, "raytrain eval")):
        raise UsageError(given)
    if lost := config_lost(p):
        raise UsageError(lost)
    if held := runs_held(path, "raytrain eval"):
        raise UsageError(held)
    if found := experiments_in(p):
        # storage_path itself: one level above what eval takes.
        shown = [f"{e.name} ({e.what})" for e in found]
        done = [e for e in found if e.finished]
        last = newest(done) if done else None
        target = Path(path) / last.name / (last.latest_run or "") if last is not None else None
        example = f", the newest being `raytrain eval {target}`" if target is not None else ""
        raise UsageError(f"{path} is a storage path of {some_of(shown, 'experiment')}: give one{example}")
    raise UsageError(f"{path} is not a raytrain checkpoint (no {STATE_FILE}), a sweep trial's checkpoint, nor a run, "
                     "trial or experiment folder with checkpoints")


def _unfinished(exp_dir: Path) -> str | None:
    """How many of the sweep's trials Tune's newest state has not finished (`N of M trials`), where it says so."""
    from raytrain.tune import state

    statuses = [trial.get("status") for trial, _ in state.trials(exp_dir)]
    left = sum(status != "TERMINATED" for status in statuses)
    return f"{left} of its {len(statuses)} trials not finished" if left else None


def _best_checkpoint(exp_dir: Path) -> Path | None:
    """The checkpoint of the best-ranked trial that has one on the sweep's leaderboard.json (as `raytrain tune`
    printed it), found in `exp_dir` even when the experiment folder was moved since.

    Raises:
        UsageError: leaderboard.json cannot be read (it was said as a leaderboard with no checkpoint).
    """
    import json

    try:
        board = json.loads((exp_dir / LEADERBOARD_FILE).read_text())
    except (OSError, ValueError) as exc:
        why = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc)
        raise UsageError(f"{exp_dir / LEADERBOARD_FILE} cannot be read ({why}): give one of the sweep's trial folders "
                         f"(`raytrain tune status {exp_dir}` ranks them)") from None
    for entry in board if isinstance(board, list) else []:
        recorded = entry.get("checkpoint") if isinstance(entry, dict) else None
        if not isinstance(recorded, str) or not recorded:
            continue
        here = exp_dir / Path(recorded).parent.name / Path(recorded).name
        for candidate in (here, Path(recorded)):
            if (candidate / TUNE_CHECKPOINT).is_file() and _is_trial_dir(candidate.parent):
                return candidate
    return None


def _trial_source(checkpoint: Path) -> Source:
    """The config the sweep's trial that saved `checkpoint` ran, from the trial's params.json.

    Raises:
        UsageError: params.json is not a raytrain sweep trial's.
    """
    import json

    from raytrain.config.sweep_load import trial_source
    from raytrain.tune import TRIAL_KEY, unescape_keys

    params = checkpoint.parent / "params.json"
    try:
        spec = json.loads(params.read_text())[TRIAL_KEY]
        base, overrides = spec["base"], dict(spec.get("overrides") or {})
    except (OSError, ValueError, KeyError, TypeError):
        raise UsageError(f"{params} is not the params.json of a raytrain sweep's trial: cannot tell its config") from None
    return trial_source(Source(unescape_keys(base), {}, str(params)), overrides)


@dataclass
class EvalPlan:
    """What `evaluate` runs, all checked before Ray starts."""

    checkpoint: Path
    config: RaytrainConfig
    given: str | None = None
    """What the user named, where it was a folder `checkpoint` was chosen from (a run's, a trial's, a sweep's):
    chosen again if a run training there deletes it meanwhile (experiment.num_to_keep)."""
    seed: int | None = None


def plan_eval(checkpoint: str | Path, seed: int | None = None, on_skip: Callable[[str], None] | None = None) -> EvalPlan:
    """Find the checkpoint and check its config, RLlib's own validation included; needs no Ray.

    Raises:
        UsageError: not a checkpoint or run folder.
        ConfigError: the checkpoint's config is invalid or RLlib rejects it.
    """
    from raytrain.rllib.translate import build_ppo_config

    ckpt = resolve_checkpoint(checkpoint, on_skip)
    overrides = ["env_runners.num_env_runners=0", "evaluation={}", "learners.num_learners=0", "learners.num_gpus_per_learner=0"]
    if seed is not None:
        overrides.append(override_text("experiment.seed", seed))
    try:
        if (ckpt / "config.yaml").is_file():
            config_file = ckpt / "config.yaml"
            cfg = load_config(config_file, overrides).config
        else:  # a sweep trial's checkpoint
            config_file = ckpt.parent / "params.json"
            cfg = load_source(_trial_source(ckpt), overrides).config
    except ConfigError as exc:
        raise where_it_imported(exc, ckpt) from None
    try:
        build_ppo_config(cfg).validate()
    except Exception as exc:  # RLlib raises ValueError and friends
        raise ConfigError([ConfigIssue(str(config_file), "", f"RLlib rejects the config: {exc}")]) from None
    given = None if Path(checkpoint).expanduser().absolute() == ckpt.absolute() else str(checkpoint)
    return EvalPlan(ckpt, cfg, given, seed)


@contextmanager
def evaluation_algorithm(plan: EvalPlan) -> Iterator[Algorithm]:
    """The plan's Algorithm with its checkpoint restored, sampling in this process (Ray must be connected).

    An observation filter (`env_runners.observation_filter: MeanStdFilter`) normalizes with the running mean
    and std the checkpoint saved, and the evaluation's own episodes do not update them: they belong to the
    policy being evaluated (RLlib's filter updates on every observation by default).
    """
    from raytrain.rllib.algorithm import algorithm
    from raytrain.rllib.translate import build_ppo_config
    from raytrain.training import restore

    config = build_ppo_config(plan.config)
    if plan.config.env_runners.observation_filter == "MeanStdFilter":
        from raytrain.rllib.connectors import frozen_flat_mean_std_filter, frozen_mean_std_filter

        frozen = frozen_flat_mean_std_filter if plan.config.env_runners.flatten_observations else frozen_mean_std_filter
        config.env_runners(env_to_module_connector=frozen)
    with algorithm(config) as algo:
        restore(algo, plan.checkpoint, "evaluate another checkpoint")
        yield algo


def evaluate(
    checkpoint: str | Path | EvalPlan, episodes: int = 10, explore: bool = False, seed: int | None = None
) -> EvalResult:
    """Run `episodes` fresh episodes with the checkpoint's policy in this process (Ray must be connected)."""
    plan = checkpoint if isinstance(checkpoint, EvalPlan) else plan_eval(checkpoint, seed)
    try:
        return _episodes(plan, episodes, explore)
    except Exception:
        if plan.checkpoint.exists():
            raise
    # Deleted since it was chosen: a run training into that folder keeps only its newest (experiment.num_to_keep).
    if plan.given is None:
        raise TrainError(f"{plan.checkpoint} was deleted while eval loaded it (a run training there keeps only its "
                         "newest checkpoints, experiment.num_to_keep): give a newer one, or the run folder")
    return _episodes(plan_eval(plan.given, plan.seed), episodes, explore)


def _episodes(plan: EvalPlan, episodes: int, explore: bool) -> EvalResult:
    with evaluation_algorithm(plan) as algo:
        runner = algo.env_runner
        done = runner.sample(num_episodes=episodes, explore=explore, random_actions=False)
        finished = [e for e in done if e.is_done][:episodes]
        return EvalResult(
            str(plan.checkpoint), len(finished), [float(e.get_return()) for e in finished], [len(e) for e in finished]
        )

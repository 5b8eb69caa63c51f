"""`raytrain eval`: load a checkpoint and run fresh episodes with the greedy policy."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from raytrain.config.load import load_config
from raytrain.config.schema import RaytrainConfig
from raytrain.errors import ConfigError, ConfigIssue, UsageError
from raytrain.runs import STATE_FILE, RunFolder, absolute


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


def resolve_checkpoint(path: str | Path, on_skip: Callable[[str], None] | None = None) -> Path:
    """A checkpoint folder, or a run folder (its latest complete checkpoint), as an absolute path.

    A relative path is taken from the working directory. `on_skip` is told about each checkpoint of a run
    folder that is passed over because its state file cannot be read.

    Raises:
        UsageError: `path` is neither (checked without Ray).
    """
    p = absolute(path)
    if p.name.endswith((".partial", ".deleting")):
        raise UsageError(f"{path} is an incomplete checkpoint (being written or deleted, or abandoned); give a complete one")
    if (p / STATE_FILE).is_file():
        return p
    if (p / "config.yaml").is_file():
        latest = RunFolder(p).latest_checkpoint(on_skip)
        if latest is not None:
            return latest
        raise UsageError(f"{path} is a run folder without a complete checkpoint (nothing to evaluate yet)")
    raise UsageError(f"{path} is not a raytrain checkpoint (no {STATE_FILE}) nor a run folder with checkpoints")


@dataclass
class EvalPlan:
    """What `evaluate` runs, all checked before Ray starts."""

    checkpoint: Path
    config: RaytrainConfig


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
        overrides.append(f"experiment.seed={seed}")
    cfg = load_config(ckpt / "config.yaml", overrides).config
    try:
        build_ppo_config(cfg).validate()
    except Exception as exc:  # RLlib raises ValueError and friends
        raise ConfigError([ConfigIssue(str(ckpt / "config.yaml"), "", f"RLlib rejects the config: {exc}")]) from None
    return EvalPlan(ckpt, cfg)


def evaluate(
    checkpoint: str | Path | EvalPlan, episodes: int = 10, explore: bool = False, seed: int | None = None
) -> EvalResult:
    """Run `episodes` fresh episodes with the checkpoint's policy in this process (Ray must be connected)."""
    from raytrain.rllib.translate import build_ppo_config

    plan = checkpoint if isinstance(checkpoint, EvalPlan) else plan_eval(checkpoint, seed)
    algo = build_ppo_config(plan.config).build_algo()
    try:
        algo.restore_from_path(str(plan.checkpoint))
        runner = algo.env_runner
        done = runner.sample(num_episodes=episodes, explore=explore, random_actions=False)
        finished = [e for e in done if e.is_done][:episodes]
        return EvalResult(
            str(plan.checkpoint), len(finished), [float(e.get_return()) for e in finished], [len(e) for e in finished]
        )
    finally:
        algo.stop()

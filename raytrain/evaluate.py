"""`raytrain eval`: load a checkpoint and run fresh episodes with the greedy policy."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path

from raytrain.config.load import load_config
from raytrain.errors import TrainError
from raytrain.runs import STATE_FILE, RunFolder


@dataclass
class EvalResult:
    checkpoint: str
    episodes: int
    returns: list[float]
    lengths: list[int]

    def summary(self) -> dict:
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


def resolve_checkpoint(path: str | Path) -> Path:
    """A checkpoint folder, or a run folder (its latest checkpoint)."""
    p = Path(path).expanduser()
    if (p / STATE_FILE).is_file():
        return p
    if (p / "config.yaml").is_file() and (p / "checkpoints").is_dir():
        latest = RunFolder(p).latest_checkpoint()
        if latest is not None:
            return latest
    raise TrainError(f"{path} is not a raytrain checkpoint (no {STATE_FILE}) nor a run folder with checkpoints")


def evaluate(checkpoint: str | Path, episodes: int = 10, explore: bool = False, seed: int | None = None) -> EvalResult:
    """Run `episodes` fresh episodes with the checkpoint's policy in this process (Ray must be connected)."""
    from raytrain.rllib.translate import build_ppo_config

    ckpt = resolve_checkpoint(checkpoint)
    overrides = ["env_runners.num_env_runners=0", "evaluation={}", "learners.num_learners=0", "learners.num_gpus_per_learner=0"]
    if seed is not None:
        overrides.append(f"experiment.seed={seed}")
    cfg = load_config(ckpt / "config.yaml", overrides).config
    algo = build_ppo_config(cfg).build_algo()
    try:
        algo.restore_from_path(str(ckpt))
        runner = algo.env_runner
        done = runner.sample(num_episodes=episodes, explore=explore, random_actions=False)
        finished = [e for e in done if e.is_done][:episodes]
        return EvalResult(
            str(ckpt), len(finished), [float(e.get_return()) for e in finished], [len(e) for e in finished]
        )
    finally:
        algo.stop()

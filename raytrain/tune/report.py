"""What a sweep reports: the leaderboard files, best.yaml, and the trial tables printed while and after it runs."""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from raytrain.metrics import metric_text
from raytrain.tune.results import LEADERBOARD_FILE, TrialSummary, read_meta

if TYPE_CHECKING:
    from rich.table import Table


def write_leaderboard(exp_dir: Path, trials: list[TrialSummary]) -> None:
    """leaderboard.json and leaderboard.csv in `exp_dir`, trials in the order given (best first)."""
    import csv

    (exp_dir / LEADERBOARD_FILE).write_text(json.dumps([asdict(t) for t in trials], indent=2, default=str) + "\n")
    keys = sorted({k for t in trials for k in t.hyperparameters})
    with open(exp_dir / "leaderboard.csv", "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["rank", "trial", "status", "iteration", "metric_last", "metric_best", "env_steps", *keys, "checkpoint"])
        for i, t in enumerate(trials, 1):
            w.writerow([i, t.name, t.status, t.iteration, t.metric_last, t.metric_best, t.env_steps, *[t.hyperparameters.get(k) for k in keys], t.checkpoint])


def write_best_config(exp_dir: Path, best: TrialSummary) -> Path:
    """The best trial's config as a train YAML that `raytrain train` runs as is."""
    from raytrain.config.load import load_source
    from raytrain.config.source import Source
    from raytrain.config.sweep_load import trial_source

    meta = read_meta(exp_dir)
    base = Source(copy.deepcopy(meta["base"]), {}, str(exp_dir / "best.yaml"))
    cfg = load_source(trial_source(base, best.hyperparameters)).config
    cfg.experiment.name = f"{meta['name']}_best"
    data = cfg.to_yaml_dict()
    header = (
        f"# Best trial of sweep {meta['name']}: {best.name}\n"
        f"# {meta['metric']} = {best.metric_last} after {best.iteration} iterations; checkpoint: {best.checkpoint}\n"
        f"# Hyperparameters: {json.dumps(best.hyperparameters)}\n"
    )
    path = exp_dir / "best.yaml"
    path.write_text(header + yaml.safe_dump(data, sort_keys=False))
    return path


def hyperparameter_text(value: Any) -> str:
    return f"{value:.3g}" if isinstance(value, float) else str(value)


def trial_table(title: str, columns: Sequence[str], rows: Sequence[tuple[Sequence[str], Mapping[str, Any]]]) -> Table:
    """The one trial table: `columns`, then a column per hyperparameter any trial has (named by the last part
    of its dotted name); `rows` are each trial's cells for `columns` and its hyperparameters."""
    from rich.table import Table

    keys = sorted({k for _, hyperparameters in rows for k in hyperparameters})
    table = Table(title=title, title_justify="left")
    for col in (*columns, *(k.rsplit(".", 1)[-1] for k in keys)):
        table.add_column(col, justify="left" if col in ("trial", "status") else "right", no_wrap=True)
    for cells, hyperparameters in rows:
        table.add_row(*cells, *[hyperparameter_text(hyperparameters.get(k)) for k in keys])
    return table


def leaderboard_table(meta: dict, trials: list[TrialSummary]) -> Table:
    """The trials of an experiment read from storage, ranked (what `tune status` and the end of a sweep print)."""
    rows = [
        (
            [str(i), t.trial_id, t.status, str(t.iteration), metric_text(t.metric_last), metric_text(t.metric_best),
             f"{int(t.env_steps):,}" if t.env_steps else "-"],
            t.hyperparameters,
        )
        for i, t in enumerate(trials, 1)
    ]
    return trial_table(
        f"{meta['name']} ({meta['algorithm']}), ranked on {meta['metric']} ({meta['mode']})",
        ("#", "trial", "status", "iter", "last", "best", "env steps"),
        rows,
    )

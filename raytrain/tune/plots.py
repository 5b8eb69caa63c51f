"""PNG plots of a sweep, drawn from what its experiment folder holds (matplotlib, no display needed)."""

from __future__ import annotations

from pathlib import Path

from raytrain.tune.results import finite, metric_value, pbt_lineage, result_rows, summarize


def plot(exp_dir: str | Path) -> list[Path]:
    """PNG plots in EXP_DIR/plots: every trial's metric over iterations; for PBT, the best lineage's schedule."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    exp_dir = Path(exp_dir).expanduser().absolute()
    meta, trials = summarize(exp_dir)
    metric = meta["metric"]
    out_dir = exp_dir / "plots"
    out_dir.mkdir(exist_ok=True)
    written: list[Path] = []

    fig, ax = plt.subplots(figsize=(9, 5))
    for t in trials:
        rows = result_rows(Path(t.path))
        xs = [r.get("training_iteration") for r in rows]
        ys = [finite(metric_value(r, metric)) for r in rows]
        pts = [(x, y) for x, y in zip(xs, ys) if x is not None and y is not None]
        # A PBT exploit continues a trial from the checkpoint it cloned, often from an earlier iteration than
        # it had reached: each such restart is a piece of its own, drawn in the trial's colour. The legend names
        # the trial as the leaderboard does (matplotlib leaves out a label that starts with "_").
        color = None
        for piece in _pieces(pts):
            line = ax.plot(*zip(*piece), color=color, label=None if color else t.trial_id, linewidth=1.5)
            color = line[0].get_color()
    ax.set_xlabel("training iteration")
    ax.set_ylabel(metric)
    ax.set_title(f"{meta['name']}: {metric} per trial")
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:  # trials with no value of the metric yet draw no line
        ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    path = out_dir / "metric_per_trial.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    written.append(path)

    if meta.get("algorithm") in ("pbt", "pb2") and trials:
        lineage = pbt_lineage(exp_dir, trials[0])
        kwargs = (meta.get("plan", {}).get("scheduler") or {}).get("kwargs", {})
        mutated = set(kwargs.get("hyperparam_mutations") or kwargs.get("hyperparam_bounds") or {})
        keys = sorted({k for _, cfg in lineage for k in cfg if not mutated or k in mutated})
        numeric = [k for k in keys if all(isinstance(cfg.get(k), (int, float)) for _, cfg in lineage if k in cfg)]
        if numeric:
            fig, axes = plt.subplots(len(numeric), 1, figsize=(9, 2.6 * len(numeric)), squeeze=False)
            for ax, key in zip(axes[:, 0], numeric):
                steps = [(it, cfg[key]) for it, cfg in lineage if key in cfg]
                # The last value holds until the trial's last iteration.
                when = [s[0] for s in steps] + [max(trials[0].iteration, steps[-1][0])]
                values = [s[1] for s in steps] + [steps[-1][1]]
                ax.step(when, values, where="post")
                ax.set_ylabel(key)
                ax.grid(alpha=0.3)
            axes[-1, 0].set_xlabel("training iteration")
            axes[0, 0].set_title(f"PBT schedule of the best trial's lineage ({trials[0].trial_id})")
            fig.tight_layout()
            path = out_dir / "pbt_best_lineage.png"
            fig.savefig(path, dpi=110)
            plt.close(fig)
            written.append(path)
    return written


def _pieces(pts: list[tuple[int, float]]) -> list[list[tuple[int, float]]]:
    """`pts` cut wherever the iteration does not go up."""
    pieces: list[list[tuple[int, float]]] = []
    for x, y in pts:
        if not pieces or x <= pieces[-1][-1][0]:
            pieces.append([])
        pieces[-1].append((x, y))
    return pieces

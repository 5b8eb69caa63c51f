"""The per-trial metric plot: its pieces (a PBT exploit continues a trial from an earlier iteration) and its legend."""

import json
import warnings

from raytrain.tune.plots import _pieces, plot
from raytrain.tune.results import summarize


def test_a_trial_that_goes_on_from_an_earlier_iteration_is_drawn_in_pieces():
    pts = [(1, 10.0), (2, 11.0), (3, 12.0), (4, 13.0), (3, 20.0), (4, 21.0), (5, 22.0)]
    assert _pieces(pts) == [[(1, 10.0), (2, 11.0), (3, 12.0), (4, 13.0)], [(3, 20.0), (4, 21.0), (5, 22.0)]]


def test_a_repeated_iteration_starts_a_piece_and_no_points_make_none():
    assert _pieces([(1, 1.0), (1, 2.0)]) == [[(1, 1.0)], [(1, 2.0)]]
    assert _pieces([]) == []


def _experiment(tmp_path, trials: dict[str, list[float]]):
    """An experiment folder as a sweep leaves it (raytrain's own files, by raytrain's writer), with a trial folder
    per name and its metric per iteration."""
    from raytrain.config.sweep_load import load_sweep
    from raytrain.tune.build import plan as sweep_plan
    from raytrain.tune.run import _write_meta

    (tmp_path / "base.yaml").write_text("environment: {env: CartPole-v1}\nstop: {training_iteration: 2}\n")
    (tmp_path / "sweep.yaml").write_text(
        f"name: ppo_pbt_cartpole_18\nbase: base.yaml\ncheckpoint: {{storage_path: {tmp_path / 'results'}}}\n")
    loaded = load_sweep(tmp_path / "sweep.yaml")
    exp = _write_meta(loaded, sweep_plan(loaded), ["raytrain", "tune", "sweep.yaml"])
    for name, values in trials.items():
        trial = exp / name
        trial.mkdir()
        (trial / "params.json").write_text("{}")
        trial_id = "_".join(name.rsplit("_", 2)[1:])  # as Tune names trials: <experiment>_<trial id>
        rows = [{"trial_id": trial_id, "training_iteration": i, "raytrain": {"episode_return_mean_100": v}}
                for i, v in enumerate(values, 1)]
        (trial / "result.json").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return exp


def _legends(monkeypatch) -> list[list[str]]:
    """The legend texts of every figure `plot` saves, in order."""
    from matplotlib.figure import Figure

    seen: list[list[str]] = []
    save = Figure.savefig

    def savefig(fig, *args, **kwargs):
        legend = fig.axes[0].get_legend()
        seen.append([t.get_text() for t in legend.get_texts()] if legend else [])
        return save(fig, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", savefig)
    return seen


def test_the_legend_names_each_trial_as_the_leaderboard_does(tmp_path, monkeypatch):
    """A trial name's last 24 characters (the old label) can start with "_", which matplotlib leaves out of the
    legend with a warning on the sweep's output: the main job's plot had an empty legend."""
    exp = _experiment(tmp_path, {"ppo_pbt_cartpole_18_beb50_00000": [10.0, 20.0],
                                 "ppo_pbt_cartpole_18_beb50_00001": [15.0, 30.0]})
    legends = _legends(monkeypatch)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        written = plot(exp)
    assert [p.name for p in written] == ["metric_per_trial.png"]
    assert legends == [["beb50_00001", "beb50_00000"]]  # best first, as the leaderboard ranks them
    assert [t.trial_id for t in summarize(exp)[1]] == ["beb50_00001", "beb50_00000"]


def test_trials_with_no_metric_yet_draw_an_empty_plot_without_a_warning(tmp_path, monkeypatch):
    exp = _experiment(tmp_path, {"ppo_pbt_cartpole_18_beb50_00000": []})
    legends = _legends(monkeypatch)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        plot(exp)
    assert legends == [[]]

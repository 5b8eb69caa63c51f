"""The progress line's share of each stop criterion (`raytrain train`)."""

import math

import pytest

from raytrain.metrics import TRAIN_METRICS, StopProgress, counts_from_zero


def test_a_negative_return_target_starts_at_zero_percent():
    """Pendulum: returns start near -1,250 and the run stops at -300. It showed 100% from the first iteration."""
    progress = StopProgress()
    key = "raytrain/episode_return_mean_100"
    assert progress.percent(key, -1248.5, -300) == 0
    assert progress.percent(key, -1210.1, -300) == pytest.approx(100 * 38.4 / 948.5)
    assert progress.percent(key, -774.25, -300) == pytest.approx(50)
    assert progress.percent(key, -1400.0, -300) == 0  # worse than at the start: not below 0
    assert progress.percent(key, -299.0, -300) == 100


def test_a_return_counts_from_its_first_value():
    progress = StopProgress()
    key = "raytrain/episode_return_mean_100"
    assert progress.percent(key, 18.8, 450) == 0
    assert progress.percent(key, 234.4, 450) == pytest.approx(50)
    assert progress.percent(key, 500.0, 450) == 100


def test_counters_are_a_share_of_their_threshold():
    progress = StopProgress()
    assert progress.percent("training_iteration", 1, 4) == 25
    assert progress.percent("num_env_steps_sampled_lifetime", 2048, 400000) == pytest.approx(0.512)
    assert progress.percent("time_total_s", 30.0, 60) == 50
    assert progress.percent("training_iteration", 4, 4) == 100


def test_no_value_yet():
    assert StopProgress().percent("raytrain/episode_return_mean_100", math.nan, 450) is None


def test_a_first_value_past_the_threshold_is_done():
    assert StopProgress().percent("learners/default_policy/entropy", 0.7, 0.5) == 100


def test_which_metrics_count_from_zero():
    counters = {m for m in TRAIN_METRICS if counts_from_zero(m)}
    assert {"training_iteration", "time_total_s", "num_env_steps_sampled_lifetime",
            "env_runners/num_agent_steps_sampled_lifetime/default_agent",
            "learners/__all_modules__/num_env_steps_trained_lifetime"} <= counters
    assert not counters & {"env_runners/episode_return_mean", "learners/default_policy/entropy", "time_this_iter_s",
                           "env_runners/num_env_steps_sampled"}
    assert counts_from_zero("raytrain/episodes_total")
    assert not counts_from_zero("raytrain/episode_return_mean_100")


def test_a_resumed_run_counts_from_its_first_iteration():
    """`train --resume`: the first value is the run's first recorded iteration, not the resumed one."""
    progress = StopProgress({"raytrain/episode_return_mean_100": -1248.5, "training_iteration": 1, "note": "text"})
    assert progress.percent("raytrain/episode_return_mean_100", -774.25, -300) == pytest.approx(50)
    assert progress.percent("raytrain/episode_return_mean_100", None, -300) is None


def test_the_progress_line_shows_the_evaluation_return_and_tells_its_stop_from_trainings():
    """With `evaluation:` set, the line never showed the evaluation's return, and a stop on
    `evaluation/env_runners/episode_return_mean` read `episode_return_mean 40%`, as training's would."""
    from raytrain.cli.train_cmd import _progress_line
    from raytrain.config.load import load_source
    from raytrain.config.source import Source
    from raytrain.training import IterationReport

    cfg = load_source(Source({"environment": {"env": "CartPole-v1"}, "evaluation": {"evaluation_interval": 2}}, {},
                             "c.yaml")).config
    metrics = {"env_runners/episode_return_mean": 25.0, "evaluation/env_runners/episode_return_mean": 44.0}
    stops = {"evaluation/env_runners/episode_return_mean": 40.0, "env_runners/episode_return_mean": 10.0}
    line = _progress_line(IterationReport(3, metrics, 1000.0, stops), cfg, 0.0)
    assert "| eval    44.0 |" in line
    assert "| eval episode_return_mean 40% |" in line and line.endswith("| episode_return_mean 10%")
    assert "eval" not in _progress_line(IterationReport(1, {"env_runners/episode_return_mean": 25.0}, 1000.0, {}), cfg, 0.0)


def test_returns_between_minus_one_and_one_keep_their_digits_in_every_table():
    """A sweep's tables printed every metric with one decimal: an env whose returns lie in [0, 1] showed 0.9548
    as `1.0` (and `best trial: ... = 1.0`), and trials at 0.031 and 0.044 both as `0.0`, ranked for no visible
    reason. `raytrain train`'s line kept three digits there; both now print a metric the same way. Env steps
    are a count: the line printed 403 of them as `403.0`."""
    from raytrain.cli.train_cmd import _progress_line
    from raytrain.config.load import load_source
    from raytrain.config.source import Source
    from raytrain.metrics import metric_text
    from raytrain.training import IterationReport
    from raytrain.tune.report import leaderboard_table
    from raytrain.tune.results import TrialSummary

    assert [metric_text(v) for v in (0.9548, 0.0312, -0.004, 0.0, 465.64, -1248.53, 2500.0, None, math.nan)] == [
        "0.955", "0.0312", "-0.004", "0.0", "465.6", "-1,248.5", "2,500", "-", "-"]

    def trial(i: int, last: float, best: float) -> TrialSummary:
        return TrialSummary(f"0000{i}", f"s_0000{i}", "TERMINATED", 3, last, best, 1203, {}, None, "")

    table = leaderboard_table({"name": "s", "algorithm": "random", "metric": "m", "mode": "max"},
                              [trial(0, 0.9548, 0.9612), trial(1, 0.044, 0.05), trial(2, 0.031, 0.031)])
    cells = [list(column.cells) for column in table.columns]
    assert cells[4] == ["0.955", "0.044", "0.031"] and cells[5] == ["0.961", "0.05", "0.031"]

    cfg = load_source(Source({"environment": {"env": "CartPole-v1"}}, {}, "c.yaml")).config
    line = _progress_line(IterationReport(1, {"raytrain/episode_return_mean_100": 0.614,
                                              "env_runners/episode_return_mean": 0.614,
                                              "num_env_steps_sampled_lifetime": 403.0}, 1756.9, {}), cfg, 0.0)
    assert "return(last 100)   0.614 |" in line and "| steps       403 |" in line


def test_the_best_trial_line_gives_the_metric_as_the_leaderboard_does(tmp_path, monkeypatch, capsys):
    """`best trial: ... = 1.0` said a trial at 0.9548 had reached 1.0."""
    import raytrain.tune.results
    from raytrain.cli.tune_cmd import _report
    from raytrain.tune.results import TrialSummary

    best = TrialSummary("00001", "s_00001", "TERMINATED", 3, 0.9548, 0.9548, 1203, {"training.lr": 0.001}, None, "")
    monkeypatch.setattr(raytrain.tune.results, "summarize",
                        lambda exp: ({"name": "s", "algorithm": "random", "metric": "m", "mode": "max"}, [best]))
    _report(tmp_path)
    assert "best trial: s_00001: m = 0.955\n" in capsys.readouterr().out

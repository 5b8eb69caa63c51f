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

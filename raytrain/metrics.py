"""Metrics a PPO training result reports on Ray 2.60 (new API stack), for checking `stop` keys.

Generated from a real `Algorithm.train()` result (CartPole-v1, one remote EnvRunner, evaluation on)
and checked against a live result by tests/integration/test_train.py, so a Ray upgrade that renames a
metric fails a test instead of letting a stop criterion never fire.

Meaning of the metrics people stop and rank on:
- `env_runners/episode_return_mean`: RLlib's mean return of the episodes that *finished during this
  iteration* (the window is cleared at every reduction); across EnvRunners a mean of their means.
  Noisy: with small batches it is one or two episodes.
- `raytrain/episode_return_mean_<N>`: raytrain's true running mean over the last N finished
  episodes (N = experiment.return_window, 100 by default, like Gymnasium's "solved" criterion).
- `raytrain/episodes_in_window`: how many episodes that mean is over (< N early in training).
- `raytrain/episodes_total`: episodes finished since the run started.
- `num_env_steps_sampled_lifetime`: env steps sampled since the run started (old `timesteps_total`).
- `training_iteration`, `time_total_s`: iterations and seconds of training since the run started.
- `evaluation/env_runners/episode_return_mean`: mean return of the last evaluation round.
"""

import math
from typing import Any


def metric_text(value: object) -> str:
    """A metric as `raytrain train`'s line and a sweep's tables print it: `-` when there is none (None, NaN); a
    whole number of 1,000 or more as one; one decimal from 1 up (and for 0); three significant digits between
    -1 and 1, where the returns of a sparse-reward env lie (one decimal showed 0.9548 as `1.0`)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, float) and value.is_integer() and abs(value) >= 1000:
        return f"{int(value):,}"
    if isinstance(value, float):
        return f"{value:,.1f}" if abs(value) >= 1 or value == 0 else f"{value:.3g}"
    return f"{value:,}"


def count_text(value: object) -> str:
    """A count (env steps, episodes), which RLlib reports as a float: `403`, not `403.0`."""
    if isinstance(value, float) and value.is_integer():
        return f"{int(value):,}"
    return metric_text(value)

TRAIN_METRICS = frozenset(
    {
        "env_runner_group/actor_manager_num_outstanding_async_reqs",
        "env_runners/agent_episode_return_mean/default_agent",
        "env_runners/env_reset_timer",
        "env_runners/env_step_timer",
        "env_runners/env_to_module_sum_episodes_length_in",
        "env_runners/env_to_module_sum_episodes_length_out",
        "env_runners/episode_duration_sec_mean",
        "env_runners/episode_len_max",
        "env_runners/episode_len_mean",
        "env_runners/episode_len_min",
        "env_runners/episode_return_max",
        "env_runners/episode_return_mean",
        "env_runners/episode_return_min",
        "env_runners/module_episode_return_mean/default_policy",
        "env_runners/num_agent_steps_sampled/default_agent",
        "env_runners/num_agent_steps_sampled_lifetime/default_agent",
        "env_runners/num_env_steps_sampled",
        "env_runners/num_env_steps_sampled_lifetime",
        "env_runners/num_episodes",
        "env_runners/num_episodes_lifetime",
        "env_runners/num_module_steps_sampled/default_policy",
        "env_runners/num_module_steps_sampled_lifetime/default_policy",
        "env_runners/rlmodule_inference_timer",
        "env_runners/sample",
        "env_runners/weights_seq_no",
        "fault_tolerance/num_env_runners_dropped_lifetime",
        "fault_tolerance/num_healthy_workers",
        "fault_tolerance/num_remote_worker_restarts",
        "iterations_since_restore",
        "learners/__all_modules__/num_env_steps_trained",
        "learners/__all_modules__/num_env_steps_trained_lifetime",
        "learners/__all_modules__/num_env_steps_trained_throughput",
        "learners/__all_modules__/num_module_steps_trained",
        "learners/__all_modules__/num_module_steps_trained_lifetime",
        "learners/__all_modules__/num_module_steps_trained_throughput",
        "learners/__all_modules__/num_non_trainable_parameters",
        "learners/__all_modules__/num_trainable_parameters",
        "learners/default_policy/curr_entropy_coeff",
        "learners/default_policy/curr_kl_coeff",
        "learners/default_policy/default_optimizer_learning_rate",
        "learners/default_policy/diff_num_grad_updates_vs_sampler_policy",
        "learners/default_policy/entropy",
        "learners/default_policy/mean_kl_loss",
        "learners/default_policy/module_train_batch_size_mean",
        "learners/default_policy/num_module_steps_trained",
        "learners/default_policy/num_module_steps_trained_lifetime",
        "learners/default_policy/num_trainable_parameters",
        "learners/default_policy/policy_loss",
        "learners/default_policy/total_loss",
        "learners/default_policy/vf_explained_var",
        "learners/default_policy/vf_loss",
        "learners/default_policy/vf_loss_unclipped",
        "learners/default_policy/weights_seq_no",
        "num_env_steps_sampled_lifetime",
        "num_training_step_calls_per_iteration",
        "time_since_restore",
        "time_this_iter_s",
        "time_total_s",
        "training_iteration",
    }
)

EVALUATION_METRICS = frozenset(
    {
        "evaluation/actor_manager_num_outstanding_async_reqs",
        "evaluation/env_runners/agent_episode_return_mean/default_agent",
        "evaluation/env_runners/env_reset_timer",
        "evaluation/env_runners/env_step_timer",
        "evaluation/env_runners/env_to_module_sum_episodes_length_in",
        "evaluation/env_runners/env_to_module_sum_episodes_length_out",
        "evaluation/env_runners/episode_duration_sec_mean",
        "evaluation/env_runners/episode_len_max",
        "evaluation/env_runners/episode_len_mean",
        "evaluation/env_runners/episode_len_min",
        "evaluation/env_runners/episode_return_max",
        "evaluation/env_runners/episode_return_mean",
        "evaluation/env_runners/episode_return_min",
        "evaluation/env_runners/module_episode_return_mean/default_policy",
        "evaluation/env_runners/num_agent_steps_sampled/default_agent",
        "evaluation/env_runners/num_agent_steps_sampled_lifetime/default_agent",
        "evaluation/env_runners/num_env_steps_sampled",
        "evaluation/env_runners/num_env_steps_sampled_lifetime",
        "evaluation/env_runners/num_episodes",
        "evaluation/env_runners/num_episodes_lifetime",
        "evaluation/env_runners/num_module_steps_sampled/default_policy",
        "evaluation/env_runners/num_module_steps_sampled_lifetime/default_policy",
        "evaluation/env_runners/rlmodule_inference_timer",
        "evaluation/env_runners/sample",
        "evaluation/env_runners/weights_seq_no",
        "evaluation/num_env_runners_dropped_lifetime",
        "evaluation/num_healthy_workers",
        "evaluation/num_remote_worker_restarts",
    }
)

RAYTRAIN_METRICS = ("raytrain/episodes_in_window", "raytrain/episodes_total")


def known_metrics(return_window: int, evaluation: bool) -> set[str]:
    """Every metric name a run with this return window (and evaluation on or off) reports."""
    names = set(TRAIN_METRICS) | set(RAYTRAIN_METRICS) | {f"raytrain/episode_return_mean_{return_window}"}
    if evaluation:
        names |= EVALUATION_METRICS
    return names

COUNTERS = frozenset(
    {"training_iteration", "iterations_since_restore", "time_total_s", "time_since_restore", "raytrain/episodes_total"}
)
"""Metrics that count up from zero as a run goes on, besides RLlib's `..._lifetime` counters."""


def counts_from_zero(metric: str) -> bool:
    """Whether `metric` counts up from zero (iterations, seconds, env steps, episodes): its share of a stop
    threshold is how far the run has got. A return or a loss starts wherever the first policy puts it."""
    return metric in COUNTERS or any(part.endswith("_lifetime") for part in metric.split("/"))


def met_stop(metrics: dict[str, Any], stop: dict[str, float]) -> str | None:
    """The first stop key whose threshold `metrics` meet, else None."""
    for key, threshold in stop.items():
        value = metrics.get(key)
        if isinstance(value, (int, float)) and not (isinstance(value, float) and math.isnan(value)):
            if value >= threshold:
                return key
    return None


def stop_reached(metrics: dict[str, Any], stop: dict[str, float]) -> str | None:
    """`stop criterion KEY >= THRESHOLD reached (VALUE)` for the first criterion `metrics` meet, else None."""
    key = met_stop(metrics, stop)
    return None if key is None else f"stop criterion {key} >= {stop[key]:g} reached ({metrics[key]:g})"


class StopProgress:
    """How far a run has got to each stop criterion, in percent, for the progress line.

    A counter's share of its threshold; any other metric (a return, which is often negative: Pendulum's
    start near -1,200 and stops at -300) by how much of the gap between its first value in this process
    and the threshold it has closed. Stop criteria are `>=`, so a run moves up towards them.
    """

    def __init__(self, first_row: dict[str, Any] | None = None) -> None:
        """`first_row`: the run's first iteration, where it continues (a resume) from an earlier process."""
        self.first: dict[str, float] = {
            k: float(v) for k, v in (first_row or {}).items() if isinstance(v, (int, float)) and not math.isnan(v)
        }

    def percent(self, metric: str, value: Any, threshold: float) -> float | None:
        """0 to 100, or None where nothing sensible can be said (not reported yet)."""
        if not isinstance(value, (int, float)) or math.isnan(value):
            return None
        if value >= threshold:
            return 100.0
        if counts_from_zero(metric) and threshold > 0:
            start = 0.0
        else:
            start = self.first.setdefault(metric, value)
        if threshold <= start:  # only when the first value was already past it, which stops the run
            return 100.0
        return max(0.0, min(100.0, 100 * (value - start) / (threshold - start)))

"""raytrain's RLlib callbacks: a run whose env runners keep failing stops with why, instead of training on nothing.

RLlib (restart_failed_env_runners, its default) restarts an env runner whose env raises and trains on without
it: an iteration per sample_timeout_s with 0 env steps, forever under a stop on return or env steps. Seen with
`raytrain train` on an env that raises in step() with one env runner: before, 0 steps per iteration until the
stop; now exit 1 after two such iterations (70 s with sample_timeout_s 2, RLlib's health probe taking the rest).
The end-to-end run takes a minute of RLlib's restart probing, so these calls feed the callback the results
RLlib reports (the keys as Ray 2.60 fills them) on a real PPOConfig.
"""

from types import SimpleNamespace

import pytest
from ray.rllib.algorithms.ppo import PPOConfig

from raytrain.errors import TrainError
from raytrain.rllib.callbacks import EMPTY_ITERATIONS, RaytrainCallbacks


def _algorithm(env_runners: int):
    """What on_train_result reads of an Algorithm: its config."""
    return SimpleNamespace(config=PPOConfig().env_runners(num_env_runners=env_runners, sample_timeout_s=2.0))


def _result(sampled: int) -> dict:
    # Ray 2.60 leaves num_env_steps_sampled out of env_runners when no env runner returned a sample.
    return {"env_runners": {"num_env_steps_sampled": sampled} if sampled else {}}


def test_iterations_in_a_row_without_a_sample_stop_the_run_with_why():
    callbacks, algorithm = RaytrainCallbacks(), _algorithm(1)
    for _ in range(EMPTY_ITERATIONS - 1):
        callbacks.on_train_result(algorithm=algorithm, result=_result(0))
    with pytest.raises(TrainError) as caught:
        callbacks.on_train_result(algorithm=algorithm, result=_result(0))
    assert str(caught.value).startswith(
        f"no env runner returned a sample in {EMPTY_ITERATIONS} iterations in a row (each waited sample_timeout_s, 2 s)"
    )
    assert "(SingleAgentEnvRunner pid=...)" in str(caught.value)


def test_one_empty_iteration_between_good_ones_is_a_restart_not_a_failure():
    """A node that died with the env runners: RLlib restarts them elsewhere and the next iteration samples."""
    callbacks, algorithm = RaytrainCallbacks(), _algorithm(2)
    for sampled in [4000, 0, 4000, 0, 4000] + [0] * (EMPTY_ITERATIONS - 1):
        callbacks.on_train_result(algorithm=algorithm, result=_result(sampled))
    assert callbacks.empty_iterations == EMPTY_ITERATIONS - 1


def test_without_env_runners_the_env_errors_arrive_as_they_are():
    """The env runs in the main process, whose errors RLlib raises: nothing to watch."""
    callbacks, algorithm = RaytrainCallbacks(), _algorithm(0)
    for _ in range(EMPTY_ITERATIONS + 1):
        callbacks.on_train_result(algorithm=algorithm, result=_result(0))

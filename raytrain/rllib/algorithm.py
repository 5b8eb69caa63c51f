"""An RLlib Algorithm built in this process (`raytrain train`, `raytrain eval`), leaving nothing in ~/ray_results.

An Algorithm is a Tune Trainable. Built outside Tune it has no storage, and `Trainable.__init__` makes a
scratch folder for it, `~/ray_results/<date>_<time><random>/` (and `~/ray_results` itself when missing),
with `tempfile.mkdtemp`. Nothing of RLlib's writes into it unless offline output is configured (raytrain's
runs record into their own run folder), and neither RLlib nor Ray removes it: every `raytrain train` and
`raytrain eval` left an empty folder in the user's home, a build that failed too ("a run that cannot start
writes nothing").

    with algorithm(build_ppo_config(cfg)) as algo:   # built; stopped and its scratch folder removed at the end
        algo.train()

The scratch folder, and `~/ray_results` when this build made it, are removed when the Algorithm stops (or
its build fails), and only while they are empty: anything written there stays.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ray.rllib.algorithms.algorithm import Algorithm
    from ray.rllib.algorithms.algorithm_config import AlgorithmConfig


@contextmanager
def failed_env_runners() -> Iterator[list[str]]:
    """Why env runners failed to start while an Algorithm builds, from RLlib's own log of it.

    RLlib restarts failed env runners by default, so a build logs an env runner that could not start (an
    env whose constructor raises) and goes on without it; with none left, the build then fails somewhere
    unrelated (`IndexError: list index out of range` while asking the env runners for their spaces). The
    list this yields gets the last line of each logged error, its exception, in order.
    """
    import logging

    found: list[str] = []

    class Catch(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            text = record.getMessage()
            if text.startswith(FAILED_ENV_RUNNER):
                lines = [line.strip() for line in ANSI.sub("", text).splitlines() if line.strip()]
                found.append(lines[-1] if lines else text)

    logger = logging.getLogger("ray.rllib.env.env_runner_group")
    handler = Catch(logging.ERROR)
    logger.addHandler(handler)
    try:
        yield found
    finally:
        logger.removeHandler(handler)


FAILED_ENV_RUNNER = "Validation of EnvRunner failed!"
"""How RLlib 2.60's EnvRunnerGroup logs an env runner that could not start (`add_workers`)."""
ANSI = re.compile(r"\x1b\[[0-9;]*m")


@contextmanager
def building() -> Iterator[None]:
    """Around RLlib's build of an Algorithm (here, and in a trial's setup), which starts its actors.

    Ray's native notes about those actors go to the log (`native_lines_to_log`), and a build that fails after
    env runners could not start raises why they could not, instead of what RLlib failed on after them.
    """
    from raytrain.errors import TrainError
    from raytrain.quiet import native_lines_to_log

    with native_lines_to_log(), failed_env_runners() as failures:
        try:
            yield
        except Exception as exc:
            if not failures:
                raise
            raise TrainError(
                f"the env runners could not start, so RLlib could not build the algorithm: {failures[-1]} (the "
                "env's traceback is printed with the prefix `(SingleAgentEnvRunner pid=...)`)"
            ) from exc


@contextmanager
def algorithm(config: AlgorithmConfig) -> Iterator[Algorithm]:
    """Build the Algorithm of `config`; stop it on leaving (its utilisation monitor stops at once:
    `prompt_monitor`) unless the local Ray this process started is lost, then remove the scratch folder Tune made
    for it (`remove_scratch_folders` does that for a process that ends at once instead)."""
    from ray.train.constants import DEFAULT_STORAGE_PATH

    from raytrain.ray_session import local_ray_core_lost, local_ray_lost
    from raytrain.rllib.monitor import prompt_monitor

    root = Path(DEFAULT_STORAGE_PATH)
    made_root = not root.exists()
    scratch: Path | None = None
    try:
        try:
            with building():
                algo = config.build_algo()
            hold_no_put_objects(algo)
            prompt_monitor(algo)
        except BaseException as exc:
            scratch = _scratch_of_failed_build(exc)
            raise
        scratch = Path(algo.logdir)
        _unstopped[scratch] = made_root
        try:
            yield algo
        finally:  # its stop talks to a raylet that is gone, and Ray ends the process (no word)
            if not (local_ray_lost() or local_ray_core_lost()):
                algo.stop()
    finally:
        if scratch is not None:
            _unstopped.pop(scratch, None)
        _remove_scratch(scratch, made_root)


_unstopped: dict[Path, bool] = {}
"""The scratch folders of the Algorithms `algorithm` built and has not left yet: whether it made ~/ray_results."""


def remove_scratch_folders() -> None:
    """For a process that ends at once (`os._exit`) with its Algorithms not stopped, their local Ray lost: remove
    the scratch folders Tune made for them, as `algorithm` does when it leaves one."""
    while _unstopped:
        _remove_scratch(*_unstopped.popitem())


def _remove_scratch(scratch: Path | None, made_root: bool) -> None:
    from ray.train.constants import DEFAULT_STORAGE_PATH

    root = Path(DEFAULT_STORAGE_PATH)
    if scratch is not None and scratch.parent == root:
        _remove_if_empty(scratch)
    if made_root:
        _remove_if_empty(root)


def hold_no_put_objects(algo: Algorithm) -> None:
    """Keep `algo`'s driver clear of the node's object store where RLlib needs none of it: the config RLlib's
    env runner groups put there for the algorithm's life (put once to start, and restart, their env runners; each
    group keeps it by value instead), and the weights they put there at every weight sync, which a group with no
    remote env runners (its one env runner is the driver's own) hands to that env runner directly instead.

    A driver that owns an object in the store of a node that dies is ended by Ray's core worker, exit 1 with no
    word (it tries to recover the object, and its connection to that store is gone): that is how `train` lost a
    SIGTERM sent to every process of the command (systemd, Slurm), which stops the local raylet with the driver,
    in 4 of 16 runs of its test. A driver that puts an object once that store is gone is ended the same way
    ("The connection to the plasma store is failed"): RLlib puts the weights at every iteration, so a raylet
    that stopped a moment before the driver's own SIGTERM arrived ended the driver in the next iteration's
    sync, before its handler could save. With neither, the driver saves its checkpoint and exits as it says.
    """
    import ray

    for group in (getattr(algo, "env_runner_group", None), getattr(algo, "eval_env_runner_group", None)):
        if group is None:
            continue
        if isinstance(getattr(group, "_remote_config_obj_ref", None), ray.ObjectRef):
            # passed by value from now on; RLlib passes it to each env runner it starts
            group._remote_config_obj_ref = group._remote_config  # noqa: SLF001
        group.sync_weights = _sync_weights_putting_nothing_alone(group)


def _sync_weights_putting_nothing_alone(group: Any) -> Any:
    """`group.sync_weights` (RLlib's `EnvRunnerGroup`, Ray 2.60) that, while the group has no remote env runner,
    gives the learners' weights to its local env runner as RLlib's own does, without first putting them in the
    object store for remote env runners there are none of. Everything else goes to RLlib's method."""
    from ray.rllib.core import COMPONENT_LEARNER, COMPONENT_RL_MODULE
    from ray.rllib.core.learner.learner_group import LearnerGroup
    from ray.rllib.utils.metrics import WEIGHTS_SEQ_NO

    rllib_sync_weights = group.sync_weights

    def sync_weights(
        policies: Any = None,
        from_worker_or_learner_group: Any = None,
        to_worker_indices: Any = None,
        global_vars: Any = None,
        timeout_seconds: float | None = 0.0,
        inference_only: bool | None = False,
    ) -> None:
        source, local = from_worker_or_learner_group, group.local_env_runner
        if (
            group.num_remote_workers()
            or local is None
            or not isinstance(source, LearnerGroup)
            or not group._remote_config.enable_env_runner_and_connector_v2  # noqa: SLF001
        ):
            return rllib_sync_weights(
                policies=policies,
                from_worker_or_learner_group=source,
                to_worker_indices=to_worker_indices,
                global_vars=global_vars,
                timeout_seconds=timeout_seconds,
                inference_only=inference_only,
            )
        modules = [f"{COMPONENT_RL_MODULE}/{policy}" for policy in policies] if policies is not None else [COMPONENT_RL_MODULE]
        state = source.get_state(
            components=[f"{COMPONENT_LEARNER}/{module}" for module in modules], inference_only=inference_only
        )[COMPONENT_LEARNER]
        # as RLlib's: the module's weights and their sequence number, nothing else
        local.set_state({key: value for key, value in state.items() if key in (COMPONENT_RL_MODULE, WEIGHTS_SEQ_NO)})
        if global_vars is not None:
            local.set_global_vars(global_vars)
        return None

    return sync_weights


def _scratch_of_failed_build(exc: BaseException) -> Path | None:
    """The scratch folder of a Trainable whose construction raised `exc`, or the error `exc` was raised
    from (`building`'s): its frames hold the Trainable as `self`."""
    from ray.tune import Trainable

    for error in (exc, exc.__cause__):
        tb = error.__traceback__ if error is not None else None
        while tb is not None:
            obj = tb.tb_frame.f_locals.get("self")
            if isinstance(obj, Trainable):
                logdir = getattr(obj, "_logdir", None)  # None until Trainable.__init__ has made it
                if logdir:
                    return Path(logdir)
            tb = tb.tb_next
    return None


def _remove_if_empty(folder: Path) -> None:
    try:
        os.rmdir(folder)  # refuses a folder that is not empty
    except OSError:
        pass

"""The `raytrain train` loop: build the PPO Algorithm, iterate, record, checkpoint, stop.

The loop calls `Algorithm.train()` directly (no Tune) so a single run starts fast and adds nothing
per iteration; sweeps go through Tune (raytrain.tune).
"""

from __future__ import annotations

import errno
import json
import math
import os
import shutil
import socket
import time
import traceback
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from raytrain.config.schema import RaytrainConfig
from raytrain.config.source import Source
from raytrain.errors import ConfigError, ConfigIssue, TrainError
from raytrain.interrupts import held
from raytrain.metrics import StopProgress, stop_reached
from raytrain.ray_session import local_ray_core_lost
from raytrain.runs import STATE_FILE, MetricsWriter, RunFolder, absolute, flatten, read_state


@dataclass
class IterationReport:
    """What the progress display shows after each iteration."""

    iteration: int
    metrics: dict[str, Any]
    steps_per_s: float
    stop_progress: dict[str, float | None]
    """stop key -> how far the run has got to it, 0 to 100 (`StopProgress`); None before it is reported."""
    checkpoint: Path | None = None


@dataclass
class TrainOutcome:
    """How a run ended."""

    run_dir: Path
    iteration: int
    reason: str
    """`stop criterion ...`, `interrupted`, ..."""
    last_checkpoint: Path | None
    final_metrics: dict[str, Any] = field(default_factory=dict)
    ray_lost: list[str] = field(default_factory=list)
    """What ended of the local Ray under the run (`RayLost`), which then ended before its stop or with it."""


RAY_LOST = "local Ray stopped"
"""The reason of a run whose local Ray lost its GCS or raylet under it (`RayLost`)."""


class RayLost(Exception):
    """RayLost(ended): the local Ray this process started lost its GCS or raylet (`ended`: what ended of it, as
    `local_ray_core_lost` names them) while the run trained: `ray stop` on the machine, the OOM killer, a
    signal to Ray's processes alone. The run trained on without it (RLlib falls back to the driver's own env
    runner when the remote ones die), until Ray's core worker ended the process 60 s after its GCS was gone ("Failed
    to connect to GCS within 60 seconds", exit 1): what came after the last periodic checkpoint was lost, and
    run.json still said `running`."""


def restore(algo: Any, checkpoint: Path, instead: str) -> None:
    """RLlib's restore of `checkpoint` into `algo`; what fails is said with the checkpoint and `instead` (what to do).

    Raises:
        TrainError: the restore failed: a damaged file (cut short by a full disk or a copy) was Python's own error
            (`UnpicklingError: pickle data was truncated`), naming no checkpoint.
    """
    try:
        algo.restore_from_path(str(checkpoint))
    except Exception as exc:
        raise TrainError(f"cannot restore {checkpoint}: {type(exc).__name__}: {exc}; a file of it may be damaged (cut "
                         f"short by a full disk or a copy): {instead}") from exc


def trial_bundles(cfg: RaytrainConfig) -> list[dict[str, float]]:
    """What RLlib asks Ray for (its defaults included, e.g. PPO's 2 env runners when none are set): the main
    process's bundle first, then one per env runner, remote learner and evaluation runner."""
    from ray.rllib.algorithms.ppo import PPO
    from ray.tune import PlacementGroupFactory

    from raytrain.rllib.translate import build_ppo_config

    # RaytrainPPO (a sweep's trainable) asks for exactly this: it only turns its trial config into this PPOConfig.
    try:
        request = PPO.default_resource_request(build_ppo_config(cfg))
    except ValueError as exc:
        # Ray's PlacementGroupFactory refuses a main bundle that reserves nothing when no actor bundle
        # follows (no CPU for the main process and its learner, no env runner): that is the one bundle.
        if "empty head and zero worker bundles" in str(exc):
            return [{}]
        raise
    assert isinstance(request, PlacementGroupFactory)  # Algorithm annotates Resources too; it returns only this
    return list(request.bundles)


TRAIN_ACTORS = "the config's actors (env runners, learners, evaluation runners)"
TRIAL_ACTORS = "each trial's actors (main process and learner, env runners)"


def cpu_field(cfg: RaytrainConfig) -> tuple[str, str]:
    """The field to lower when the CPUs do not suffice: the count of the actors that reserve the most CPUs
    (env runners on a tie), else the main process's; and a note when it is unset (RLlib's default applies)."""
    groups = _actor_bundles(cfg)
    cpus = {key: sum(b.get("CPU", 0.0) for b in bundles) for key, bundles in groups.items() if key != "main"}
    key = max(cpus, key=lambda k: cpus[k])  # the first of the largest: env runners on a tie
    if not cpus[key]:
        return "resources.num_cpus_for_main_process", ""
    if key == "env_runners.num_env_runners" and cfg.env_runners.num_env_runners is None:
        return key, f" (unset: RLlib's default is {len(groups[key])})"
    return key, ""


def _actor_bundles(cfg: RaytrainConfig) -> dict[str, list[dict[str, float]]]:
    """`trial_bundles(cfg)` by kind of actor, each under the field that counts those actors (env runners
    first), and the main process's under `main`."""
    from raytrain.rllib.translate import build_ppo_config

    config = build_ppo_config(cfg)
    bundles = trial_bundles(cfg)
    # RLlib's order: the main process, the env runners, the evaluation env runners, the remote learners.
    runners, learners = config.num_env_runners, config.num_learners
    end = len(bundles) - learners
    return {"env_runners.num_env_runners": bundles[1:1 + runners], "learners.num_learners": bundles[end:],
            "evaluation.evaluation_num_env_runners": bundles[1 + runners:end], "main": bundles[:1]}


def connect_for_build(address: str | None, on_connected: Callable[[], None] | None = None) -> str:
    """`connect_ray(address)`, with what building an Algorithm will import (seconds) imported while Ray starts.
    `on_connected` runs as soon as Ray is connected, before the wait for those imports: `ray.init` installs a
    SIGTERM handler of its own (a native stack dump, exit 15), which the command's replaces there."""
    from concurrent.futures import ThreadPoolExecutor

    from raytrain.ray_session import connect_ray

    with ThreadPoolExecutor(max_workers=1) as pool:
        preloaded = pool.submit(preload_for_build)
        where = connect_ray(address)
        if on_connected is not None:
            on_connected()
        preloaded.result()
    return where


def preload_for_build() -> None:
    """Import what building the Algorithm will import, so that it can be done while Ray starts.

    The learner's optimizer imports TorchDynamo, and with it Inductor, when it is created (torch 2.13 wraps
    `Optimizer.__init__` in `torch._disable_dynamo`); with a seed, RLlib's `torch.use_deterministic_algorithms
    (True)` imports `torch._inductor.config` even before that. About 1 s of imports in the middle of the build,
    with or without a seed; done here, in parallel with `ray.init()`, they cost the build nothing.
    """
    import torch._dynamo  # noqa: F401
    import torch._inductor.config  # noqa: F401


@dataclass(frozen=True)
class RayCpus:
    """A Ray's CPUs, as the checks before it starts describe them."""

    name: str
    """How the error names it: `a local Ray on this machine`, `the job's Ray (3 nodes of 2 CPUs)`."""
    total: float
    per_node: float | None = None
    """The CPUs of each node, where there are several (a placement group's bundle must fit on one)."""
    more: str = "join a cluster that has them (--address, --cluster)"
    """What to do instead of lowering the config."""
    gpus: float | Callable[[], float] | None = None
    """Its GPUs (a function counts them when a config asks for any: it takes a moment); None: not known."""
    gpus_per_node: float | None = None
    """The GPUs of each node, where there are several."""
    driver_gpus: float | Callable[[], float] | None = None
    """The GPUs of the machine `train`'s driver runs on, where its local learner (no remote learners) trains."""
    more_gpus: str | None = None
    """What to do instead of lowering the config's GPUs (default: `more`)."""
    custom: dict[str, float] = field(default_factory=dict)
    """Its custom resources in total (a node's `resources:` in a cluster file, `ray start --resources`): a
    local Ray or a Slurm job's Ray has none. Ray's own, named with a `:` (`node:<ip>`, `accelerator_type:A100`),
    are known only where `live`."""
    custom_per_node: dict[str, float] | None = None
    """The most of each that one node has, where there are several nodes."""
    nodes: int = 1
    """How many nodes (a local Ray is one)."""
    live: bool = False
    """Described by a running Ray (`connected_ray`): every resource it has is known."""
    more_custom: str = "join a cluster whose nodes have it (--address, --cluster)"
    """What to do instead of removing or lowering a custom resource."""


def _counted(value: float | Callable[[], float] | None) -> float | None:
    return value() if callable(value) else value


def local_gpus() -> float:
    """This machine's GPUs, counted as `ray.init(num_gpus=None)` counts them (CUDA_VISIBLE_DEVICES included)."""
    from ray._private.accelerators import get_accelerator_manager_for_resource

    manager = get_accelerator_manager_for_resource("GPU")
    return float(manager.get_current_node_num_accelerators()) if manager is not None else 0.0


def local_ray() -> RayCpus:
    """A local Ray started here: its CPUs counted the way `ray.init(num_cpus=None)` counts them (cgroup quota
    and affinity included), and its GPUs when a config asks for any."""
    from ray._private.utils import get_num_cpus

    return RayCpus("a local Ray on this machine", float(get_num_cpus()), gpus=local_gpus, driver_gpus=local_gpus)


def too_few_cpus(bundles: list[dict[str, float]], cfg: RaytrainConfig, where: Callable[[str], str | None], what: str,
                 ray: RayCpus, *, prefix: str = "", advice: str | None = None, group: bool = False) -> ConfigError | None:
    """The error for `bundles` (what `what` reserves under `cfg`) when `ray` cannot place them, for their CPUs,
    then their GPUs (where `ray` knows its GPUs), then their custom resources, else None: Ray would wait for
    them forever, so this is found before it starts. `where` locates a dotted key in the files, where the
    field is written `prefix` + key. `advice` replaces "lower the field, or {ray.more}". `group`: the bundles
    are one placement group (a sweep's trial), placed by `resources.placement_strategy`, whose strict
    strategies need nodes of their own."""
    need = sum(b.get("CPU", 0.0) for b in bundles)
    largest = max((b.get("CPU", 0.0) for b in bundles), default=0.0)
    if need > ray.total or ray.per_node is not None and largest > ray.per_node:
        key, note = cpu_field(cfg)
        if need > ray.total:
            text = f"{what} reserve {need:g} CPUs{note}, but {ray.name} has {ray.total:g}"
        else:
            text = f"one of {what} reserves {largest:g} CPUs, more than one node of {ray.name} has ({ray.per_node:g})"
        return ConfigError([ConfigIssue(where(key), prefix + key,
                                        f"{text}: {advice or f'lower {key} (or the CPUs per actor), or {ray.more}'}")])
    return ((_strict_placement(bundles, cfg, where, what, ray, prefix=prefix, advice=advice) if group else None)
            or _too_few_gpus(bundles, cfg, where, what, ray, prefix=prefix, advice=advice)
            or _missing_custom(bundles, cfg, where, what, ray, prefix=prefix, advice=advice))


def _strict_placement(bundles: list[dict[str, float]], cfg: RaytrainConfig, where: Callable[[str], str | None],
                      what: str, ray: RayCpus, *, prefix: str, advice: str | None) -> ConfigError | None:
    """STRICT_SPREAD needs a node per bundle, STRICT_PACK one node for all: Tune waited forever for a trial's
    placement group that `ray` cannot make ("No available node types can fulfill resource request")."""
    strategy = cfg.resources.placement_strategy
    node = f"{ray.nodes} node{'s' if ray.nodes != 1 else ''}"
    if strategy == "STRICT_SPREAD" and len(bundles) > ray.nodes:
        text = (f"STRICT_SPREAD puts each of the {len(bundles)} bundles of {what} on a node of its own, but "
                f"{ray.name} has {node}")
        instead = "SPREAD (on other nodes where it can)"
    elif strategy == "STRICT_PACK" and ray.per_node is not None and (need := sum(b.get("CPU", 0.0) for b in bundles)) > ray.per_node:
        text = (f"STRICT_PACK puts {what} on one node, {need:g} CPUs, more than one node of {ray.name} has "
                f"({ray.per_node:g})")
        instead = "PACK (on one node where it can)"
    else:
        return None
    key = "resources.placement_strategy"
    return ConfigError([ConfigIssue(where(key), prefix + key, f"{text}: {advice or f'use {instead}, or {ray.more}'}")])


def _too_few_gpus(bundles: list[dict[str, float]], cfg: RaytrainConfig, where: Callable[[str], str | None], what: str,
                  ray: RayCpus, *, prefix: str, advice: str | None) -> ConfigError | None:
    need = sum(b.get("GPU", 0.0) for b in bundles)
    if not need or (gpus := _counted(ray.gpus)) is None:
        return None
    largest = max(b.get("GPU", 0.0) for b in bundles)
    if need > gpus:
        text = f"{what} reserve {need:g} GPU{'s' if need > 1 else ''}, but {ray.name} has {gpus:g}"
    elif ray.gpus_per_node is not None and largest > ray.gpus_per_node:
        text = f"one of {what} reserves {largest:g} GPUs, more than one node of {ray.name} has ({ray.gpus_per_node:g})"
    else:
        return None
    key = gpu_field(cfg)
    return ConfigError([ConfigIssue(where(key), prefix + key, f"{text}: "
                                    f"{advice or f'lower {key} (0 trains on CPUs), or {ray.more_gpus or ray.more}'}")])


def _missing_custom(bundles: list[dict[str, float]], cfg: RaytrainConfig, where: Callable[[str], str | None],
                    what: str, ray: RayCpus, *, prefix: str, advice: str | None) -> ConfigError | None:
    """The error for the first custom resource of `bundles` that `ray` lacks or has too little of: Ray waited
    for it forever ("No available node types can fulfill resource request {'CPU': 1.0, 'lab_sensor': 1.0}")."""
    names = sorted({name for b in bundles for name in b if name not in ("CPU", "GPU")})
    for name in names:
        if ":" in name and not ray.live:
            continue  # Ray's own (`node:<ip>`), known only to a running Ray
        need = sum(b.get(name, 0.0) for b in bundles)
        if not need:
            continue
        largest = max(b.get(name, 0.0) for b in bundles)
        have = ray.custom.get(name, 0.0)
        per_node = (ray.custom_per_node or {}).get(name, 0.0)
        if need > have:
            text = f"{what} reserve {need:g} of the resource '{name}', but {ray.name} has {have:g}"
        elif ray.custom_per_node is not None and largest > per_node:
            text = f"one of {what} reserves {largest:g} of the resource '{name}', more than one node of {ray.name} has ({per_node:g})"
        else:
            continue
        key = custom_field(cfg, name)
        return ConfigError([ConfigIssue(where(key), prefix + key,
                                        f"{text}: {advice or f'remove or lower it, or {ray.more_custom}'}")])
    return None


def custom_field(cfg: RaytrainConfig, name: str) -> str:
    """The field that asks for the custom resource `name`: the env runners' (evaluation runners included) or
    the remote learners', whichever reserve more of it."""
    amounts = {key: sum(b.get(name, 0.0) for b in bundles) for key, bundles in _actor_bundles(cfg).items()}
    runners = amounts["env_runners.num_env_runners"] + amounts["evaluation.evaluation_num_env_runners"]
    section = "env_runners.custom_resources_per_env_runner" if runners >= amounts["learners.num_learners"] \
        else "learners.custom_resources_per_learner"
    return f"{section}.{name}"


def gpu_field(cfg: RaytrainConfig) -> str:
    """The per-actor GPU field of the actors that ask for the most GPUs: the env runners' (evaluation runners
    included) or the learners' (the local learner included)."""
    gpus = {key: sum(b.get("GPU", 0.0) for b in bundles) for key, bundles in _actor_bundles(cfg).items()}
    runners = gpus["env_runners.num_env_runners"] + gpus["evaluation.evaluation_num_env_runners"]
    learners = gpus["learners.num_learners"] + gpus["main"]
    return "env_runners.num_gpus_per_env_runner" if runners > learners else "learners.num_gpus_per_learner"


def local_learner_gpus(cfg: RaytrainConfig, source: Source, ray: RayCpus) -> ConfigError | None:
    """`train` with no remote learner trains on its local learner, in this process (the driver): a GPU it asks
    for must be on the driver's machine, or RLlib fails the build (`local_gpu_idx 0 is not a valid GPU ID`)."""
    if not cfg.learners.num_gpus_per_learner:  # RLlib's default is 0
        return None
    from raytrain.rllib.translate import build_ppo_config

    config = build_ppo_config(cfg)
    if config.num_learners:
        return None
    gpus = _counted(ray.driver_gpus)
    if gpus is None or gpus >= config.num_gpus_per_learner:
        return None
    key = "learners.num_gpus_per_learner"
    return ConfigError([ConfigIssue(source.where(tuple(key.split("."))), key, (
        f"the local learner (learners.num_learners is 0: it trains in the driver's process) asks for "
        f"{config.num_gpus_per_learner:g} GPU{'s' if config.num_gpus_per_learner > 1 else ''}, but the driver's machine "
        f"has {gpus:g}: set {key} to 0 to train on CPUs, "
        "or run the driver where a GPU is"))])


def check_train_cpus(cfg: RaytrainConfig, source: Source, ray: RayCpus | None = None) -> None:
    """Before Ray starts: `ray` (by default a local Ray) must hold the config's actors (`train` runs the
    Algorithm itself in its own process, so only its actors reserve CPUs).

    Raises:
        ConfigError: at the field to lower (exit 2; nothing started or written).
    """
    ray = ray or local_ray()
    error = too_few_cpus(trial_bundles(cfg)[1:], cfg, lambda key: source.where(tuple(key.split("."))), TRAIN_ACTORS,
                         ray) or local_learner_gpus(cfg, source, ray)
    if error is not None:
        raise error


def connected_ray(where: str) -> RayCpus:
    """The Ray this process is connected to, as its live nodes' CPUs describe it. `where` is what
    `connect_ray` returned (`Ray cluster at 10.0.0.1:6379`, `local Ray`, `existing Ray session`).

    A cluster joined with --address or --cluster has CPUs only it knows: they are checked once joined, before
    anything is built or written, as a local Ray's are before it starts.
    """
    import ray

    alive = [node.get("Resources", {}) for node in ray.nodes() if node.get("Alive")]
    cpus = [float(resources.get("CPU", 0.0)) for resources in alive]
    gpus = [float(resources.get("GPU", 0.0)) for resources in alive]
    names = {name for resources in alive for name in resources} - {"CPU", "GPU"}  # counted above
    custom = {name: sum(float(r.get(name, 0.0)) for r in alive) for name in names}
    most = {name: max(float(r.get(name, 0.0)) for r in alive) for name in names}
    count = f"{len(cpus)} node{'s' if len(cpus) != 1 else ''}"
    from raytrain.ray_session import LOCAL_RAY

    described = RayCpus(f"the {where} ({count}, {sum(cpus):g} CPUs)", sum(cpus),
                        per_node=max(cpus) if len(cpus) > 1 else None, gpus=sum(gpus),
                        gpus_per_node=max(gpus) if len(gpus) > 1 else None, driver_gpus=local_gpus, custom=custom,
                        custom_per_node=most if len(alive) > 1 else None, nodes=len(alive), live=True)
    if where == LOCAL_RAY:  # started here: what to do is what it is before a local Ray starts
        return described
    return replace(described, more="add nodes with CPUs to it", more_gpus="add nodes with GPUs to it",
                   more_custom="give it to a node (`resources:` of the node in the cluster file, or `ray start --resources`)")


def _row_iteration(writer: MetricsWriter) -> int:
    """The iteration of the latest metrics row written (0: none)."""
    return int(writer.rows[-1].get("training_iteration", 0)) if writer.rows else 0


class Trainer:
    """Runs one PPO training run into a run folder.

    The folder may be set after `build()`: `raytrain train` creates (or, on resume, records into) the run
    folder only once the Algorithm has been built, so that a run that cannot start writes nothing.
    """

    def __init__(
        self,
        cfg: RaytrainConfig,
        folder: RunFolder | None = None,
        *,
        on_iteration: Callable[[IterationReport], None] | None = None,
        on_message: Callable[[str], None] | None = None,
        on_interrupted: Callable[[TrainOutcome], None] | None = None,
        ray_lost: Callable[[], list[str]] = local_ray_core_lost,
    ) -> None:
        self.cfg = cfg
        self.folder = folder
        self.on_iteration = on_iteration or (lambda report: None)
        self.on_message = on_message or (lambda text: None)
        self.on_interrupted = on_interrupted or (lambda outcome: None)
        """Told how an interrupted run ended, once its checkpoint is written and its status recorded, while the
        interruption is still being handled: before the frames it cut short are let go (with them, Ray's objects
        they held) and before the Algorithm is stopped. A caller whose local Ray is lost ends the process here.
        A run whose local Ray stopped under it (`RayLost`, reason `RAY_LOST`) ends the same way."""
        self.ray_lost = ray_lost
        """Asked after each iteration: the processes of its own that the run's Ray lost, where it cannot go on
        without them (`RayLost`)."""
        self.algo: Any = None  # the RLlib Algorithm, once built
        self._built = ExitStack()  # stops it (and removes its scratch folder) in stop()
        self.time_offset = 0.0
        self._saved: set[Path] = set()  # the checkpoints this trainer wrote
        self._restored_steps: int | None = None  # the env steps of the checkpoint restored

    def build(self, restore_from: Path | None = None) -> None:
        """Build the Algorithm (Ray must be connected) and restore a checkpoint if given."""
        import torch

        from raytrain.rllib.algorithm import algorithm
        from raytrain.rllib.callbacks import find
        from raytrain.rllib.translate import build_ppo_config

        # torch's intra-op threads for the env runner and learner in this process: as many as the process
        # reserves (RLlib's default: 1), as Ray does for its workers. torch would take every core, and on
        # a small machine its threads then contend with Ray's own processes (CartPole: ~20% fewer steps/s).
        torch.set_num_threads(max(1, math.floor(self.cfg.resources.num_cpus_for_main_process or 1)))
        self.algo = self._built.enter_context(algorithm(build_ppo_config(self.cfg)))
        if restore_from is not None:
            restore_from = absolute(restore_from)  # pyarrow refuses a relative path ("URI has empty scheme")
            restore(self.algo, restore_from, "move it out of checkpoints/ to resume from the one before it")
            state = read_state(restore_from)
            self._restored_steps = state.get("num_env_steps_sampled_lifetime")
            # RLlib restores the iteration count; the time and our running-mean window are ours.
            self.algo._time_total = float(state.get("time_total_s", 0.0))
            cb = find(self.algo)
            if cb is not None and "callbacks" in state:
                cb.set_state(state["callbacks"])

    def save(self, iteration: int, metrics: dict[str, Any]) -> Path | None:
        """Write a checkpoint for `iteration` atomically; never overwrite an existing one.

        Everything is written into `checkpoint_<n>.partial/` (RLlib's files, config.yaml, then the state
        file), fsynced, and renamed to `checkpoint_<n>/` (see `RunFolder.commit_checkpoint`).
        """
        from raytrain.rllib.callbacks import find

        folder = self._require_folder()
        target = folder.checkpoint_path(iteration)
        if target.exists():  # never written over; a resume moves those after its checkpoint aside first
            if target not in self._saved:  # else saved already (at its frequency, then at the end)
                self.on_message(f"warning: {target} exists already, and was kept: iteration {iteration}'s checkpoint "
                                "was not saved")
            return None
        tmp = target.with_name(target.name + ".partial")
        if tmp.exists():  # left by a run that was killed while writing it
            shutil.rmtree(tmp)
        tmp.parent.mkdir(parents=True, exist_ok=True)
        self.algo.save_to_path(str(tmp))
        cb = find(self.algo)
        state = {
            "iteration": iteration,
            "time_total_s": metrics.get("time_total_s", 0.0),
            "num_env_steps_sampled_lifetime": metrics.get("num_env_steps_sampled_lifetime"),
            self.cfg.return_metric: metrics.get(self.cfg.return_metric),
            "callbacks": cb.get_state() if cb else {},
        }
        (tmp / "config.yaml").write_text(yaml.safe_dump(self.cfg.to_yaml_dict(), sort_keys=False))
        (tmp / STATE_FILE).write_text(json.dumps(state, indent=2, default=str) + "\n")
        folder.commit_checkpoint(tmp, target)
        self._saved.add(target)
        for removed in folder.prune_checkpoints(self.cfg.experiment.num_to_keep):
            self.on_message(f"removed old checkpoint {removed.name} (experiment.num_to_keep={self.cfg.experiment.num_to_keep})")
        return target

    def _require_folder(self) -> RunFolder:
        if self.folder is None:
            raise TrainError("the run folder must be set (Trainer.folder) before run() or save()")
        return self.folder

    def run(self) -> TrainOutcome:
        """Train until a stop criterion is reached or the user interrupts (Ctrl-C)."""
        if self.algo is None:
            raise TrainError("build() must be called before run()")
        folder = self._require_folder()
        exp = self.cfg.experiment
        writer = MetricsWriter(folder)
        writer.drop_after(self.algo.iteration)
        progress = StopProgress(writer.rows[0] if writer.rows else None)  # a resumed run: from its first iteration
        iteration = self.algo.iteration
        last_checkpoint: Path | None = folder.latest_checkpoint()
        metrics: dict[str, Any] = {}
        prev_steps = self._restored_steps  # where metrics.jsonl has no row (deleted): the steps/s of the first
        if writer.rows:                     # iteration counted every step since the start
            prev_steps = writer.rows[-1].get("num_env_steps_sampled_lifetime")
        folder.set_status(status="running", pid=os.getpid(), host=socket.gethostname(),  # and no longer why an
                          started=time.strftime("%Y-%m-%d %H:%M:%S"), reason=None, error=None)  # earlier part ended
        reason = "unknown"
        result: dict[str, Any] | None = None
        elapsed = 0.0

        def record() -> None:
            """The row of the iteration `result` ended (not cut in two by a signal: `held`)."""
            nonlocal metrics, iteration, prev_steps
            assert result is not None
            with held():
                metrics = flatten(result)
                iteration = int(metrics.get("training_iteration", iteration + 1))
                steps = metrics.get("num_env_steps_sampled_lifetime")
                steps_per_s = ((steps - (prev_steps or 0)) / elapsed) if steps is not None and elapsed > 0 else 0.0
                prev_steps = steps
                metrics["raytrain/env_steps_per_s"] = steps_per_s
                writer.append(metrics)

        try:
            while True:
                start = time.perf_counter()
                result = self.algo.train()
                elapsed = time.perf_counter() - start
                record()
                steps_per_s = metrics["raytrain/env_steps_per_s"]
                reason = stop_reached(metrics, self.cfg.stop) or ""
                checkpoint = None
                if (exp.checkpoint_frequency and iteration % exp.checkpoint_frequency == 0) or (
                    reason and exp.checkpoint_at_end
                ):
                    checkpoint = self.save(iteration, metrics) or checkpoint
                    last_checkpoint = checkpoint or last_checkpoint
                folder.set_status(iteration=iteration, last_checkpoint=str(last_checkpoint or ""))
                self.on_iteration(
                    IterationReport(
                        iteration,
                        metrics,
                        steps_per_s,
                        {k: progress.percent(k, metrics.get(k), v) for k, v in self.cfg.stop.items()},
                        checkpoint,
                    )
                )
                if ended := self.ray_lost():  # a reached stop too: its checkpoint is saved, but nothing of Ray's
                    raise RayLost(ended)      # may be stopped
                if reason:
                    break
            status = "finished"
        except (KeyboardInterrupt, RayLost) as interrupt:
            # The object refs the interrupted iteration held (weights put for the env runners, samples in flight)
            # go now: a driver that owns an object on a node that dies is ended by Ray (`hold_no_put_objects`).
            traceback.clear_frames(interrupt.__traceback__)
            lost = isinstance(interrupt, RayLost)
            if lost:
                status = "finished" if reason else "failed"
                reason = reason or RAY_LOST
            else:
                reason = "interrupted"
                status = "interrupted"
            done = self.algo.iteration
            if _row_iteration(writer) < done:  # the signal came after iteration `done` ended, before its row
                if result is not None and flatten(result).get("training_iteration") == done:
                    record()
                else:  # its result was lost with the signal: a row of the iteration alone keeps the rows whole
                    with held():
                        writer.append({"training_iteration": done,
                                       "time_total_s": float(getattr(self.algo, "_time_total", 0.0))})
                    self.on_message(f"interrupted: iteration {done} ended as the signal came, and its metrics were "
                                    "lost with it: its row in metrics.jsonl holds the iteration only")
            error = {"error": f"{RAY_LOST} under the run: {', '.join(interrupt.args[0])}"} if lost else {}
            if exp.checkpoint_at_end and done > 0:
                iteration = done
                if not lost:
                    self.on_message("interrupted: saving a checkpoint (Ctrl-C again to abandon it)")
                elif status == "failed":  # else its stop was reached, and its checkpoint saved at the end
                    self.on_message(f"{RAY_LOST} under the run: saving a checkpoint")
                metrics.setdefault("time_total_s", getattr(self.algo, "_time_total", 0.0))
                try:
                    saved = self.save(iteration, metrics)
                except Exception as exc:  # with its Ray gone, an Algorithm whose parts ran there cannot save
                    if not lost:
                        raise
                    saved = None
                    error["error"] += f"; the checkpoint of iteration {iteration} could not be saved: {exc}"
                    self.on_message(f"the checkpoint of iteration {iteration} could not be saved: {exc}")
                last_checkpoint = saved or last_checkpoint
            folder.set_status(status=status, reason=reason, iteration=iteration,
                              last_checkpoint=str(last_checkpoint or ""), **error)
            outcome = TrainOutcome(folder.path, iteration, reason, last_checkpoint, metrics,
                                   interrupt.args[0] if lost else [])
            self.on_interrupted(outcome)
            return outcome
        except Exception as exc:
            full = exc.errno if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT) else None
            try:
                folder.set_status(status="failed", error=f"{type(exc).__name__}: {exc}")
            except OSError:
                if full is None:
                    raise
            if full is not None:  # Python's own error named neither the run nor what to do; run.json could not say it either
                latest = folder.latest_checkpoint()
                kept = f"its last complete checkpoint is {latest.name}" if latest else "it has no complete checkpoint yet"
                raise TrainError(
                    f"{os.strerror(full)} in {folder.path}, at iteration {iteration} ({kept}): free space there (or "
                    f"keep fewer checkpoints, experiment.num_to_keep), then `raytrain train --resume {folder.path}`"
                ) from exc
            raise
        folder.set_status(
            status=status, reason=reason, iteration=iteration, last_checkpoint=str(last_checkpoint or "")
        )
        return TrainOutcome(folder.path, iteration, reason, last_checkpoint, metrics)

    def stop(self) -> None:
        self.algo = None
        self._built.close()

"""raytrain's PBT and PB2: a trial pauses at its perturbation point only when another trial needs its room; and how
many trials a cluster holds at once (the concurrency limit raytrain gives Tune beside Optuna)."""

import pickle
import subprocess
import sys

import pytest
from ray.tune.execution.placement_groups import PlacementGroupFactory
from ray.tune.experiment import Trial

from raytrain.tune.schedulers import all_fit, trials_at_once

from ..conftest import ROOT


def trial(status: str, *bundles: dict[str, float]) -> Trial:
    t = Trial("__fake", config={}, placement_group_factory=PlacementGroupFactory(list(bundles)), stub=True)
    t.create_placement_group_factory()  # what Tune does when it adds the trial
    t.set_status(status)
    return t


@pytest.mark.parametrize(("trials", "cluster", "fit"), [
    # The shipped sweep: 4 trials of 0.5 CPU on 2 CPUs (a sum of fractions, exactly at the total).
    ([trial(Trial.RUNNING, {"CPU": 0.5}) for _ in range(3)] + [trial(Trial.PENDING, {"CPU": 0.5})], {"CPU": 2.0}, True),
    ([trial(Trial.RUNNING, {"CPU": 0.1}) for _ in range(10)], {"CPU": 1.0}, True),
    # More trials than slots: PBT shares the cluster by pausing.
    ([trial(Trial.RUNNING, {"CPU": 1.0}) for _ in range(2)] + [trial(Trial.PENDING, {"CPU": 1.0})], {"CPU": 2.0}, False),
    # Finished trials hold nothing.
    ([trial(Trial.TERMINATED, {"CPU": 1.0}), trial(Trial.ERROR, {"CPU": 1.0}), trial(Trial.RUNNING, {"CPU": 1.0}),
      trial(Trial.PAUSED, {"CPU": 1.0})], {"CPU": 2.0}, True),
    # Every bundle of a trial (the main process and its env runners) and every resource counts.
    ([trial(Trial.RUNNING, {"CPU": 1.0}, {"CPU": 1.0}), trial(Trial.PENDING, {"CPU": 1.0})], {"CPU": 2.0}, False),
    ([trial(Trial.RUNNING, {"CPU": 1.0, "GPU": 1.0}), trial(Trial.PENDING, {"CPU": 1.0, "GPU": 1.0})], {"CPU": 4.0, "GPU": 1.0}, False),
    ([trial(Trial.PENDING, {"CPU": 1.0, "GPU": 1.0})], {"CPU": 4.0}, False),
])
def test_all_fit(trials, cluster, fit):
    assert all_fit(trials, cluster) is fit


@pytest.mark.parametrize(("bundles", "cluster", "at_once"), [
    ([{"CPU": 0.5}], {"CPU": 2.0}, 4),  # the shipped Optuna sweep's trials on a local Ray of 2 CPUs
    ([{"CPU": 0.1}], {"CPU": 1.0}, 10),  # a sum of fractions exactly at the total
    ([{"CPU": 1.0}, {"CPU": 1.0}, {"CPU": 1.0}], {"CPU": 8.0}, 2),  # every bundle of a trial counts
    ([{"CPU": 1.0, "GPU": 1.0}], {"CPU": 8.0, "GPU": 2.0}, 2),  # the scarcest resource decides
    ([{"CPU": 1.0}, {"worker": 1.0}], {"CPU": 8.0, "worker": 3.0}, 3),
    ([{"CPU": 4.0}], {"CPU": 2.0}, 1),  # at least one: the sweep's own check refuses a trial that cannot fit
    ([{}], {"CPU": 2.0}, 1),
])
def test_trials_at_once(bundles, cluster, at_once):
    """The concurrency limit raytrain gives Tune beside Optuna when the sweep sets none."""
    assert trials_at_once(bundles, cluster) == at_once


def test_a_pbt_sweeps_checks_import_no_scikit_learn(tmp_path):
    """Tune's PB2 imports scikit-learn and SciPy (about 1.2 s of CPU); a PBT sweep's checks, which run before Ray
    can start, build its scheduler without them. The shipped sweep's dry run, as a user types it."""
    run = subprocess.run([sys.executable, "-X", "importtime", "-m", "raytrain", "tune", str(ROOT / "configs" / "ppo_pbt.yaml"),
                          "--dry-run", "--set", f"checkpoint.storage_path={tmp_path}"],
                         capture_output=True, text=True, timeout=120, check=False)
    assert run.returncode == 0, run.stderr[-2000:]
    imported = {line.rsplit("|", 1)[1].strip() for line in run.stderr.splitlines() if line.startswith("import time:")}
    assert "raytrain.tune.schedulers" in imported  # the checks did build the scheduler
    assert not {name for name in imported if name.split(".")[0] == "sklearn"}


def test_raytrain_pb2_is_made_once_under_its_name():
    """`RaytrainPB2` is made on first use (`schedulers.__getattr__`); a PB2 sweep's `tuner.pkl` names it
    `raytrain.tune.schedulers.RaytrainPB2`, and a resume loads it from there."""
    from ray.tune.schedulers.pb2 import PB2

    from raytrain.tune import schedulers

    cls = schedulers.RaytrainPB2
    assert issubclass(cls, PB2) and schedulers.RaytrainPB2 is cls
    assert (cls.__module__, cls.__qualname__) == ("raytrain.tune.schedulers", "RaytrainPB2")
    assert pickle.loads(pickle.dumps(cls)) is cls
    with pytest.raises(AttributeError):
        schedulers.RaytrainPB3  # noqa: B018


def test_a_clones_copy_of_a_checkpoint_outlives_the_donors_deletion(tmp_path):
    """`keep_for_the_clone`: the donor's checkpoint folder, files and subfolders, copied into the clone's folder as
    hard links (the same inodes: no data copied), readable after the donor deleted its own; made again over an older
    copy of the same name, and that copy given where the donor's is gone."""
    import os
    import shutil

    from raytrain.tune.schedulers import CLONE_PREFIX, keep_for_the_clone

    donor = tmp_path / "trial_a" / "checkpoint_000004"
    (donor / "learner_group").mkdir(parents=True)
    (donor / "learner_group" / "state.pkl").write_bytes(b"weights")
    (donor / "algorithm_state.pkl").write_bytes(b"state")
    clone = tmp_path / "trial_b"
    clone.mkdir()
    (clone / f"{CLONE_PREFIX}a_checkpoint_000004").mkdir()  # an older copy of the same name
    (clone / f"{CLONE_PREFIX}a_checkpoint_000004" / "stale").write_text("x")

    kept = keep_for_the_clone(donor, clone, "a")

    assert kept == clone / f"{CLONE_PREFIX}a_checkpoint_000004"
    assert sorted(p.relative_to(kept).as_posix() for p in kept.rglob("*")) == [
        "algorithm_state.pkl", "learner_group", "learner_group/state.pkl"]
    assert os.stat(kept / "algorithm_state.pkl").st_ino == os.stat(donor / "algorithm_state.pkl").st_ino
    shutil.rmtree(donor)
    assert (kept / "learner_group" / "state.pkl").read_bytes() == b"weights"
    assert keep_for_the_clone(donor, clone, "a") == kept  # the donor's is gone: the copy made of it stands
    assert keep_for_the_clone(donor, clone, "c") is None  # none made: the trial keeps Tune's reference
    assert sorted(p.name for p in clone.iterdir()) == [f"{CLONE_PREFIX}a_checkpoint_000004"]


def test_an_exploit_of_a_checkpoint_its_trial_already_deleted_is_skipped(tmp_path, caplog):
    """PBT recorded the stronger trial's checkpoint at that trial's perturbation point, and the trial deleted it
    (`checkpoint.num_to_keep`) before the weaker one came to clone it: the exploit is skipped, said in Ray's log (the
    experiment's ray.log), and the weaker trial is left as it was: not paused (the controller is never asked), its
    config and checkpoint untouched. Tune paused it and pointed it at the missing folder, and the trial failed."""
    import logging

    from ray.tune import Checkpoint
    from ray.tune.schedulers.pbt import _PBTTrialState

    from raytrain.tune.schedulers import RaytrainPBT

    pbt = RaytrainPBT(time_attr="training_iteration", metric="m", mode="max", perturbation_interval=2,
                      hyperparam_mutations={"lr": [0.1, 0.2]})
    weaker, stronger = trial(Trial.RUNNING, {"CPU": 1.0}), trial(Trial.RUNNING, {"CPU": 1.0})
    weaker.config, stronger.config = {"lr": 0.1}, {"lr": 0.2}
    for t, score in ((weaker, 1.0), (stronger, 2.0)):
        pbt._trial_state[t] = _PBTTrialState(t)
        pbt._trial_state[t].last_score = score
    pbt._trial_state[stronger].last_checkpoint = Checkpoint(str(tmp_path / "stronger" / "checkpoint_000003"))
    before = weaker.checkpoint

    with caplog.at_level(logging.WARNING, logger="ray.tune.schedulers.pbt"):
        pbt._exploit(None, weaker, stronger)  # None: a call to pause the trial would raise

    assert weaker.status == Trial.RUNNING and weaker.config == {"lr": 0.1} and weaker.checkpoint == before
    assert "was deleted (checkpoint.num_to_keep) before trial" in caplog.text and "exploit skipped" in caplog.text


def test_a_trials_folder_is_read_for_clone_copies_only_while_it_may_hold_one(tmp_path, monkeypatch):
    """`_drop_clone_copies` runs on every result of every trial: it reads a trial's folder (a directory listing, over
    NFS on a cluster) the first time (a resumed sweep's scheduler starts afresh, and a copy the stopped run left is
    removed then), and again only after an exploit gave the trial a copy, until that copy is gone. The copy the trial
    restores from next is kept; other copies and a half-made one are removed."""
    import pathlib
    from types import SimpleNamespace

    from ray.tune import Checkpoint

    from raytrain.tune.schedulers import CLONE_PREFIX, RaytrainPBT

    reads = []
    glob = pathlib.Path.glob
    monkeypatch.setattr(pathlib.Path, "glob", lambda self, pattern: reads.append(self.name) or glob(self, pattern))
    pbt = RaytrainPBT(time_attr="training_iteration", metric="m", mode="max", perturbation_interval=2,
                      hyperparam_mutations={"lr": [0.1, 0.2]})
    folder = tmp_path / "trial_b"
    (folder / f"{CLONE_PREFIX}a_checkpoint_000002").mkdir(parents=True)  # left by a run stopped before a resume
    (folder / f".{CLONE_PREFIX}a_checkpoint_000004.partial").mkdir()  # a copy a crash left half made
    (folder / "checkpoint_000001").mkdir()
    manager = SimpleNamespace(_latest_checkpoint_result=SimpleNamespace(
        checkpoint=Checkpoint(str(folder / "checkpoint_000001"))))
    b = SimpleNamespace(trial_id="b", path=str(folder), run_metadata=SimpleNamespace(checkpoint_manager=manager))

    pbt._drop_clone_copies(b)
    assert sorted(p.name for p in folder.iterdir()) == ["checkpoint_000001"]
    read = len(reads)
    assert read > 0
    for _ in range(3):
        pbt._drop_clone_copies(b)
    assert len(reads) == read, "a trial's folder with no copy in it was read again"

    # An exploit gives it a copy (what `_exploit` does after Tune's): its folder is read until the copy is gone.
    copy = folder / f"{CLONE_PREFIX}a_checkpoint_000006"
    copy.mkdir()
    manager._latest_checkpoint_result.checkpoint = Checkpoint(str(copy))
    pbt._without_copies.discard("b")
    pbt._drop_clone_copies(b)
    pbt._drop_clone_copies(b)
    assert copy.is_dir() and len(reads) > read  # it restores from the copy next: kept, and looked at again
    manager._latest_checkpoint_result.checkpoint = Checkpoint(str(folder / "checkpoint_000007"))  # its own, newer
    pbt._drop_clone_copies(b)
    assert not copy.exists()
    read = len(reads)
    pbt._drop_clone_copies(b)
    assert len(reads) == read

"""A run whose local Ray stopped under it (`ray stop`, the OOM killer) saves its checkpoint and ends, saying so.

Before, it trained on for 60 s without its GCS, until Ray's core worker ended the process (exit 1, "Failed to
connect to GCS within 60 seconds"): what came after the last periodic checkpoint was lost, run.json said `running`.
The real thing (a real `raytrain train` whose local Ray is stopped under it) is in tests/integration/test_train.py.
"""

import json

import pytest

from raytrain.config.load import load_config
from raytrain.runs import RunFolder

from .conftest import FakeAlgorithm

LOST = ["raylet ended (SIGTERM)", "its GCS does not answer"]


class _Algorithm(FakeAlgorithm):
    """A fake Algorithm whose saves fail from iteration 3 on (once its Ray is gone) where `fail_save`."""

    def __init__(self, fail_save: bool = False):
        super().__init__()
        self.fail_save = fail_save

    def save_to_path(self, path):
        if self.fail_save and self.iteration >= 3:
            raise RuntimeError("the env runner actor died")
        super().save_to_path(path)


def _trainer(tmp_path, write_yaml, lost_after: int, stop: int = 10, fail_save: bool = False):
    import raytrain.training as training

    cfg = load_config(write_yaml(f"experiment: {{storage_path: {tmp_path}, checkpoint_frequency: 2}}\n"
                                 f"environment: {{env: CartPole-v1}}\nstop: {{training_iteration: {stop}}}\n")).config
    folder = RunFolder.create(str(tmp_path), "t")
    said: list[str] = []
    told: list = []
    trainer = training.Trainer(cfg, folder, on_message=said.append, on_interrupted=told.append,
                               ray_lost=lambda: LOST if trainer.algo.iteration >= lost_after else [])
    trainer.algo = _Algorithm(fail_save)
    return trainer, folder, said, told


def test_a_run_whose_local_ray_stopped_under_it_saves_its_checkpoint_and_ends_failed(tmp_path, write_yaml):
    from raytrain.training import RAY_LOST

    trainer, folder, said, told = _trainer(tmp_path, write_yaml, lost_after=3)
    outcome = trainer.run()
    assert (outcome.reason, outcome.iteration, outcome.ray_lost) == (RAY_LOST, 3, LOST)
    assert told == [outcome]  # the command ends the process there, before anything of Ray's is stopped
    assert sorted(p.name for p in (folder.path / "checkpoints").iterdir()) == ["checkpoint_000002", "checkpoint_000003"]
    assert outcome.last_checkpoint == folder.path / "checkpoints" / "checkpoint_000003"
    rows = [json.loads(line)["training_iteration"] for line in (folder.path / "metrics.jsonl").read_text().splitlines()]
    assert rows == [1, 2, 3]
    status = folder.status()
    assert status["status"] == "failed" and status["reason"] == RAY_LOST and status["iteration"] == 3
    assert status["error"] == "local Ray stopped under the run: raylet ended (SIGTERM), its GCS does not answer"
    assert f"{RAY_LOST} under the run: saving a checkpoint" in said


def test_a_run_whose_stop_was_reached_as_its_local_ray_stopped_is_finished(tmp_path, write_yaml):
    """Its last checkpoint was saved at its stop; it still ends before anything of Ray's is stopped."""
    trainer, folder, said, told = _trainer(tmp_path, write_yaml, lost_after=4, stop=4)
    outcome = trainer.run()
    assert outcome.reason.startswith("stop criterion training_iteration >= 4") and outcome.ray_lost == LOST
    assert told == [outcome]
    assert folder.status()["status"] == "finished"
    assert sorted(p.name for p in (folder.path / "checkpoints").iterdir()) == ["checkpoint_000002", "checkpoint_000004"]
    assert not any("saving a checkpoint" in line for line in said)


def test_a_run_whose_checkpoint_cannot_be_saved_without_its_ray_says_so_and_keeps_the_one_before(tmp_path, write_yaml):
    """Remote env runners or learners: their state went with the Ray."""
    trainer, folder, said, told = _trainer(tmp_path, write_yaml, lost_after=3, fail_save=True)
    outcome = trainer.run()
    assert outcome.last_checkpoint == folder.path / "checkpoints" / "checkpoint_000002" and told == [outcome]
    assert sorted(p.name for p in (folder.path / "checkpoints").iterdir()) == ["checkpoint_000002"]
    assert folder.status()["last_checkpoint"] == str(outcome.last_checkpoint)
    assert folder.status()["error"].endswith("; the checkpoint of iteration 3 could not be saved: the env runner "
                                             "actor died")
    assert "the checkpoint of iteration 3 could not be saved: the env runner actor died" in said


def test_a_resumed_run_no_longer_says_why_an_earlier_part_ended(tmp_path, write_yaml):
    """run.json kept `error` and `reason` of the part before (a lost Ray, a full disk) after the resumed run ran on."""
    trainer, folder, said, told = _trainer(tmp_path, write_yaml, lost_after=3)
    trainer.run()
    assert "error" in folder.status()
    import raytrain.training as training

    resumed = training.Trainer(trainer.cfg, folder, ray_lost=lambda: [])
    resumed.algo = _Algorithm()
    resumed.algo.iteration = 3
    statuses = []
    resumed.on_iteration = lambda report: statuses.append(folder.status())
    resumed.run()
    assert "error" not in statuses[0] and "reason" not in statuses[0] and statuses[0]["status"] == "running"
    final = folder.status()
    assert final["status"] == "finished" and "error" not in final


@pytest.mark.parametrize("reason", ["local Ray stopped", "stop criterion training_iteration >= 4 reached (4)"])
def test_the_command_ends_a_run_whose_local_ray_stopped_saying_what_ended(tmp_path, capsys, monkeypatch, reason):
    import raytrain.cli.train_cmd as train_cmd
    import raytrain.ray_session as ray_session
    from raytrain.training import TrainOutcome

    ended: list = []
    monkeypatch.setattr(train_cmd, "local_ray_lost_to_the_signal", lambda: False)
    monkeypatch.setattr(ray_session, "abandon_local_ray", lambda: ended.append("abandoned"))
    monkeypatch.setattr(train_cmd, "exit_now", lambda code: ended.append(code))
    checkpoint = tmp_path / "checkpoints" / "checkpoint_000004"
    train_cmd._end_at_once_if_local_ray_lost(TrainOutcome(tmp_path, 4, reason, checkpoint, {}, LOST))
    said = " ".join(capsys.readouterr().err.split())
    assert ended == ["abandoned", 1 if reason == "local Ray stopped" else 0]
    assert ("the local Ray this run started stopped under it (raylet ended (SIGTERM), its GCS does not answer: "
            "`ray stop` on this machine") in said
    assert (f"resume with: raytrain train --resume {tmp_path}" in said) is (reason == "local Ray stopped")
    ended.clear()
    train_cmd._end_at_once_if_local_ray_lost(TrainOutcome(tmp_path, 4, "interrupted", checkpoint))  # Ctrl-C: not here
    assert ended == []

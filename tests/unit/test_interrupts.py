"""A signal that comes between an iteration's end and its metrics row: no checkpoint without its row."""

import json
import os
import signal

import pytest

from raytrain.config.load import load_config
from raytrain.interrupts import held, raise_or_hold
from raytrain.runs import RunFolder

from .conftest import FakeAlgorithm


def test_an_interrupt_inside_a_held_block_is_raised_as_it_ends():
    def handler(signum, frame):
        raise_or_hold()

    old = signal.signal(signal.SIGUSR1, handler)
    try:
        done = []
        with pytest.raises(KeyboardInterrupt):
            with held():
                os.kill(os.getpid(), signal.SIGUSR1)
                done.append("the rest of the block")
        assert done == ["the rest of the block"]
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGUSR1)  # outside: at once
            done.append("never")
        assert done == ["the rest of the block"]
        with held():
            pass  # nothing pending: nothing raised
    finally:
        signal.signal(signal.SIGUSR1, old)


class _Algorithm(FakeAlgorithm):
    """A fake Algorithm whose iteration `interrupt_at` is interrupted `where`."""

    def __init__(self, interrupt_at: int, where: str):
        super().__init__()
        self.interrupt_at, self.where = interrupt_at, where

    def train(self):
        if self.iteration + 1 == self.interrupt_at and self.where == "before its result":
            self.iteration += 1
            raise KeyboardInterrupt  # the count went up, the result never came back
        return super().train()


@pytest.mark.parametrize("where", ["before its row", "before its result"])
def test_an_interrupted_run_has_a_row_for_every_checkpoint(tmp_path, monkeypatch, write_yaml, where):
    """CI: a requeued `train --slurm` job resumed from checkpoint_000015, and its metrics went 14, 16: the signal
    had come after iteration 15 ended and before its row was written, and the interrupted run saved it anyway."""
    import raytrain.training as training

    cfg = load_config(write_yaml(f"experiment: {{storage_path: {tmp_path}, checkpoint_frequency: 100}}\n"
                                 "environment: {env: CartPole-v1}\nstop: {training_iteration: 10}\n")).config
    folder = RunFolder.create(str(tmp_path), "t")
    trainer = training.Trainer(cfg, folder, on_message=lambda text: said.append(text))
    said: list[str] = []
    trainer.algo = _Algorithm(3, where)
    if where == "before its row":
        real, calls = training.flatten, []

        def flatten(result):
            calls.append(result["training_iteration"])
            if calls == [1, 2, 3]:
                raise KeyboardInterrupt  # as a signal right after train() returned
            return real(result)

        monkeypatch.setattr(training, "flatten", flatten)
    outcome = trainer.run()
    rows = [json.loads(line)["training_iteration"] for line in (folder.path / "metrics.jsonl").read_text().splitlines()]
    saved = sorted(p.name for p in (folder.path / "checkpoints").iterdir()) if (folder.path / "checkpoints").exists() else []
    assert outcome.reason == "interrupted"
    if where == "before its row":  # the result was at hand: its row written, then its checkpoint
        assert rows == [1, 2, 3] and saved == ["checkpoint_000003"], (rows, saved)
    else:  # the result was lost with the signal: a row of the iteration alone, then its checkpoint
        assert rows == [1, 2, 3] and saved == ["checkpoint_000003"], (rows, saved)
        assert ("interrupted: iteration 3 ended as the signal came, and its metrics were lost with it: its row in "
                "metrics.jsonl holds the iteration only") in said


@pytest.mark.parametrize("saved", [True, False])
def test_an_interrupted_run_offers_a_resume_only_with_a_checkpoint(tmp_path, capsys, saved):
    """Ctrl-C before the first iteration ended said `resume with: ...`, and that resume was then exit 2 (no complete
    checkpoint)."""
    from raytrain.cli.train_cmd import _say_outcome
    from raytrain.training import TrainOutcome

    checkpoint = tmp_path / "checkpoints" / "checkpoint_000003" if saved else None
    _say_outcome(TrainOutcome(tmp_path, 3 if saved else 0, "interrupted", checkpoint))
    said = " ".join(capsys.readouterr().err.split())
    assert (f"resume with: raytrain train --resume {tmp_path}" in said) is saved
    assert ("no checkpoint was saved, so there is nothing to resume: start the run again" in said) is not saved

"""raytrain.rllib.algorithm: the scratch folder Tune makes for an Algorithm built outside Tune is removed."""

from pathlib import Path

import pytest
from ray.tune import Trainable

from raytrain.rllib.algorithm import algorithm


class Stub(Trainable):
    """A real Trainable (its scratch folder made by Tune's own code); `fail` raises in setup, as a build can."""

    fail = False

    def setup(self, config):
        if self.fail:
            raise RuntimeError("setup failed")

    def step(self):
        return {}


class StubConfig:
    def __init__(self, fail=False, write=False):
        self.fail, self.write = fail, write

    def build_algo(self):
        Stub.fail = self.fail
        algo = Stub()
        if self.write:
            (Path(algo.logdir) / "kept.txt").write_text("something RLlib wrote")
        return algo


def test_scratch_and_the_root_it_made_are_removed(ray_results):
    with algorithm(StubConfig()) as algo:
        assert Path(algo.logdir).parent == ray_results and Path(algo.logdir).is_dir()
    assert not ray_results.exists()


def test_an_existing_root_and_its_other_folders_stay(ray_results):
    (ray_results / "someone_elses").mkdir(parents=True)
    with algorithm(StubConfig()):
        pass
    assert sorted(p.name for p in ray_results.iterdir()) == ["someone_elses"]


def test_a_failed_build_leaves_nothing(ray_results):
    with pytest.raises(RuntimeError, match="setup failed"), algorithm(StubConfig(fail=True)):
        pass
    assert not ray_results.exists()


def test_a_scratch_folder_with_something_in_it_stays(ray_results):
    with algorithm(StubConfig(write=True)) as algo:
        logdir = Path(algo.logdir)
    assert (logdir / "kept.txt").read_text() == "something RLlib wrote"

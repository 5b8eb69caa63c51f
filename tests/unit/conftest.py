"""Fixtures shared by the unit tests."""

import pytest


@pytest.fixture
def ray_results(tmp_path, monkeypatch):
    """~/ray_results, where Tune makes a Trainable's scratch folder, in tmp_path instead (not made yet)."""
    root = tmp_path / "ray_results"
    monkeypatch.setattr("ray.train.constants.DEFAULT_STORAGE_PATH", str(root))
    monkeypatch.setattr("ray.tune.trainable.trainable.DEFAULT_STORAGE_PATH", str(root))
    return root

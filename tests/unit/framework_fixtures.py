"""Fixtures shared by the framework's unit test files (test_framework.py, test_framework_compat.py).

Imported by name into each of those files, so they apply there and nowhere else.
"""

import sys
from collections.abc import Iterator

import pytest

from raytrain.framework import Task


@pytest.fixture(autouse=True, name="_no_ray_runtime")
def no_ray_runtime() -> Iterator[None]:
    """Fails a test that started Ray: these tests run without a Ray runtime."""
    # (in a whole-suite run the integration tests' session Ray may already be up: only a new one counts)
    before = sys.modules.get("ray")
    was_up = before is not None and before.is_initialized()
    yield
    ray = sys.modules.get("ray")
    assert was_up or ray is None or not ray.is_initialized(), "a unit test started Ray"


@pytest.fixture(name="t")
def started_task() -> Iterator[Task]:
    """A fresh, started, explicit Task; stopped afterwards."""
    task = Task()
    task.start()
    yield task
    task.stop()

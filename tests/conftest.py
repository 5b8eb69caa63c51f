import os
from pathlib import Path

import pytest
from hypothesis import settings

# Property tests check what a value does, never how fast: Hypothesis's default 200 ms deadline per example failed
# one under load on these shared 2-core machines (test_a_node_address_is_judged_by_meaning, once).
settings.register_profile("raytrain", deadline=None)
settings.load_profile("raytrain")

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "unit" / "data"


def pytest_configure(config) -> None:
    """Under pytest-xdist (`make test`), before any worker starts: Ray's token file, when this machine has none yet.

    Each worker starts a local Ray of its own, and `ray.init()` writes ~/.ray/auth_token when it is missing,
    without a lock. Two first starts at once could each write a token of their own, leaving one Ray with a token
    that its drivers (the raytrain commands the tests start) no longer read. So the controller writes it once."""
    if hasattr(config, "workerinput") or not getattr(config.option, "numprocesses", None):
        return
    from ray._private.authentication.authentication_token_setup import _get_default_token_path, generate_and_save_token

    if not _get_default_token_path().exists():
        generate_and_save_token()


LAB_MODULES = frozenset(f"tests/integration/{name}.py" for name in ("test_cluster", "test_dashboard", "test_lab", "test_nfs", "test_slurm"))
"""The modules that bring up a namespaced lab (hosts, an NFS server, Slurm nodes): tests/unit/test_suite_layout.py
checks that this names every module that imports one."""


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """`make test`'s `-n 2 --dist loadscope`: pytest-xdist's own scheduling by module, except that the lab modules
    are one unit, run one after another in one worker while the other runs the rest. Two labs at once would
    install the same Debian packages at once on a fresh machine (the second fails on dpkg's lock) and fill the
    same caches under ~/.cache/raytrain-tests.

    (`xdist_group` marks cannot do this here: pytest-xdist 3.8's loadgroup renames `item._nodeid`, which
    pytest 9 no longer reads, so every test was its own unit.)"""
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class LabsTogether(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return "labs" if module in LAB_MODULES else super()._split_scope(nodeid)

    return LabsTogether(config, log)


@pytest.fixture
def data_dir() -> Path:
    return DATA


@pytest.fixture
def write_yaml(tmp_path):
    """Write a YAML text to a temp file and return its path."""

    def write(text: str, name: str = "config.yaml") -> Path:
        path = tmp_path / name
        path.write_text(text)
        return path

    return write


@pytest.fixture
def ray_results(tmp_path, monkeypatch):
    """~/ray_results, where Tune makes a Trainable's scratch folder (an Algorithm built outside Tune has one), in
    tmp_path instead (not made yet): a test that checks none is left sees only its own, not those of the tests
    that the other worker of `pytest -n 2` runs at the same moment."""
    root = tmp_path / "ray_results"
    monkeypatch.setattr("ray.train.constants.DEFAULT_STORAGE_PATH", str(root))
    monkeypatch.setattr("ray.tune.trainable.trainable.DEFAULT_STORAGE_PATH", str(root))
    return root


@pytest.fixture(autouse=True)
def _no_debug(monkeypatch):
    monkeypatch.delenv("RAYTRAIN_DEBUG", raising=False)
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")

"""The README's YAML reference is generated from the schema and must be current."""

import importlib.util

from ..conftest import ROOT


def test_readme_reference_is_current():
    spec = importlib.util.spec_from_file_location("gen_reference", ROOT / "scripts" / "gen_reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    readme = (ROOT / "README.md").read_text()
    assert module.render(readme) == readme, "README reference is stale: run `make reference`"


def test_readme_quickstart_commands_exist():
    readme = (ROOT / "README.md").read_text()
    makefile = (ROOT / "Makefile").read_text()
    assert "make tune" in readme and "make test" in readme
    assert "\ntune: install\n\t\"$(PY)\" -m raytrain tune configs/ppo_pbt.yaml" in makefile
    ci = (ROOT / ".ci" / "run").read_text()
    assert "make test" in ci and "unset VIRTUAL_ENV" in ci


def _make_plan(target: str, env: dict) -> str:
    """What `make -n TARGET` would run (nothing is run), with exactly `env` as the environment."""
    import shutil
    import subprocess

    make = shutil.which("make")
    if make is None:
        import pytest

        pytest.skip("make is not installed")
    proc = subprocess.run([make, "-n", "-C", str(ROOT), target], env=env, capture_output=True, text=True, check=True)
    return proc.stdout


def test_make_without_a_venv_creates_and_uses_the_project_venv(tmp_path):
    import os

    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    plan = _make_plan("tune", {**env, "PYTHON": "/no/such/python3"})
    venv = ROOT / ".venv"
    if not (venv / "bin" / "python").exists():
        assert f'/no/such/python3 -m venv "{venv}"' in plan
    assert f'PYTHON="{venv}/bin/python" bash scripts/ensure_installed.sh' in plan
    assert f'"{venv}/bin/python" -m raytrain tune configs/ppo_pbt.yaml' in plan


def test_make_uses_an_active_venv_as_it_is(tmp_path):
    import os

    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").touch()
    plan = _make_plan("test", {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "VIRTUAL_ENV": str(venv)})
    assert "-m venv" not in plan
    assert f'"{venv}/bin/python" -m pytest -n 2 --dist loadscope -m "not alone" tests' in plan and ".venv" not in plan
    assert f'"{venv}/bin/python" -m pytest -m alone tests' in plan


def test_gen_reference_help_prints_usage_and_writes_nothing():
    """`scripts/gen_reference.py --help` rewrote README.md: the script took no arguments and ignored them."""
    import subprocess
    import sys

    readme = ROOT / "README.md"
    before = (readme.read_bytes(), readme.stat().st_mtime_ns)
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_reference.py"), "--help"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "usage:" in proc.stdout and "updated" not in proc.stdout, proc
    assert (readme.read_bytes(), readme.stat().st_mtime_ns) == before

"""The README's YAML reference is generated from the schema and must be current."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


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
    assert "\ntune: install\n\traytrain tune configs/ppo_pbt.yaml" in makefile
    assert "make test" in (ROOT / ".ci" / "run").read_text()

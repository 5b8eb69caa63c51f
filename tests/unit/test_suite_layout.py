"""How `make test` spreads the suite over its pytest-xdist workers (tests/conftest.py)."""

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import LAB_MODULES, ROOT


def test_lab_modules_name_every_module_that_brings_up_a_lab():
    """A lab module left off the list would run beside another lab: two at once install the same Debian packages
    on a fresh machine, and the second fails on dpkg's lock."""
    uses_lab = {
        str(path.relative_to(ROOT))
        for path in (ROOT / "tests" / "integration").glob("test_*.py")
        if re.search(r"^from \.(hostlab|slurmlab|nfslab) import", path.read_text(), re.M)
    }
    assert uses_lab == LAB_MODULES


def test_make_tests_scheduling_runs_the_lab_modules_in_one_worker_and_the_rest_beside_them(tmp_path):
    """A real `pytest -n 2 --dist loadscope` over stand-in modules at the lab modules' paths and others, with the
    suite's own conftest: every lab test runs in one worker, one after another, and the other worker runs the
    rest meanwhile."""
    log = tmp_path / "ran.log"
    body = (
        "import os, time\n"
        "import pytest\n\n"
        "@pytest.mark.parametrize('i', range(2))\n"
        "def test_it(i):\n"
        f"    with open({str(log)!r}, 'a') as f:\n"
        "        f.write(f\"{__name__} {os.environ['PYTEST_XDIST_WORKER']} {time.monotonic()} start\\n\")\n"
        "    time.sleep(0.3)\n"
        f"    with open({str(log)!r}, 'a') as f:\n"
        "        f.write(f\"{__name__} {os.environ['PYTEST_XDIST_WORKER']} {time.monotonic()} end\\n\")\n"
    )
    others = [f"tests/integration/test_local_{n}.py" for n in range(4)] + ["tests/unit/test_quick.py"]
    for module in [*LAB_MODULES, *others]:
        path = tmp_path / module
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body)
    for package in ("tests", "tests/integration", "tests/unit"):
        (tmp_path / package / "__init__.py").touch()
    (tmp_path / "tests" / "conftest.py").write_text((ROOT / "tests" / "conftest.py").read_text())
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", "--dist", "loadscope", "tests"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(tmp_path), "HOME": str(tmp_path)},
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = [line.split() for line in log.read_text().splitlines()]
    labs = {Path(m).stem for m in LAB_MODULES}
    lab_rows = [row for row in rows if row[0].rsplit(".", 1)[-1] in labs]
    lab_workers = {worker for _, worker, _, _ in lab_rows}
    other_workers = {worker for _, worker, _, _ in rows} - lab_workers
    assert len(rows) == 2 * 2 * (len(LAB_MODULES) + len(others))
    assert len(lab_workers) == 1, rows
    assert other_workers, rows
    # One after another: no two lab tests overlap.
    spans = sorted((float(t), what) for _, _, t, what in lab_rows)
    assert [what for _, what in spans] == ["start", "end"] * (2 * len(LAB_MODULES))

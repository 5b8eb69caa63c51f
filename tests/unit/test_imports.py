"""raytrain.imports: the user's modules are found in the current directory, as Ray's workers find them."""

import sys

import pytest

from raytrain.imports import import_module, resolve_import


@pytest.fixture
def clean_path(monkeypatch, tmp_path):
    """sys.path as it is, restored afterwards; the test's own modules (from tmp_path) are forgotten."""
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("",)])
    yield
    for name, module in list(sys.modules.items()):
        if str(getattr(module, "__file__", None) or "").startswith(str(tmp_path)):
            del sys.modules[name]


def test_a_module_beside_the_user_is_imported_from_the_current_directory(tmp_path, monkeypatch, clean_path):
    (tmp_path / "walk_envs_here.py").write_text("class Walk:\n    pass\n")
    monkeypatch.chdir(tmp_path)
    assert resolve_import("walk_envs_here:Walk").__module__ == "walk_envs_here"
    # First on the path, as Ray puts the driver's current directory first on every worker's path.
    assert sys.path[0] == str(tmp_path)
    import_module("walk_envs_here")
    assert sys.path.count(str(tmp_path)) == 1


def test_a_missing_module_says_where_python_looked_and_what_to_do(tmp_path, monkeypatch, clean_path):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ModuleNotFoundError) as caught:
        import_module("no_such_envs_here.sub")
    assert caught.value.name == "no_such_envs_here"
    text = str(caught.value)
    assert f"the current directory {tmp_path}" in text and sys.executable in text
    assert "run raytrain from the folder that holds no_such_envs_here.py or the package no_such_envs_here/" in text


def test_a_module_that_fails_on_its_own_import_is_reported_as_it_is(tmp_path, monkeypatch, clean_path):
    (tmp_path / "needs_more_here.py").write_text("import not_installed_anywhere_here\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ModuleNotFoundError) as caught:
        import_module("needs_more_here")
    assert caught.value.name == "not_installed_anywhere_here"
    assert "current directory" not in str(caught.value)


LAB_ENV = '''
from gymnasium.envs.classic_control import CartPoleEnv

from lab_helpers import LENGTH


class LabCartPole(CartPoleEnv):
    def __init__(self, config=None):
        super().__init__()
        self.length = LENGTH
'''


def _project(folder):
    """A user's folder: an env module that imports a helper beside it, a package, a venv, a stray file."""
    (folder / "lab_env.py").write_text(LAB_ENV)
    (folder / "lab_helpers.py").write_text("LENGTH = 0.5\n")
    (folder / "lab_explore").mkdir()
    (folder / "lab_explore" / "__init__.py").write_text("def explore(overrides):\n    return overrides\n")
    (folder / "lab_explore" / "__pycache__").mkdir()
    (folder / "lab_explore" / "__pycache__" / "stale.pyc").write_bytes(b"\0")
    (folder / "notes.py").write_text("raise SystemExit('never imported')\n")


def test_the_modules_a_job_takes_along_are_the_users_from_the_current_directory(tmp_path, monkeypatch, clean_path):
    from raytrain.imports import working_directory_modules

    _project(tmp_path)
    monkeypatch.chdir(tmp_path)
    resolve_import("lab_env:LabCartPole")
    resolve_import("lab_explore:explore")
    taken = working_directory_modules(["lab_env:LabCartPole", "lab_explore:explore"])
    # The helper lab_env imports goes too; a file nobody imported does not, nor anything installed.
    assert sorted(p.name for p in taken) == ["lab_env.py", "lab_explore", "lab_helpers.py"]
    assert all(p.parent == tmp_path for p in taken)
    # From another folder, nothing of this one is taken along.
    other = tmp_path / "elsewhere"
    other.mkdir()
    monkeypatch.chdir(other)
    assert working_directory_modules(["lab_env:LabCartPole"]) == []


def test_a_venv_or_raytrain_inside_the_current_directory_is_not_taken_along(monkeypatch, clean_path):
    """Run from a clone of raytrain with its .venv inside: neither raytrain nor an installed package goes."""
    from pathlib import Path

    import raytrain
    from raytrain.imports import working_directory_modules

    monkeypatch.chdir(Path(raytrain.__file__).parents[1])
    assert working_directory_modules(["gymnasium.envs.classic_control:CartPoleEnv", "raytrain.rllib:x"]) == []


def test_a_submitted_sweeps_folder_holds_the_sweep_and_the_users_modules(tmp_path, monkeypatch, clean_path):
    from raytrain.config.sweep_load import load_sweep
    from raytrain.tune.jobs import SWEEP_FILE, write_job_folder

    _project(tmp_path)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "base.yaml").write_text(
        "environment: {env: 'lab_env:LabCartPole'}\nenv_runners: {num_env_runners: 0}\nstop: {training_iteration: 1}\n"
    )
    (tmp_path / "sweep.yaml").write_text(
        "base: base.yaml\nsearch: {algorithm: pbt, num_samples: 2}\n"
        "pbt: {perturbation_interval: 1, hyperparam_mutations: {training.lr: {distribution: uniform, low: 0.0001, high: 0.001}},"
        " custom_explore_fn: 'lab_explore:explore'}\n"
        f"checkpoint: {{storage_path: {tmp_path / 'results'}}}\n"
    )
    loaded = load_sweep(tmp_path / "sweep.yaml", storage="skip")
    job = tmp_path / "job"
    job.mkdir()
    assert sorted(write_job_folder(job, loaded)) == ["lab_env.py", "lab_explore", "lab_helpers.py"]
    assert sorted(p.name for p in job.iterdir()) == sorted([SWEEP_FILE, "lab_env.py", "lab_explore", "lab_helpers.py"])
    assert (job / "lab_helpers.py").read_text() == "LENGTH = 0.5\n"
    assert sorted(p.name for p in (job / "lab_explore").iterdir()) == ["__init__.py"]
    assert not (tmp_path / "results").exists()


def test_submit_dry_run_says_which_modules_it_would_take_along(tmp_path, monkeypatch, clean_path):
    from pathlib import Path

    from typer.testing import CliRunner

    import raytrain
    from raytrain.cli import app

    _project(tmp_path)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "base.yaml").write_text(
        "environment: {env: 'lab_env:LabCartPole'}\nenv_runners: {num_env_runners: 0}\nstop: {training_iteration: 1}\n"
    )
    (tmp_path / "sweep.yaml").write_text(f"base: base.yaml\ncheckpoint: {{storage_path: {tmp_path / 'results'}}}\n")
    cluster = Path(raytrain.__file__).parents[1] / "configs" / "cluster.yaml"
    result = CliRunner().invoke(app, ["tune", "sweep.yaml", "--cluster", str(cluster), "--submit", "--dry-run"])
    assert result.exit_code == 0, result.output
    assert f"# would take along from {tmp_path}: lab_env.py, lab_helpers.py" in result.stdout
    assert not (tmp_path / "results").exists()


def test_raytrains_own_import_paths_leave_the_path_alone(tmp_path, monkeypatch, clean_path):
    """Its callbacks and connectors, named by import path in every build: no user code, no current directory."""
    monkeypatch.chdir(tmp_path)
    resolve_import("raytrain.rllib.callbacks:RaytrainCallbacks")
    assert str(tmp_path) not in sys.path


@pytest.mark.parametrize(("path", "expected"), [
    ("ale_py:ALE/Pong-v5", ("ale_py", "ALE/Pong-v5")),
    ("minigrid:MiniGrid-Empty-5x5-v0", ("minigrid", "MiniGrid-Empty-5x5-v0")),
    ("pkg.envs:Walk", None),  # an object's import path
    ("pkg.envs:Outer.Walk", None),
    ("CartPole-v1", None),
    ("ALE/Pong-v5", None),
    (":ALE/Pong-v5", None),
    ("ale_py:", None),
])
def test_gymnasiums_module_id_form(path, expected):
    from raytrain.imports import gym_module_id

    assert gym_module_id(path) == expected


@pytest.mark.parametrize(("source", "said"), [
    ("import gymnasium\n\nclass Broken(gymnasium.Env)\n    pass\n",
     "broken_here.py:3: SyntaxError: expected ':' (class Broken(gymnasium.Env))"),
    ("LIMIT = 5\nSIZE = LIMT * 2\n",
     "importing it raised NameError: name 'LIMT' is not defined (broken_here.py:2: SIZE = LIMT * 2)"),
])
def test_a_module_that_fails_to_run_says_where_in_its_file(tmp_path, monkeypatch, clean_path, source, said):
    """A syntax error or a name error in the user's module raised as it is: callers that catch ImportError (the
    config's env check, `raytrain run --main`) let it through, and the command ended with exit 1 and `error:
    SyntaxError: expected ':' (broken_here.py, line 3)`, once Ray's checks had begun."""
    (tmp_path / "broken_here.py").write_text(source)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ImportError) as caught:
        import_module("broken_here")
    assert str(caught.value) == said
    assert caught.value.name == "broken_here"


def test_a_module_under_a_package_that_fails_names_its_file_under_the_current_directory(tmp_path, monkeypatch,
                                                                                         clean_path):
    (tmp_path / "pkg_broken_here").mkdir()
    (tmp_path / "pkg_broken_here" / "__init__.py").write_text("")
    (tmp_path / "pkg_broken_here" / "envs.py").write_text("def f(:\n    pass\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ImportError, match=r"^pkg_broken_here/envs\.py:1: SyntaxError: "):
        resolve_import("pkg_broken_here.envs:Walk")


def test_the_users_code_in_a_traceback_is_the_innermost_frame_under_the_current_directory(tmp_path, monkeypatch,
                                                                                          clean_path):
    """Not raytrain's own frames, the standard library's or an installed package's, even from a folder above them."""
    import json

    (tmp_path / "calls_json_here.py").write_text("import json\n\ndef run():\n    return json.loads('{')\n")
    monkeypatch.chdir(tmp_path)
    from raytrain.imports import user_code_at

    with pytest.raises(ValueError) as caught:
        import_module("calls_json_here").run()
    assert user_code_at(caught.value) == " (calls_json_here.py:4: return json.loads('{'))"
    monkeypatch.chdir("/")
    assert user_code_at(caught.value) == f" ({str(tmp_path / 'calls_json_here.py').lstrip('/')}:4: return json.loads('{{'))"
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError) as inside:
        json.loads("{")
    assert user_code_at(inside.value) == ""  # json's frames are skipped, and this test's file is not under tmp_path


def test_a_module_named_like_a_standard_module_beside_the_user_is_warned_of(tmp_path, monkeypatch, clean_path, capsys):
    """A grp.py of the user's in the folder raytrain runs from: Ray's import of tarfile (which imports grp) ran it as
    a module in `raytrain run` and `train`, and its error (`ValueError: could not convert string to float: 'run'`
    from its own argv handling) was all that was said."""
    (tmp_path / "grp.py").write_text("raise SystemExit('a script of the user')\n")
    (tmp_path / "test.py").write_text("")  # the standard library's own tests: nothing imports them
    (tmp_path / "walk_envs_near_grp.py").write_text("class Walk:\n    pass\n")
    monkeypatch.chdir(tmp_path)
    resolve_import("walk_envs_near_grp:Walk")
    said = " ".join(capsys.readouterr().err.split())
    assert said == (f"warning: {tmp_path / 'grp.py'} has the name of Python's standard module grp: raytrain imports "
                    f"your modules from {tmp_path}, first on the path, as Ray's workers do, so an `import grp` in Python, "
                    "Ray or a library would run this file instead: rename it")
    import_module("walk_envs_near_grp")
    assert capsys.readouterr().err == ""  # once per folder

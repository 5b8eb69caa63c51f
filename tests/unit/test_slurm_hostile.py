"""Property: every string of a Slurm file (and every key of its `env:`) filled with shell syntax.

A Slurm file's values become `#SBATCH` lines, which sbatch parses itself, and values of a bash batch script
that Slurm runs on the allocation's first node. `raytrain tune SWEEP --slurm FILE --dry-run` either refuses
the file (exit 2 at its line) or prints a script in which: bash finds no syntax error; every `#SBATCH` line is
one option of the characters the schema allows; and the values section, run by a real bash, holds each value
exactly as written while nothing in it runs (the canary file never appears).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from raytrain.cli import app
from raytrain.config.slurm import load_slurm
from raytrain.errors import ConfigError

PAYLOADS = ["; touch {c}", "$(touch {c})", "`touch {c}`", "' ; touch {c} ; '", "\" ; touch {c} ; \"", "\ntouch {c}\n",
            "\n#SBATCH --uid=0", " && touch {c}", "| touch {c}", "\\; touch {c}", "$'\\n'touch {c}", " -- touch {c}",
            "${{IFS}}touch${{IFS}}{c}", "%j"]
METACHARACTERS = ";$()`'\"\n -|&<>*?[]{}~#\\\t/@,=:%"

# Where a string lives: the key (a dotted path into the file) and a legal value to prepend or append to.
STRING_FIELDS = {
    "job_name": "rt-job", "partition": "debug", "account": "lab", "qos": "normal", "gpu_type": "a100",
    "time_limit": "1:00:00", "extra_sbatch.0": "--mem=16G", "python": None, "venv": "/opt/venvs/rt",
    "workdir": None, "storage_path": None, "env.NOTE": "1",
}
# Fields where shell syntax is legal (a value; a path below an absolute one): quoting is what keeps it a value.
FREE_FIELDS = ["env.NOTE", "venv", "workdir", "storage_path", "python"]
SBATCH_LINE = "#SBATCH --"
SBATCH_VALUE = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.,:/@%+=-")


@pytest.fixture(scope="module")
def fuzz_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("slurm_fuzz")
    (root / "base.yaml").write_text("environment: {env: CartPole-v1}\nenv_runners: {num_env_runners: 0}\n"
                                    "training: {train_batch_size: 200, minibatch_size: 100}\nstop: {training_iteration: 1}\n")
    (root / "sweep.yaml").write_text("name: s\nbase: base.yaml\nsearch: {num_samples: 1}\n")
    (root / "work").mkdir()
    return root


def _base(root: Path) -> dict:
    return {"job_name": "rt-job", "partition": "debug", "account": "lab", "qos": "normal", "nodes": 2,
            "gpus_per_node": 1, "gpu_type": "a100", "time_limit": "1:00:00", "extra_sbatch": ["--mem=16G"],
            "venv": "/opt/venvs/rt", "workdir": str(root / "work"), "storage_path": str(root / "results"),
            "env": {"NOTE": "1"}}


def _set(data: dict, key: str, value: str) -> None:
    node = data
    parts = key.split(".")
    for part in parts[:-1]:
        node = node[int(part)] if isinstance(node, list) else node[part]
    last = parts[-1]
    if isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value


def _get(data: dict, key: str) -> str:
    node = data
    for part in key.split("."):
        node = node[int(part)] if isinstance(node, list) else node[part]
    return node


HOSTILE = st.tuples(st.sampled_from(PAYLOADS), st.sampled_from(["append", "prepend", "alone"]), st.text(METACHARACTERS, max_size=4))


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(
    # Any field, any form: mostly refused.
    strings=st.one_of(st.just({}), st.just({}), st.dictionaries(st.sampled_from(sorted(STRING_FIELDS)), HOSTILE, min_size=1, max_size=2)),
    # Fields where shell syntax is legal, in a legal form (below the absolute path they had): quoting is tested.
    free=st.dictionaries(st.sampled_from(FREE_FIELDS), HOSTILE.map(lambda h: (h[0], "append", h[2])), min_size=1, max_size=3),
    key=st.one_of(st.none(), st.none(), st.none(), st.sampled_from(PAYLOADS)),
)
def test_hostile_slurm_values_are_refused_or_reach_the_script_literally(fuzz_dir, strings, free, key):
    canary = fuzz_dir / "CANARY"
    data = _base(fuzz_dir)
    data["python"] = None
    for field, (payload, how, noise) in {**free, **strings}.items():
        if field == "python" and "venv" in data:
            del data["venv"]  # give python or venv, not both
            data["python"] = "/opt/venvs/rt/bin/python"
        hostile = payload.format(c=canary) + noise
        base = STRING_FIELDS[field] or _get(data, field)
        value = {"append": f"{base}/{hostile}" if base.startswith("/") else base + hostile,
                 "prepend": hostile + base, "alone": hostile}[how]
        _set(data, field, value)
    if key is not None:
        data["env"][key.format(c=canary)] = "x"
    data = {k: v for k, v in data.items() if v is not None}
    path = fuzz_dir / "slurm.yaml"
    path.write_text(yaml.safe_dump(data))
    try:
        cfg = load_slurm(path)
    except ConfigError as exc:
        cfg, refusal = None, str(exc)
    result = CliRunner().invoke(app, ["tune", str(fuzz_dir / "sweep.yaml"), "--slurm", str(path), "--dry-run"])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert not canary.exists(), data
    assert not (fuzz_dir / "results").exists(), "a dry run wrote the experiment folder"
    event("refused" if cfg is None or result.exit_code == 2 else "accepted")
    if cfg is None:
        assert refusal.startswith(f"{path}:"), refusal
        assert result.exit_code == 2 and f"error: {path}:" in result.output, result.output
        return
    if result.exit_code == 2:  # the Slurm file loads, and a check across files refuses it (a storage path)
        assert f"{path}:" in result.output, result.output
        return
    assert result.exit_code == 0, result.output
    script = result.stdout.split("\n# would write ", 1)[0] + "\n"
    assert script.startswith("#!/bin/bash\n")
    assert subprocess.run(["bash", "-n"], input=script, text=True, capture_output=True).returncode == 0, script
    # sbatch reads #SBATCH lines up to the first command: each is one option, of the characters allowed.
    header = script.split("\nset -uo pipefail\n", 1)[0].splitlines()
    sbatch = [line for line in header if line.startswith("#SBATCH")]
    assert all(line.startswith("#") or not line for line in header), header
    for line in sbatch:
        option = line.removeprefix(SBATCH_LINE)
        name, _, value = option.partition("=")
        assert name.replace("-", "").isalnum() and name.islower() and set(value) <= SBATCH_VALUE, line
    assert sum(line.startswith("#SBATCH --uid") for line in script.splitlines()) == 0
    # The values section, run by bash: each variable holds exactly what the file gave, and nothing ran.
    values = script.split("(each quoted once, here) ----\n", 1)[1].split("\nsay()", 1)[0]
    names = list(cfg.env)
    probe = values + '\nprintf "%s\\0" "$WORKDIR" "$PYTHON" ' + " ".join(f'"${name}"' for name in names) + "\n"
    ran = subprocess.run(["bash", "-c", probe], capture_output=True, cwd=fuzz_dir)
    assert ran.returncode == 0, ran.stderr
    python = f"{cfg.venv.rstrip('/')}/bin/python" if cfg.venv else cfg.python
    assert ran.stdout.decode().split("\0")[:-1] == [cfg.workdir, python, *cfg.env.values()]
    assert [cfg.workdir, *cfg.env.values()] == [data["workdir"], *data["env"].values()]  # as written, not changed
    assert not canary.exists(), data

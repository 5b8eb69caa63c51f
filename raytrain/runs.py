"""Run folders: everything needed to reproduce, inspect and resume a training run.

Layout of `storage_path/<experiment.name>/<timestamp>/`:

    config.yaml          the resolved raytrain config (new names, overrides applied)
    rllib_config.json    the exact PPOConfig builder calls it became
    command.txt          the command line and working directory
    versions.json        raytrain, Ray, Python, torch, gymnasium versions and the host
    metrics.jsonl        one JSON object of scalar metrics per training iteration
    metrics.csv          the same as a table
    run.json             status (running, finished, interrupted, failed), last iteration, stop reason
    checkpoints/checkpoint_<iteration>/   RLlib checkpoint + raytrain_state.json + config.yaml
"""

from __future__ import annotations

import csv
import json
import math
import os
import platform
import shlex
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import yaml

from raytrain.errors import TrainError

CHECKPOINT_PREFIX = "checkpoint_"
STATE_FILE = "raytrain_state.json"


def flatten(result: dict, prefix: str = "") -> dict[str, Any]:
    """Nested result dict -> {"a/b/c": scalar}; lists, strings of no interest and nested configs dropped."""
    out: dict[str, Any] = {}
    for key, value in result.items():
        name = f"{prefix}{key}"
        if key == "config" and not prefix:
            continue
        if isinstance(value, dict):
            out.update(flatten(value, name + "/"))
        elif isinstance(value, bool):
            out[name] = value
        elif isinstance(value, (int, float)) or type(value).__module__ == "numpy":
            try:
                out[name] = float(value) if isinstance(value, float) or "float" in type(value).__name__ else int(value)
            except (TypeError, ValueError):
                continue
        elif isinstance(value, str) and name in ("trial_id", "hostname", "node_ip"):
            out[name] = value
    return out


def versions() -> dict[str, str]:
    """Versions of everything that decides what a run does."""
    import raytrain

    info = {"raytrain": raytrain.__version__, "python": platform.python_version(), "host": platform.node()}
    for module in ("ray", "torch", "gymnasium", "numpy"):
        try:
            info[module] = __import__(module).__version__
        except Exception:  # pragma: no cover - a missing optional package
            info[module] = "not installed"
    return info


class RunFolder:
    """One run's folder on disk."""

    def __init__(self, path: Path):
        self.path = Path(path)

    # --- creation and discovery -------------------------------------------------------------
    @classmethod
    def create(cls, storage_path: str, name: str) -> RunFolder:
        """A new, empty run folder; never reuses an existing one."""
        base = Path(storage_path) / name
        try:
            base.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise TrainError(f"cannot create {base}: {exc.strerror}; check experiment.storage_path") from None
        stamp = time.strftime("%Y-%m-%d_%H-%M-%S")
        for i in range(1000):
            path = base / (stamp if i == 0 else f"{stamp}_{i}")
            try:
                path.mkdir()
                return cls(path)
            except FileExistsError:
                continue
        raise TrainError(f"cannot find a free run folder name under {base}")

    @classmethod
    def open(cls, path: str | Path) -> RunFolder:
        folder = cls(Path(path).expanduser())
        if not (folder.path / "config.yaml").is_file():
            raise TrainError(f"{path} is not a raytrain run folder (no config.yaml in it)")
        return folder

    @property
    def checkpoints_dir(self) -> Path:
        return self.path / "checkpoints"

    def checkpoints(self) -> list[Path]:
        """Complete checkpoints, oldest first (a checkpoint is complete once its state file exists)."""
        if not self.checkpoints_dir.is_dir():
            return []
        found = [
            p
            for p in self.checkpoints_dir.iterdir()
            if p.is_dir() and p.name.startswith(CHECKPOINT_PREFIX) and (p / STATE_FILE).is_file()
        ]
        return sorted(found, key=lambda p: json.loads((p / STATE_FILE).read_text())["iteration"])

    def latest_checkpoint(self) -> Path | None:
        found = self.checkpoints()
        return found[-1] if found else None

    # --- writing ------------------------------------------------------------------------------
    def write_setup(self, config_yaml: dict, rllib_calls: dict, argv: list[str]) -> None:
        (self.path / "config.yaml").write_text(yaml.safe_dump(config_yaml, sort_keys=False))
        (self.path / "rllib_config.json").write_text(json.dumps(rllib_calls, indent=2, default=str) + "\n")
        self.append_command(argv)
        (self.path / "versions.json").write_text(json.dumps(versions(), indent=2) + "\n")

    def append_command(self, argv: list[str]) -> None:
        line = f"# {time.strftime('%Y-%m-%d %H:%M:%S')} in {os.getcwd()}\n{shlex.join(argv)}\n"
        with open(self.path / "command.txt", "a") as fh:
            fh.write(line)

    def read_config_yaml(self) -> str:
        return (self.path / "config.yaml").read_text()

    def set_status(self, **fields: Any) -> None:
        path = self.path / "run.json"
        status = json.loads(path.read_text()) if path.is_file() else {}
        status.update(fields)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(status, indent=2, default=str) + "\n")
        tmp.replace(path)

    def status(self) -> dict:
        path = self.path / "run.json"
        return json.loads(path.read_text()) if path.is_file() else {}

    def checkpoint_path(self, iteration: int) -> Path:
        return self.checkpoints_dir / f"{CHECKPOINT_PREFIX}{iteration:06d}"

    def prune_checkpoints(self, keep: int | None) -> list[Path]:
        """Delete the oldest complete checkpoints beyond `keep`; return what was removed."""
        if keep is None:
            return []
        found = self.checkpoints()
        removed = found[: max(0, len(found) - keep)]
        for path in removed:
            shutil.rmtree(path, ignore_errors=True)
        return removed


class MetricsWriter:
    """Appends per-iteration scalar metrics to metrics.jsonl and keeps metrics.csv in step with it."""

    def __init__(self, folder: RunFolder):
        self.jsonl = folder.path / "metrics.jsonl"
        self.csv = folder.path / "metrics.csv"
        self.rows: list[dict] = []
        self.columns: list[str] = []
        if self.jsonl.is_file():  # resuming: keep what is there
            for line in self.jsonl.read_text().splitlines():
                if line.strip():
                    self.rows.append(json.loads(line))
            for row in self.rows:
                self._add_columns(row)

    def _add_columns(self, row: dict) -> bool:
        new = [k for k in row if k not in self.columns]
        self.columns += new
        return bool(new)

    def drop_after(self, iteration: int) -> None:
        """Forget rows past `iteration` (a resumed run repeats them from its checkpoint)."""
        kept = [r for r in self.rows if r.get("training_iteration", 0) <= iteration]
        if len(kept) != len(self.rows):
            self.rows = kept
            self.jsonl.write_text("".join(json.dumps(r) + "\n" for r in self.rows))
            self._rewrite_csv()

    def append(self, row: dict) -> None:
        clean = {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in row.items()}
        self.rows.append(clean)
        with open(self.jsonl, "a") as fh:
            fh.write(json.dumps(clean) + "\n")
        if self._add_columns(clean) or not self.csv.exists():
            self._rewrite_csv()
        else:
            with open(self.csv, "a", newline="") as fh:
                csv.DictWriter(fh, fieldnames=self.columns).writerow(clean)

    def _rewrite_csv(self) -> None:
        with open(self.csv, "w", newline="") as fh:
            writer = csv.DictWriter(fh, fieldnames=self.columns)
            writer.writeheader()
            writer.writerows(self.rows)


def command_line() -> list[str]:
    return [Path(sys.argv[0]).name, *sys.argv[1:]]

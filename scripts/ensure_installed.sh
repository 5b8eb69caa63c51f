#!/usr/bin/env bash
# Install raytrain (editable, with test extras) into the current Python if it is missing or points
# elsewhere. PyTorch's CPU wheel is installed first: a plain `torch` requirement with no torch present
# would pull the CUDA build (several GB).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
here=$(pwd -P)

if ! "$PY" -c "import torch" >/dev/null 2>&1; then
    echo "ensure_installed: installing torch==2.13.0 (CPU wheel)"
    "$PY" -m pip install -q "torch==2.13.0"
fi

installed_at=$("$PY" -I - <<'PY' 2>/dev/null || true
import importlib.util, pathlib
spec = importlib.util.find_spec("raytrain")
ok = all(importlib.util.find_spec(m) for m in ("ray", "gymnasium", "optuna", "typer", "pytest", "pytest_timeout", "xdist", "GPy", "sklearn", "cmaes", "hypothesis"))
if spec and ok:
    print(pathlib.Path(spec.origin).resolve().parent.parent)
PY
)
if [ "$installed_at" != "$here" ]; then
    echo "ensure_installed: installing raytrain from $here"
    "$PY" -m pip install -q -e ".[dev]"
fi

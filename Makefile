# The two set-up commands of the README. Each installs what it needs first.
#
# Where: an active virtual environment ($VIRTUAL_ENV) is used as it is. Otherwise the first target creates
# a project-local .venv with `$(PYTHON) -m venv` (Debian's /usr/bin/python3 is "externally managed" and
# refuses pip installs) and installs into it. Every target then runs that environment's Python, never
# whatever `raytrain` or `python` happens to be first on PATH.
PYTHON ?= python3

ifdef VIRTUAL_ENV
VENV := $(VIRTUAL_ENV)
else
VENV := $(CURDIR)/.venv
endif
PY := $(VENV)/bin/python

.PHONY: install tune train test test-unit lint reference bench

$(PY):
	@echo "make: creating $(VENV) with $(PYTHON) -m venv"
	$(PYTHON) -m venv "$(VENV)"

# Then the bytecode of raytrain and of the tests' helper modules, written once: an editable install compiles none,
# and where PYTHONDONTWRITEBYTECODE is set (as on this project's machines) every process that imports raytrain (each
# command, each Ray worker of a run or a test; the lab hosts import the helpers) compiled it again, about 0.3 s each.
# Only what changed since is compiled (0.1 s when nothing did). The test modules' own .pyc go unused: pytest compiles
# them itself, rewriting their asserts.
install: $(PY)
	PYTHON="$(PY)" bash scripts/ensure_installed.sh
	"$(PY)" -m compileall -q raytrain tests

# The main job on a local Ray started on the spot: a small PBT sweep.
tune: install
	"$(PY)" -m raytrain tune configs/ppo_pbt.yaml

# A single training run.
train: install
	"$(PY)" -m raytrain train configs/ppo_cartpole.yaml

# The whole test suite: unit (no Ray) and integration (a real local Ray), in TEST_WORKERS processes
# (pytest-xdist), a test module at a time each. The modules that bring up namespaced labs run one after another
# in one of them (tests/conftest.py), the rest goes to whichever is free. Then, in this one process with nothing
# beside them, the tests marked `alone` (a signal racing the local Ray's own shutdown). Both passes always run;
# either failing fails the target. `make test TEST_WORKERS=0` runs the first pass in this process too.
TEST_WORKERS ?= 2
test: install
	"$(PY)" -m pytest -n $(TEST_WORKERS) --dist loadscope -m "not alone" tests; first=$$?; \
	"$(PY)" -m pytest -m alone tests; second=$$?; \
	[ $$first -eq 0 ] && [ $$second -eq 0 ]

test-unit: install
	"$(PY)" -m pytest tests/unit

lint: install
	"$(PY)" -m ruff check raytrain tests scripts
	"$(PY)" -m mypy

reference: install
	"$(PY)" scripts/gen_reference.py

bench: install
	"$(PY)" -m pip install -q -e ".[bench]"
	"$(PY)" scripts/bench_train.py
	"$(PY)" scripts/bench_tune.py
	"$(PY)" scripts/bench_cluster.py
	"$(PY)" scripts/bench_events.py --example

# The two set-up commands of the README. Each installs what it needs first.
PYTHON ?= python3

.PHONY: install tune train test test-unit lint reference bench

install:
	PYTHON=$(PYTHON) bash scripts/ensure_installed.sh

# The main job on a local Ray started on the spot: a small PBT sweep.
tune: install
	raytrain tune configs/ppo_pbt.yaml

# A single training run.
train: install
	raytrain train configs/ppo_cartpole.yaml

# The whole test suite: unit (no Ray) and integration (a real local Ray).
test: install
	$(PYTHON) -m pytest tests

test-unit: install
	$(PYTHON) -m pytest tests/unit

lint: install
	$(PYTHON) -m ruff check raytrain tests scripts

reference: install
	$(PYTHON) scripts/gen_reference.py

bench: install
	$(PYTHON) -m pip install -q -e ".[bench]"
	$(PYTHON) scripts/bench_train.py
	$(PYTHON) scripts/bench_tune.py
	$(PYTHON) scripts/bench_cluster.py
	$(PYTHON) scripts/bench_events.py --example

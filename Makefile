# gpupoc: two set-up commands for a fresh machine, `make poc` and `make test`.
PYTHON ?= python3
STAMP := .venv-installed
# The checkout's own harness (not whatever `gpupoc` an earlier install of another checkout left on PATH).
GPUPOC := $(PYTHON) -m harness.cli
# Every scheduler the sim can run, KAI-Scheduler included (built only when asked: --with kai).
export GPUPOC_SIM_SCHEDULERS ?= kueue,volcano,kuberay,kai

.PHONY: poc test install build unit clean-sim

$(STAMP): pyproject.toml
	bash sim/install-deps.sh
	$(PYTHON) -m pip install -q -e '.[test]'
	@touch $(STAMP)

install: $(STAMP)

build: install
	$(GPUPOC) sim build --with kai

# The main job: build the sim, start it, print the cluster and GPU inventory, stop it.
poc: build
	bash sim/poc.sh

# The project's tests: unit tests, then the integration tests against the sim.
test: build
	$(PYTHON) -m pytest tests

unit: install
	$(PYTHON) -m pytest tests/unit

clean-sim:
	-$(GPUPOC) sim down

# gpupoc: two set-up commands for a fresh machine, `make poc` and `make test`.
# Everything Python runs from the project's own virtual environment (.venv): a fresh machine's global
# packages are never changed, and nothing installed globally can conflict. uv installs the project into it (from PyPI,
# into the environment itself): 4 s on a fresh clone with a warm cache, where pip took 37 s (2026-12-07).
# Byte-compiled as installed, and the project's own packages before each run: with PYTHONDONTWRITEBYTECODE set (as on
# these machines) nothing is cached at run time, and every one of make test's hundreds of Python processes compiled
# the Kubernetes client again (an inner run 5.6-6.5 CPU-s, 3.8-3.9 compiled, 2026-12-07).
BASE_PYTHON ?= python3
VENV := .venv
PYTHON := $(CURDIR)/$(VENV)/bin/python
STAMP := $(VENV)/.installed
# The checkout's own harness (not whatever `gpupoc` an earlier install of another checkout left on PATH).
GPUPOC := $(PYTHON) -m harness.cli
# Every scheduler the sim can run, KAI-Scheduler included (built only when asked: --with kai), a real
# Slurm beside the cluster (Debian's packages, installed by sim/install-deps.sh), and the autoscaler of the cloud
# row (Karpenter with its kwok provider: --with karpenter).
export GPUPOC_SIM_SCHEDULERS ?= kueue,volcano,kuberay,kai,slurm,karpenter

.PHONY: poc test kind install build unit clean-sim

$(STAMP): pyproject.toml
	bash sim/install-deps.sh
	test -x $(PYTHON) || $(BASE_PYTHON) -m venv $(VENV)
	$(PYTHON) -m pip install -q --disable-pip-version-check uv
	$(PYTHON) -m uv pip install -q --compile-bytecode --python $(PYTHON) -e '.[test]'
	@touch $(STAMP)

install: $(STAMP)

# helm and actionlint: the checks of kind/'s charts and .github/'s workflows (tests/suites/test_kind_charts.py,
# tests/unit/test_workflows.py); real-nodes: the kubelet, pause program and device plugin of `sim up --real-nodes N`
# (tests/sim/test_real_nodes.py); upgrade: the releases before the pinned Kueue and KubeRay (operations.upgrade);
# kind: kind, kubeadm, kubectl and CoreDNS for the node image kind/node-image.sh builds (tests/kind).
build: install
	$(PYTHON) -m compileall -q harness suites tests bench
	$(GPUPOC) sim build --with kai --with karpenter --with helm --with actionlint --with real-nodes --with upgrade \
		--with kind

# make test, poc and kind each take the whole host; a second one waits for the first (sim/one-run.sh).
ONE_RUN := bash sim/one-run.sh

# The main job: every suite on every backend on the sim, the acceptance record, outcomes vs suites/expected.yaml.
poc: build
	PYTHON=$(PYTHON) $(ONE_RUN) bash sim/poc.sh

# The project's tests: unit tests and the integration tests, their files shared out among TEST_WORKERS pytest-xdist
# workers, each worker with a sim of its own (tests/conftest.py); TEST_WORKERS=0 runs them one after another. Three
# on 2 cores: the integration tests mostly wait on their sims (2 workers left the cores 47-58 % idle, 2026-12-04).
# Four ran out of inotify instances (fs.inotify.max_user_instances 128: Kueue's and Volcano's file watchers in four
# sims and the multi-cluster workers' "too many open files") and loaded the scale smoke run past its rate (2026-12-05).
TEST_WORKERS ?= 3
# kind's node image (tests/kind) is built before the tests, not during them: on a fresh machine its mmdebstrap and image
# imports took 316 s of the kind test's set-up, beside the other workers' cases (2026-12-07); cached, a label check.
test: build
	PYTHON=$(PYTHON) bash kind/node-image.sh
	PYTHON=$(PYTHON) $(ONE_RUN) $(PYTHON) -m pytest $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadfile) --durations=25 tests

# kind on this machine, as a user runs gpupoc against a cluster (kind/here.sh: the node image built here, the
# schedulers from their charts, Prometheus as a pod, podman inside a network namespace of gpupoc's own).
kind: build
	PYTHON=$(PYTHON) $(ONE_RUN) bash kind/here.sh poc

unit: install
	$(PYTHON) -m pytest tests/unit

clean-sim:
	-$(GPUPOC) sim down

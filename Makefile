# gpufleet: the two commands of the README, and the pieces they are made of.
#   make demo   set everything up, start a local demo fleet, run site.yml against it
#   make test   set everything up, run lint, unit tests, syntax checks, every molecule scenario, the
#               fleet suites and the end-to-end suite on the demo fleet
SHELL := /bin/bash
.DEFAULT_GOAL := help
VENV := .venv
BIN := $(VENV)/bin
export PATH := $(CURDIR)/$(BIN):$(PATH)
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg
# Scenarios under molecule/, all by default: make molecule SCENARIOS=supervisord
ALL_SCENARIOS := $(notdir $(patsubst %/molecule.yml,%,$(wildcard molecule/*/molecule.yml)))
# Longest first (seconds on 2 cores: docs/benchmarks.md, "make test"), so parallel lanes end together; new scenarios last.
LONGEST_FIRST := doctor ssh_hardening torch cuda_links jupyter nvidia_container_toolkit supervisord \
                 gpu_monitoring gate facts
SCENARIOS ?= $(filter $(ALL_SCENARIOS),$(LONGEST_FIRST)) $(filter-out $(LONGEST_FIRST),$(ALL_SCENARIOS))
# Suites run side by side in this many lanes (make -j; TEST_JOBS=1: one by one), each through
# scripts/suite, which prints a suite's output whole when it ends. The suites share nothing on the
# machine (own containers, SSH ports, work folders). Set-up (images, wheels) runs once, before them. A failed
# suite does not stop the others (make -k): one run names every failure.
TEST_JOBS ?= 2
# Longest first (make -j starts them in this order as lanes free up): e2e, doctor, the fleet suites, ssh_hardening,
# then the shorter scenarios with unit among them, the short checks last.
LANES := e2e $(addprefix molecule-,$(filter doctor,$(SCENARIOS))) fleet-tests \
         $(addprefix molecule-,$(filter-out doctor,$(wordlist 1,6,$(SCENARIOS)))) unit \
         $(addprefix molecule-,$(filter-out doctor,$(wordlist 7,99,$(SCENARIOS)))) collection lint syntax
ALL_LANES := $(sort $(addprefix lane-,$(LANES) $(addprefix molecule-,$(ALL_SCENARIOS))))
DEMO_HOSTS ?= 5
# make demo DEMO_PROVIDER=vastai (or runpod): the same fleet, discovered through that inventory plugin pointed at
# a local stand-in of the provider's API (tests/doubles/provider_api.py), with the stand-in's demo key.
DEMO_PROVIDER ?=
DEMO_PROVIDER_KEY := gpufleet-demo-provider-key
DEMO_INVENTORY := $(if $(DEMO_PROVIDER),inventories/demo-$(DEMO_PROVIDER)/$(DEMO_PROVIDER).yml,inventories/demo)

.PHONY: help bootstrap test-tools test-setup wheels images wheelhouse wheelhouse-torch-cuda next-ansible lint unit syntax collection molecule fleet-tests e2e test quick \
        demo demo-down clean $(addprefix molecule-,$(ALL_SCENARIOS)) $(ALL_LANES)

help:
	@echo "make demo       start a local demo fleet and run site.yml against it"
	@echo "make test       lint + unit tests + syntax check + molecule scenarios ($(SCENARIOS))"
	@echo "make quick      lint + unit tests + syntax check (no containers)"
	@echo "make fleet-tests  partial failure, interrupted runs, bad inputs, secret scan on container hosts"
	@echo "make e2e        make demo, then judge the demo fleet from outside (tests/e2e) and run site.yml again"
	@echo "make collection build gpufleet.fleet, ansible-test sanity on its tarball, the EE build context"
	@echo "make demo-down  stop the demo fleet"
	@echo "make mutation   mutation testing of the decision code (mutmut; minutes per module, not in make test)"

bootstrap:
	@scripts/bootstrap

# PREPARED=1 (set by make test and make molecule for their lanes): images and wheels are already there.
images: bootstrap
	@$(if $(PREPARED),:,scripts/test-images 11 12 13 20.04 22.04 24.04 24.04-systemd)

# The newest ansible-core line (requirements-next.txt, Python >= 3.12) beside the pinned one: make e2e runs check.yml
# under both (tests/e2e/test_check.py) and the second site.yml under the newest; make collection its sanity tests.
next-ansible:
	@$(if $(PREPARED),:,scripts/bootstrap-next)

wheelhouse: bootstrap
	@$(if $(PREPARED),:,scripts/wheelhouse)

# Python files without a .py suffix are named explicitly so ruff checks them too.
PY_SCRIPTS := scripts/fleet-report scripts/check-verdicts scripts/driver-bulletins scripts/offers scripts/bench-check scripts/role-docs scripts/build-collection scripts/lint-ansible scripts/gpu-smoke scripts/wheel-markers roles/supervisord/files/gpufleet-supervisor-check \
              $(wildcard scripts/bench-*)

lint: bootstrap
	$(BIN)/ruff check library module_utils callback_plugins inventory_plugins doc_fragments scripts tests roles $(PY_SCRIPTS)
	$(BIN)/pycodestyle --max-line-length 160 --ignore E402,W503,W504,E741,E203,E701,E704 library module_utils callback_plugins inventory_plugins doc_fragments
	@# one ansible-doc per plugin type (it names each plugin whose documentation does not parse, and exits 1)
	$(BIN)/ansible-doc -M library $(basename $(notdir $(wildcard library/*.py))) >/dev/null
	$(BIN)/ansible-doc -t inventory -M inventory_plugins $(basename $(notdir $(wildcard inventory_plugins/*.py))) >/dev/null
	$(BIN)/python scripts/role-docs --check
	$(BIN)/yamllint --strict .
	$(BIN)/python scripts/lint-ansible

# make test, fleet-tests and e2e run pytest with GPUFLEET_STRICT=1: a skip is allowed only for a reason listed in
# tests/skips.py (no GPU, no torch CUDA build), any other fails; every run lists the skips it took. make unit alone
# (the inner loop) keeps its skips and lists them; under make test it also runs the gate module with real torch.
export GPUFLEET_STRICT
# It lives outside the checkout (in GPUFLEET_CACHE, as scripts/lib.sh sets it; one per torch pin and Python), so a
# clean clone on a machine that made it before does not install torch again (about 40 s of the unit lane on 2 cores);
# .complete marks a whole one.
GPUFLEET_CACHE ?= $(or $(XDG_CACHE_HOME),$(HOME)/.cache)/gpufleet
export GPUFLEET_CACHE
TORCH_CPU := 2.13.0
TORCH_VENV := $(or $(GPUFLEET_CACHE),$(CURDIR)/.cache)/torch-venv-$(TORCH_CPU)-py$(shell python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
TORCH_PYTHON := $(TORCH_VENV)/bin/python

unit: bootstrap $(if $(filter 1,$(GPUFLEET_STRICT)),test-tools $(TORCH_VENV)/.complete)
	$(if $(filter 1,$(GPUFLEET_STRICT)),GPUFLEET_TORCH_PYTHON=$(TORCH_PYTHON)) $(BIN)/pytest -q --durations=10 tests/unit

# promtool, Chromium and the other tools the suites run: installed as root on Debian, else named (scripts/lib.sh).
test-tools:
	@. scripts/lib.sh && ensure_test_tools

# A Python with torch $(TORCH_CPU) (CPU build, from the wheelhouse) for tests/unit/test_gate_module.py's real-torch tests.
$(TORCH_VENV)/.complete: | wheelhouse
	rm -rf $(TORCH_VENV) && python3 -m venv $(TORCH_VENV)
	$(TORCH_VENV)/bin/pip install -q --disable-pip-version-check --no-index --find-links .wheelhouse/torch \
	  torch==$(TORCH_CPU) numpy || { rm -rf $(TORCH_VENV); echo "no torch $(TORCH_CPU) wheel for $$(python3 -V) in .wheelhouse/torch"; exit 1; }
	touch $@

syntax: bootstrap
	$(BIN)/ansible-playbook --syntax-check -i inventories/example site.yml
	$(BIN)/ansible-playbook --syntax-check -i inventories/example playbooks/*.yml

quick: lint unit syntax

# The collection gpufleet.fleet (docs/awx.md): built from the checkout, ansible-test sanity on the tarball as it
# installs (under the pinned ansible-core line and under the newest, .venv-next), then the execution environment's
# build context (ansible-builder create).
collection: bootstrap next-ansible
	scripts/collection-sanity
	scripts/collection-ee

molecule: images wheelhouse $(if $(filter doctor,$(SCENARIOS)),wheelhouse-torch-cuda)
	@$(MAKE) --no-print-directory -j$(TEST_JOBS) PREPARED=1 $(addprefix lane-molecule-,$(SCENARIOS))

# Each run starts clean without molecule's leading destroy step (an ansible-playbook run per scenario, about 10 s of a
# lane): the create step removes the platforms' containers an interrupted run left (molecule/resources/playbooks/
# create.yml) and molecule's state lives in a fresh folder of the checkout, so no stale "created"/"prepared" record
# skips a step. The closing destroy stays.
$(addprefix molecule-,$(ALL_SCENARIOS)): molecule-%: images wheelhouse
	@rm -rf $(CURDIR)/.cache/molecule/$* && mkdir -p $(CURDIR)/.cache/molecule/$*
	MOLECULE_EPHEMERAL_DIRECTORY=$(CURDIR)/.cache/molecule/$* $(BIN)/molecule test -s $*

# The doctor scenario fixes a CPU-only torch with a real CUDA build (scripts/wheelhouse.d/torch-cuda.sh, 2.9 GB).
molecule-doctor: wheelhouse-torch-cuda
wheelhouse-torch-cuda: bootstrap
	@$(if $(PREPARED),:,GPUFLEET_TORCH_CUDA=1 scripts/wheelhouse)

# Reliability suites on SSH container hosts (docs/reliability.md): partial failure, interrupted runs,
# bad inputs, secret scan.
fleet-tests: images wheelhouse
	GPUFLEET_STRICT=1 $(BIN)/pytest -q --durations=10 tests/fleet

# End to end: make demo, then what a renter must find on each demo host (tests/e2e), a second
# site.yml with changed=0 included. The demo fleet is left up for a look (make demo-down).
e2e: demo next-ansible
	GPUFLEET_STRICT=1 $(BIN)/pytest -q --durations=10 tests/e2e

# Set-up of make test: the images and the wheelhouses side by side (each waits mostly on its mirror; the wheelhouses
# one after the other, as both write .wheelhouse).
test-setup: test-tools
	@$(MAKE) --no-print-directory -j2 images wheels next-ansible
wheels: wheelhouse
	@$(MAKE) --no-print-directory wheelhouse-torch-cuda

test: test-setup
	@rm -f .cache/suites/times .cache/suites/*.why; start=$$(date +%s); \
	$(MAKE) --no-print-directory -k -j$(TEST_JOBS) PREPARED=1 GPUFLEET_STRICT=1 $(addprefix lane-,$(LANES)); rc=$$?; \
	echo "== suite times ($(TEST_JOBS) lanes)"; cat .cache/suites/times 2>/dev/null; \
	for why in .cache/suites/*.why; do [ -s "$$why" ] || continue; \
	  echo "== why $$(basename $$why .why) failed (the end of .cache/suites/$$(basename $$why .why).log, filtered)"; \
	  cat "$$why"; done; \
	if [ $$rc = 0 ]; then echo "make test: all checks passed in $$(( $$(date +%s) - start )) s"; \
	else echo "make test: FAILED after $$(( $$(date +%s) - start )) s (the suites marked FAILED above)"; exit $$rc; fi

# One suite of make test or make molecule, its output kept whole.
$(ALL_LANES): lane-%:
	@scripts/suite $* $(MAKE) --no-print-directory PREPARED=1 $*

demo: images wheelhouse
	scripts/demo-fleet up $(DEMO_HOSTS)
	$(if $(DEMO_PROVIDER),scripts/demo-fleet provider $(DEMO_PROVIDER))
	$(if $(DEMO_PROVIDER),VAST_API_KEY=$(DEMO_PROVIDER_KEY) RUNPOD_API_KEY=$(DEMO_PROVIDER_KEY)) \
	  $(BIN)/ansible-playbook -i $(DEMO_INVENTORY) site.yml
	@echo "report: $(CURDIR)/reports/latest/fleet.html (also .json .csv .md, gpufleet.prom)"
	@echo "demo fleet: $(DEMO_INVENTORY); stop it with 'make demo-down'"

demo-down:
	scripts/demo-fleet down

clean: demo-down
	rm -rf .cache .wheelhouse

# Mutation testing of the decision code (scripts/mutation, docs/testing.md): mutmut, pinned in
# requirements-mutation.txt, in a venv of its own under GPUFLEET_CACHE, on a copy of the working tree. Minutes per
# module on 2 cores: not part of make test or .ci/run. make mutation MUTATION_TARGETS="gate exit_rule" runs some.
.PHONY: mutation
mutation: bootstrap
	nice -n 19 python3 scripts/mutation $(MUTATION_TARGETS)

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
SCENARIOS ?= $(notdir $(patsubst %/molecule.yml,%,$(wildcard molecule/*/molecule.yml)))
DEMO_HOSTS ?= 5

.PHONY: help bootstrap images wheelhouse lint unit syntax molecule fleet-tests e2e test quick demo demo-down clean

help:
	@echo "make demo       start a local demo fleet and run site.yml against it"
	@echo "make test       lint + unit tests + syntax check + molecule scenarios ($(SCENARIOS))"
	@echo "make quick      lint + unit tests + syntax check (no containers)"
	@echo "make fleet-tests  partial failure, interrupted runs, bad inputs, secret scan on container hosts"
	@echo "make e2e        make demo, then judge the demo fleet from outside (tests/e2e) and run site.yml again"
	@echo "make demo-down  stop the demo fleet"

bootstrap:
	@scripts/bootstrap

images: bootstrap
	@scripts/test-images 12 13 12-systemd

wheelhouse: bootstrap
	@scripts/wheelhouse

# Python files without a .py suffix are named explicitly so ruff checks them too.
PY_SCRIPTS := scripts/fleet-report scripts/role-docs scripts/gpu-smoke roles/supervisord/files/gpufleet-supervisor-check \
              $(wildcard scripts/bench-*)

lint: bootstrap
	$(BIN)/ruff check library module_utils callback_plugins scripts tests roles $(PY_SCRIPTS)
	@for m in library/*.py; do $(BIN)/ansible-doc -M library "$$(basename $$m .py)" >/dev/null || exit 1; done
	$(BIN)/python scripts/role-docs --check
	$(BIN)/yamllint --strict .
	$(BIN)/ansible-lint

unit: bootstrap
	$(BIN)/pytest -q tests/unit

syntax: bootstrap
	$(BIN)/ansible-playbook --syntax-check -i inventories/example site.yml
	$(BIN)/ansible-playbook --syntax-check -i inventories/example playbooks/*.yml

quick: lint unit syntax

molecule: images wheelhouse
	@# The doctor scenario fixes a CPU-only torch with a real CUDA build (scripts/wheelhouse.d/torch-cuda.sh, 2.9 GB).
	@case " $(SCENARIOS) " in *" doctor "*) GPUFLEET_TORCH_CUDA=1 scripts/wheelhouse;; esac
	@set -e; for s in $(SCENARIOS); do \
	  echo "== molecule test -s $$s"; start=$$(date +%s); \
	  $(BIN)/molecule test -s $$s; \
	  echo "== molecule $$s passed in $$(( $$(date +%s) - start )) s"; \
	done

# Reliability suites on SSH container hosts (docs/reliability.md): partial failure, interrupted runs,
# bad inputs, secret scan.
fleet-tests: images wheelhouse
	@start=$$(date +%s); $(BIN)/pytest -q tests/fleet && echo "== fleet tests passed in $$(( $$(date +%s) - start )) s"

# End to end: make demo, then what a renter must find on each demo host (tests/e2e), a second
# site.yml with changed=0 included. The demo fleet is left up for a look (make demo-down).
e2e: demo
	@start=$$(date +%s); $(BIN)/pytest -q tests/e2e && echo "== e2e passed in $$(( $$(date +%s) - start )) s"

test: quick molecule fleet-tests e2e
	@echo "make test: all checks passed"

demo: images wheelhouse
	scripts/demo-fleet up $(DEMO_HOSTS)
	$(BIN)/ansible-playbook -i inventories/demo site.yml
	@echo "report: $(CURDIR)/reports/latest/fleet.html (also .json .csv .md, gpufleet.prom)"
	@echo "demo fleet: inventories/demo/hosts.yml; stop it with 'make demo-down'"

demo-down:
	scripts/demo-fleet down

clean: demo-down
	rm -rf .cache .wheelhouse

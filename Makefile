# `make up` deploys the dev stack, `make test` lints, type-checks and runs the offline tests; `make help`
# lists every target. A new target documents itself with a `## description` after its prerequisites.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STACK ?= dev
STATE_DIR ?= $(CURDIR)/state
export PULUMI_BACKEND_URL ?= file://$(STATE_DIR)
export PULUMI_SKIP_UPDATE_CHECK := true
# The pinned kind, kubectl and Pulumi CLI that `make tools` installs (gpu_tenancy/tools.py) come first on PATH.
TOOLS_DIR ?= $(CURDIR)/.tools/bin
export PATH := $(TOOLS_DIR):$(PATH)
LINT_PATHS := __main__.py components gpu_tenancy policies tests benchmarks
STACK_FILE := Pulumi.$(STACK).yaml
MODE := $(shell sed -n 's/^ *gpu-tenancy:mode: *\([^ #]*\).*/\1/p' $(STACK_FILE) 2>/dev/null | tr -d "\"'")
# Modes with a kind lab on this host (sim, sim-nvml): they need a Docker engine and kind; real stacks only
# reach a cluster and hosts.
SIMULATED := $(filter sim sim-nvml,$(MODE))
PREREQUISITES := $(if $(filter real,$(MODE)),kubectl pulumi,docker kind kubectl pulumi)
comma := ,
empty :=
space := $(empty) $(empty)
STACK_TOOLS := $(subst $(space),$(comma),$(filter-out docker,$(PREREQUISITES)))
# Only a simulated stack changes without asking. Anything else (real hosts) gets Pulumi's own prompt after the
# preview, and `pulumi up/destroy` refuse to run without a terminal, unless CONFIRM=1.
AUTO_APPROVE := $(if $(SIMULATED),--yes,$(if $(filter 1,$(CONFIRM)),--yes))
# Targets that reach a stack: the prerequisite check runs before the venv is built for them.
DEPLOY_GOALS := up preview destroy
# kind and the docker CLI follow the current Docker context; pulumi-docker only DOCKER_HOST (else the
# default socket). Pin both to the same daemon unless DOCKER_HOST is set already.
ifneq ($(and $(SIMULATED),$(filter $(DEPLOY_GOALS),$(MAKECMDGOALS))),)
export DOCKER_HOST ?= $(shell docker context inspect --format '{{.Endpoints.docker.Host}}' 2>/dev/null)
endif

.DEFAULT_GOAL := help
.PHONY: help venv tools preflight up preview destroy plan test lint typecheck unit e2e e2e-nvml e2e-faults bench promotion-diff

help: ## List the targets
	@echo "usage: make <target> [STACK=<name>: Pulumi.<name>.yaml, default dev] [CONFIRM=1: no prompt on a real stack]"
	@awk 'BEGIN {FS = ":[^#]*## "} /^[a-zA-Z0-9_.-]+:[^#]*## / {printf "  %-22s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

$(BIN)/.installed: requirements.txt requirements-dev.txt | $(if $(filter $(DEPLOY_GOALS),$(MAKECMDGOALS)),preflight)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	touch $@

venv: $(BIN)/.installed ## Create .venv with the pinned runtime and test dependencies

tools: ## Install the pinned kind, kubectl and Pulumi CLI into .tools/bin (checksum-verified) unless on PATH at that version
	@$(PYTHON) -m gpu_tenancy.tools install --dir $(TOOLS_DIR)

preflight: ## Check the stack file, Docker engine (sim, sim-nvml), passphrase; install the stack's tools if needed
	@test -f $(STACK_FILE) || { echo "$(STACK_FILE) not found: STACK=$(STACK) names no stack file (have: $(wildcard Pulumi.*.yaml))"; exit 1; }
	@if [ "$(MODE)" != real ]; then \
	  command -v docker >/dev/null 2>&1 || { echo "missing prerequisite(s): docker (see README: Prerequisites)"; exit 1; }; \
	  docker info >/dev/null 2>&1 || { echo "docker: the Docker engine is not reachable (is the daemon running, may this user use it?)"; exit 1; }; fi
	@test -n "$$PULUMI_CONFIG_PASSPHRASE$$PULUMI_CONFIG_PASSPHRASE_FILE" || { echo "set PULUMI_CONFIG_PASSPHRASE (secrets in the local state are encrypted with it)"; exit 1; }
	@$(PYTHON) -m gpu_tenancy.tools install --dir $(TOOLS_DIR) --only $(STACK_TOOLS)

up: preflight venv ## Deploy STACK (created on first use); previews with the policy pack first
	mkdir -p $(STATE_DIR)
	pulumi stack select --create $(STACK)
	pulumi up --stack $(STACK) --policy-pack policies $(AUTO_APPROVE)

preview: preflight venv ## What `up` would change, with the policy pack (creates STACK on first use)
	mkdir -p $(STATE_DIR)
	pulumi stack select --create $(STACK)
	pulumi preview --stack $(STACK) --policy-pack policies --diff

destroy: preflight venv ## Delete everything STACK deployed
	pulumi destroy --stack $(STACK) $(AUTO_APPROVE)

plan: venv ## The planner's per-tenant, per-GPU report for STACK's workloads (PNG=<path> also draws it); exit 1: does not fit
	@test -f $(STACK_FILE) || { echo "$(STACK_FILE) not found: STACK=$(STACK) names no stack file (have: $(wildcard Pulumi.*.yaml))"; exit 1; }
	@$(BIN)/python -m gpu_tenancy.plan_cli report $(STACK_FILE) $(if $(PNG),--png $(PNG)) $(if $(WIDTH),--width $(WIDTH))

lint: venv ## ruff
	$(BIN)/ruff check $(LINT_PATHS)

typecheck: venv ## mypy
	$(BIN)/mypy

unit: venv ## Offline tests (no Docker, no Pulumi CLI)
	$(BIN)/pytest tests --ignore=tests/integration -q

test: lint typecheck unit ## lint + typecheck + unit

# The live suite on a throwaway copy of an example stack (tests/integration/support.py E2E_STACKS). Strict: a
# check that cannot run fails the run; E2E_STRICT=0 lets it skip instead (a local dry run).
E2E_STRICT ?= 1
FAULT_CHECKS := tests/integration/test_faults.py
E2E_SUITE = GPU_TENANCY_E2E=1 GPU_TENANCY_E2E_STRICT=$(E2E_STRICT) GPU_TENANCY_E2E_STACK=$(1) $(BIN)/pytest $(2) -m e2e -v -rs

e2e: venv tools ## Live suite: deploy a throwaway copy of the dev stack (sim) on this host, check it, destroy it
	$(call E2E_SUITE,dev,tests/integration --ignore=$(FAULT_CHECKS))

e2e-nvml: venv tools ## Live suite on a copy of dev-nvml (sim-nvml: HAMi's device plugin on a mock NVML)
	$(call E2E_SUITE,dev-nvml,tests/integration --ignore=$(FAULT_CHECKS))

e2e-faults: venv tools ## Live fault checks (tests/integration/test_faults.py) on a throwaway copy of the dev stack
	$(call E2E_SUITE,dev,$(FAULT_CHECKS))

promotion-diff: venv ## Print what each promotion (dev, dev-nvml, gpu) changes; fails if a tenant layer differs
	$(BIN)/pytest tests/test_promotion.py -q -s -k tenant_layer_identical

bench: venv ## Benchmarks: program evaluation, agent reconcile, planner
	$(BIN)/python benchmarks/program_eval.py
	$(BIN)/python benchmarks/agent_reconcile.py
	$(BIN)/python benchmarks/planner_bench.py

.PHONY: kubeconfig kubeconfig-management status
kubeconfig: venv ## Write TENANT's admin kubeconfig (mode 0600) under state/kubeconfigs and print its path
	@test -n "$(TENANT)" || { echo "kubeconfig: set TENANT=<name>, e.g. make kubeconfig TENANT=tenant-a" >&2; exit 2; }
	@$(BIN)/python -m gpu_tenancy.kubeconfig_cli --stack $(STACK) --tenant "$(TENANT)" --dir $(STATE_DIR)/kubeconfigs

kubeconfig-management: venv ## Write the management cluster's kubeconfig (mode 0600) and print its path
	@$(BIN)/python -m gpu_tenancy.kubeconfig_cli --stack $(STACK) --management --dir $(STATE_DIR)/kubeconfigs

status: venv ## Live GPU allocation per tenant and GPU, pending pods and quota (JSON=1 for --json)
	@$(BIN)/python -m gpu_tenancy.status_cli --stack $(STACK) $(if $(filter 1,$(JSON)),--json)

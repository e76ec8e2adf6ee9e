# `make up` deploys the dev stack, `make test` lints, type-checks and runs the offline tests; `make help`
# lists every target. A new target documents itself with a `## description` after its prerequisites.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STACK ?= dev
STATE_DIR ?= $(CURDIR)/state
export PULUMI_BACKEND_URL ?= file://$(STATE_DIR)
export PULUMI_SKIP_UPDATE_CHECK := true
LINT_PATHS := __main__.py components gpu_tenancy policies tests benchmarks
STACK_FILE := Pulumi.$(STACK).yaml
MODE := $(shell sed -n 's/^ *gpu-tenancy:mode: *\([^ #]*\).*/\1/p' $(STACK_FILE) 2>/dev/null | tr -d "\"'")
# Modes with a kind lab on this host (sim, sim-nvml): they need a Docker engine and kind; real stacks only
# reach a cluster and hosts.
SIMULATED := $(filter sim sim-nvml,$(MODE))
PREREQUISITES := $(if $(filter real,$(MODE)),kubectl pulumi,docker kind kubectl pulumi)
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
.PHONY: help venv preflight up preview destroy test lint typecheck unit e2e e2e-nvml bench promotion-diff

help: ## List the targets
	@echo "usage: make <target> [STACK=<name>: Pulumi.<name>.yaml, default dev] [CONFIRM=1: no prompt on a real stack]"
	@awk 'BEGIN {FS = ":[^#]*## "} /^[a-zA-Z0-9_.-]+:[^#]*## / {printf "  %-22s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

$(BIN)/.installed: requirements.txt requirements-dev.txt | $(if $(filter $(DEPLOY_GOALS),$(MAKECMDGOALS)),preflight)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	touch $@

venv: $(BIN)/.installed ## Create .venv with the pinned runtime and test dependencies

preflight: ## Check the stack file, tools on PATH, Docker engine (sim, sim-nvml), passphrase
	@test -f $(STACK_FILE) || { echo "$(STACK_FILE) not found: STACK=$(STACK) names no stack file (have: $(wildcard Pulumi.*.yaml))"; exit 1; }
	@missing=""; for tool in $(PREREQUISITES); do \
	  command -v $$tool >/dev/null 2>&1 || missing="$$missing $$tool"; done; \
	if [ -n "$$missing" ]; then echo "missing prerequisite(s):$$missing (see README: Prerequisites)"; exit 1; fi
	@if [ "$(MODE)" != real ]; then docker info >/dev/null 2>&1 || { echo "docker: the Docker engine is not reachable (is the daemon running, may this user use it?)"; exit 1; }; fi
	@test -n "$$PULUMI_CONFIG_PASSPHRASE$$PULUMI_CONFIG_PASSPHRASE_FILE" || { echo "set PULUMI_CONFIG_PASSPHRASE (secrets in the local state are encrypted with it)"; exit 1; }

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

lint: venv ## ruff
	$(BIN)/ruff check $(LINT_PATHS)

typecheck: venv ## mypy
	$(BIN)/mypy

unit: venv ## Offline tests (no Docker, no Pulumi CLI)
	$(BIN)/pytest tests --ignore=tests/integration -q

test: lint typecheck unit ## lint + typecheck + unit

# The live suite on a throwaway copy of an example stack (tests/integration/support.py E2E_STACKS).
E2E_SUITE = GPU_TENANCY_E2E=1 GPU_TENANCY_E2E_STACK=$(1) $(BIN)/pytest tests/integration -m e2e -v -rs

e2e: venv ## Live suite: deploy a throwaway copy of the dev stack (sim) on this host, check it, destroy it
	$(call E2E_SUITE,dev)

e2e-nvml: venv ## Live suite on a copy of dev-nvml (sim-nvml: HAMi's device plugin on a mock NVML)
	$(call E2E_SUITE,dev-nvml)

promotion-diff: venv ## Print what each promotion (dev, dev-nvml, gpu) changes; fails if a tenant layer differs
	$(BIN)/pytest tests/test_promotion.py -q -s -k tenant_layer_identical

bench: venv ## Benchmarks: program evaluation, agent reconcile, planner
	$(BIN)/python benchmarks/program_eval.py
	$(BIN)/python benchmarks/agent_reconcile.py
	$(BIN)/python benchmarks/planner_bench.py

.PHONY: kubeconfig kubeconfig-env kubeconfig-management status tenants
# For `eval "$(make -s kubeconfig-env TENANT=...)"`: on success `export KUBECONFIG='<path>'`; on any failure
# (no TENANT, unknown tenant, pulumi or venv failing) a statement that points KUBECONFIG at /dev/null, so
# kubectl reaches no cluster (an empty KUBECONFIG would fall back to ~/.kube/config), and fails.
KUBECONFIG_REFUSED := export KUBECONFIG=/dev/null; echo "kubeconfig: failed (see above); KUBECONFIG=/dev/null" >&2; false
kubeconfig-env: ## Print `export KUBECONFIG=...` for eval, or on any error a statement that fails and points it nowhere
	@path=$$($(MAKE) -s --no-print-directory kubeconfig TENANT="$(TENANT)" STACK="$(STACK)" STATE_DIR="$(STATE_DIR)") \
	  && [ -f "$$path" ] && case "$$path" in *"'"*) false;; esac \
	  && printf "export KUBECONFIG='%s'\n" "$$path" \
	  || { printf '%s\n' '$(KUBECONFIG_REFUSED)'; exit 1; }

kubeconfig: venv ## Write TENANT's admin kubeconfig (mode 0600) under state/kubeconfigs and print its path
	@test -n "$(TENANT)" || { echo "kubeconfig: set TENANT=<name>, e.g. make kubeconfig TENANT=tenant-a" >&2; exit 2; }
	@$(BIN)/python -m gpu_tenancy.kubeconfig_cli --stack $(STACK) --tenant "$(TENANT)" --dir $(STATE_DIR)/kubeconfigs

kubeconfig-management: venv ## Write the management cluster's kubeconfig (mode 0600) and print its path
	@$(BIN)/python -m gpu_tenancy.kubeconfig_cli --stack $(STACK) --management --dir $(STATE_DIR)/kubeconfigs

# Optional for status and tenants: TENANT="a b" (only these), JSON=1; for status also PODS=1 (per pod),
# WATCH=<seconds> (redraw in place), SAVE=<file> (the objects read, for --objects), PNG=<file>.
STATUS_OPTIONS = $(foreach t,$(TENANT),--tenant $(t)) $(if $(filter 1,$(JSON)),--json)
status: venv ## Live GPU allocation per tenant and GPU, why pods wait, quota (TENANT=, PODS=1, WATCH=s, JSON=1)
	@$(BIN)/python -m gpu_tenancy.status_cli --stack $(STACK) $(STATUS_OPTIONS) $(if $(filter 1,$(PODS)),--pods) \
	  $(if $(WATCH),--watch $(WATCH)) $(if $(SAVE),--save $(SAVE)) $(if $(PNG),--png $(PNG))

tenants: venv ## One row per tenant: version, control plane, nodes, GPUs, pods; exit 1 if any is unhealthy
	@$(BIN)/python -m gpu_tenancy.tenants_cli --stack $(STACK) $(STATUS_OPTIONS)

# Two commands: `make up` (deploy the dev stack) and `make test` (lint, type-check, offline tests).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STACK ?= dev
STATE_DIR ?= $(CURDIR)/state
export PULUMI_BACKEND_URL ?= file://$(STATE_DIR)
export PULUMI_SKIP_UPDATE_CHECK := true
LINT_PATHS := __main__.py components gpu_tenancy policies tests benchmarks
# sim stacks need a Docker engine and kind on this host; real stacks only reach a cluster and hosts.
MODE := $(shell sed -n 's/^ *gpu-tenancy:mode: *//p' Pulumi.$(STACK).yaml 2>/dev/null)
PREREQUISITES := $(if $(filter real,$(MODE)),kubectl pulumi,docker kind kubectl pulumi)

.PHONY: venv preflight up preview destroy test lint typecheck unit e2e bench promotion-diff

$(BIN)/.installed: requirements.txt requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	touch $@

venv: $(BIN)/.installed

preflight:
	@missing=""; for tool in $(PREREQUISITES); do \
	  command -v $$tool >/dev/null 2>&1 || missing="$$missing $$tool"; done; \
	if [ -n "$$missing" ]; then echo "missing prerequisite(s):$$missing (see README: Prerequisites)"; exit 1; fi
	@if [ "$(MODE)" != real ]; then docker info >/dev/null 2>&1 || { echo "docker: the Docker engine is not reachable (is the daemon running, may this user use it?)"; exit 1; }; fi
	@test -n "$$PULUMI_CONFIG_PASSPHRASE$$PULUMI_CONFIG_PASSPHRASE_FILE" || { echo "set PULUMI_CONFIG_PASSPHRASE (secrets in the local state are encrypted with it)"; exit 1; }

up: venv preflight
	mkdir -p $(STATE_DIR)
	pulumi stack select $(STACK) 2>/dev/null || pulumi stack init $(STACK)
	pulumi up --stack $(STACK) --policy-pack policies --yes

preview: venv preflight
	pulumi preview --stack $(STACK) --policy-pack policies --diff

destroy: venv preflight
	pulumi destroy --stack $(STACK) --yes

lint: venv
	$(BIN)/ruff check $(LINT_PATHS)

typecheck: venv
	$(BIN)/mypy

unit: venv
	$(BIN)/pytest tests --ignore=tests/integration -q

test: lint typecheck unit

e2e: venv
	GPU_TENANCY_E2E=1 $(BIN)/pytest tests/integration -m e2e -v -rs

promotion-diff: venv
	$(BIN)/pytest tests/test_promotion.py -q -s -k tenant_layer_identical

bench: venv
	$(BIN)/python benchmarks/program_eval.py
	$(BIN)/python benchmarks/agent_reconcile.py
	$(BIN)/python benchmarks/planner_bench.py

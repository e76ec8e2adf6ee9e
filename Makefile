# `make up` deploys the dev stack, `make test` lints, type-checks and runs the offline tests; `make help`
# lists every target. A new target documents itself with a `## description` after its prerequisites.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STACK ?= dev
STATE_DIR ?= $(CURDIR)/state
export PULUMI_BACKEND_URL ?= file://$(STATE_DIR)
export PULUMI_SKIP_UPDATE_CHECK := true
# The pinned kind, kubectl and Pulumi CLI that `make tools` installs (gpu_tenancy/cli/tools.py) come first on PATH.
TOOLS_DIR ?= $(CURDIR)/.tools/bin
export PATH := $(TOOLS_DIR):$(PATH)
LINT_PATHS := __main__.py components gpu_tenancy policies tests benchmarks
# The project's command line (gpu_tenancy/cli/commands.py), installed into the venv by `make runtime`.
GPU_TENANCY := $(BIN)/gpu-tenancy
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
# A simulated stack needs no passphrase typed by hand: with neither PULUMI_CONFIG_PASSPHRASE nor
# PULUMI_CONFIG_PASSPHRASE_FILE set, preflight generates $(STATE_DIR)/passphrase (mode 0600) and make passes it on
# to every pulumi call. A real stack's secrets (SSH keys, kubeconfigs) stay under a passphrase its user chooses.
PASSPHRASE_FILE := $(STATE_DIR)/passphrase
GENERATE_PASSPHRASE := $(and $(SIMULATED),$(if $(PULUMI_CONFIG_PASSPHRASE)$(PULUMI_CONFIG_PASSPHRASE_FILE),,yes))
ifneq ($(and $(GENERATE_PASSPHRASE),$(or $(wildcard $(PASSPHRASE_FILE)),$(filter up preview destroy,$(MAKECMDGOALS)))),)
export PULUMI_CONFIG_PASSPHRASE_FILE := $(PASSPHRASE_FILE)
endif
# Only a simulated stack changes without asking. Anything else (real hosts) gets Pulumi's own prompt after the
# preview, and `pulumi up/destroy` refuse to run without a terminal, unless CONFIRM=1.
AUTO_APPROVE := $(if $(SIMULATED),--yes,$(if $(filter 1,$(CONFIRM)),--yes))
# Targets that reach a stack. preview and destroy check their prerequisites before the venv is built; up builds
# the runtime venv first, so that its preflight names every problem of the host at once (`make doctor`'s checks).
DEPLOY_GOALS := up preview destroy
UP_GOAL := $(filter up,$(MAKECMDGOALS))
DOCKER_INSTALL := install Docker Engine (https://docs.docker.com/engine/install/, or your distribution's docker.io package) and let this user use it (sudo usermod -aG docker \$$USER, then log in again)
# kind and the docker CLI follow the current Docker context; pulumi-docker only DOCKER_HOST (else the
# default socket). Pin both to the same daemon unless DOCKER_HOST is set already.
ifneq ($(and $(SIMULATED),$(filter $(DEPLOY_GOALS),$(MAKECMDGOALS))),)
export DOCKER_HOST ?= $(shell docker context inspect --format '{{.Endpoints.docker.Host}}' 2>/dev/null)
endif

.DEFAULT_GOAL := help
.PHONY: help runtime venv tools stack-file preflight charts up doctor preview destroy plan test lint typecheck unit e2e e2e-nvml e2e-faults bench promotion-diff mutation

help: ## List the targets
	@echo "usage: make <target> [STACK=<name>: Pulumi.<name>.yaml, default dev] [CONFIRM=1: no prompt on a real stack]"
	@awk 'BEGIN {FS = ":[^#]*## "} /^[a-zA-Z0-9_.-]+:[^#]*## / {printf "  %-22s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

# The runtime (program, planner, doctor and the other CLIs), then the tests' tools on top, in the one .venv.
$(BIN)/.runtime: requirements.txt gpu_tenancy/hami/agent/requirements.txt | $(if $(UP_GOAL),stack-file,$(if $(filter $(DEPLOY_GOALS),$(MAKECMDGOALS)),preflight))
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -c gpu_tenancy/hami/agent/requirements.txt -r requirements.txt
	touch $@

# `gpu-tenancy`: this checkout installed editable (the code runs from here), built by the venv's own setuptools
# (65 on Python 3.11), for which wheel 0.45 is the last with a bdist_wheel.
$(GPU_TENANCY): pyproject.toml $(BIN)/.runtime
	$(BIN)/pip install --quiet --disable-pip-version-check wheel==0.45.1
	$(BIN)/pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	touch $@

$(BIN)/.installed: $(GPU_TENANCY) requirements-dev.txt
	$(BIN)/pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	touch $@

runtime: $(BIN)/.runtime $(GPU_TENANCY) ## Create .venv with the pinned runtime dependencies only (what deploys and the CLIs need)

venv: $(BIN)/.installed ## Create .venv with the pinned runtime and test dependencies

tools: ## Install the pinned kind, kubectl and Pulumi CLI into .tools/bin (checksum-verified) unless on PATH at that version
	@$(PYTHON) -m gpu_tenancy tools install --dir $(TOOLS_DIR)

stack-file: ## Check that STACK names a stack file
	@test -f $(STACK_FILE) || { echo "$(STACK_FILE) not found: STACK=$(STACK) names no stack file (have: $(wildcard Pulumi.*.yaml))"; exit 1; }

preflight: stack-file | $(if $(UP_GOAL),runtime) ## Install the stack's tools, check Docker, the passphrase and (up) the whole host: every problem at once
	@status=0; \
	if [ -n "$(GENERATE_PASSPHRASE)" ] && [ ! -e "$(PASSPHRASE_FILE)" ]; then \
	  mkdir -p "$(STATE_DIR)" && (umask 077 && set -C && od -An -N32 -tx1 /dev/urandom | tr -d ' \n' > "$(PASSPHRASE_FILE)") \
	  && echo "preflight: generated $(PASSPHRASE_FILE) (mode 0600), the passphrase of this stack's secrets: keep it with ./state"; fi; \
	$(PYTHON) -m gpu_tenancy tools install --dir $(TOOLS_DIR) --only $(STACK_TOOLS) || status=1; \
	if [ -n "$(UP_GOAL)" ]; then \
	  $(GPU_TENANCY) doctor --stack $(STACK) --state-dir $(STATE_DIR) --before-up || status=1; \
	else \
	  if [ "$(MODE)" != real ]; then \
	    if ! command -v docker >/dev/null 2>&1; then echo "problem: docker: not found on PATH. Fix: $(DOCKER_INSTALL)"; status=1; \
	    elif ! docker info >/dev/null 2>&1; then echo "problem: docker: the Docker engine does not answer \`docker info\`. Fix: start it (sudo systemctl start docker) and let this user use it (sudo usermod -aG docker \$$USER, then log in again)"; status=1; fi; \
	  fi; \
	  test -n "$$PULUMI_CONFIG_PASSPHRASE$$PULUMI_CONFIG_PASSPHRASE_FILE" || { echo "problem: passphrase: not set. Fix: export PULUMI_CONFIG_PASSPHRASE=<yours> (secrets in the local state are encrypted with it)"; status=1; }; \
	fi; \
	exit $$status

# The Helm charts STACK installs, pulled once into .charts/ and checked against the sha256 their repository's index
# publishes, recorded in .charts/lock.json; the program installs from there, so later runs fetch nothing
# (gpu_tenancy/contract/chart_lock.py). A chart the lock records whose repository now serves other content is
# refused; RELOCK=<chart>[,<chart>] takes what its repository publishes now.
charts: runtime ## Pull STACK's Helm charts once into .charts/, verified and locked (RELOCK=kamaji: take its new build)
	@$(GPU_TENANCY) charts --stack $(STACK) $(foreach chart,$(subst $(comma),$(space),$(RELOCK)),--relock $(chart))

# `make doctor`'s host checks first, in preflight (nothing is created when they fail), then an `up` that
# refreshes from the live lab (a worker removed or stopped by hand, an image gone) before it diffs, and builds
# again each image the stack built that Docker no longer has (`docker image prune -a`; no refresh sees that).
up: preflight runtime charts ## Deploy STACK (created on first use): host checks, refresh, then preview with the policy pack
	mkdir -p $(STATE_DIR)
	pulumi stack select --create $(STACK)
	replace=$$($(GPU_TENANCY) doctor --stack $(STACK) --missing-images) && \
	  pulumi up --stack $(STACK) --refresh --policy-pack policies $(AUTO_APPROVE) $$replace

doctor: runtime ## Check this host and, when deployed, the lab: one line per problem with its fix (exit 1 if any)
	@$(GPU_TENANCY) doctor --stack $(STACK) --state-dir $(STATE_DIR)

preview: preflight runtime charts ## What `up` would change, with the policy pack (creates STACK on first use)
	mkdir -p $(STATE_DIR)
	pulumi stack select --create $(STACK)
	pulumi preview --stack $(STACK) --policy-pack policies --diff

# A sim lab whose kind cluster is already gone cannot answer for its Kubernetes objects: those are dropped from
# the state (pulumi-kubernetes deleteUnreachable, during the refresh) and the workers leave without removing
# their Nodes (GPU_TENANCY_LAB_GONE); both say so per resource. Only when `doctor --lab-gone` saw the cluster gone.
# HOSTS_OFF="<worker> ...": GPU hosts that are powered off or gone for good. Their reset (the join's delete, over
# SSH) cannot run: everything else is destroyed first, then those joins leave the state, then the rest goes.
destroy: preflight runtime ## Delete everything STACK deployed (also when its kind cluster was deleted by hand; HOSTS_OFF=: hosts that are off)
	@if [ -n "$(HOSTS_OFF)" ]; then \
	  urns=$$($(GPU_TENANCY) doctor --stack $(STACK) --hosts-off "$(HOSTS_OFF)") || exit 1; \
	  echo "destroy: $(HOSTS_OFF) cannot be reset over SSH: destroying everything else first"; \
	  pulumi destroy --stack $(STACK) --continue-on-error $(AUTO_APPROVE) || true; \
	  for urn in $$urns; do pulumi state delete --stack $(STACK) --yes "$$urn" || exit 1; done; \
	  pulumi destroy --stack $(STACK) $(AUTO_APPROVE); \
	elif $(GPU_TENANCY) doctor --stack $(STACK) --lab-gone; then \
	  echo "destroy: the kind cluster of stack $(STACK) is gone; dropping its Kubernetes objects from the state"; \
	  GPU_TENANCY_LAB_GONE=1 PULUMI_K8S_DELETE_UNREACHABLE=true pulumi destroy --stack $(STACK) --refresh $(AUTO_APPROVE); \
	else \
	  pulumi destroy --stack $(STACK) $(AUTO_APPROVE); \
	fi

plan: runtime ## The planner's per-tenant, per-GPU report for STACK's workloads (PNG=<path> also draws it); fails if a replica fits in no order
	@test -f $(STACK_FILE) || { echo "$(STACK_FILE) not found: STACK=$(STACK) names no stack file (have: $(wildcard Pulumi.*.yaml))"; exit 1; }
	@# Exit 3, a replica that fits in some orders only, is printed but advisory (as policy gpu-plan-order).
	@$(GPU_TENANCY) plan report $(STACK_FILE) $(if $(PNG),--png $(PNG)) $(if $(WIDTH),--width $(WIDTH)) \
		|| { code=$$?; [ $$code -eq 3 ] || exit $$code; }

lint: venv ## ruff
	$(BIN)/ruff check $(LINT_PATHS)

typecheck: venv ## mypy
	$(BIN)/mypy

unit: venv ## Offline tests (no Docker, no Pulumi CLI), with the real control-plane tier when Go is installed
	@$(BIN)/python -m tests.realcp.build --if-go
	$(BIN)/pytest tests --ignore=tests/integration -q

realcp: venv ## Build (or reuse) etcd, kube-apiserver/scheduler/controller-manager and kwok from their Go modules
	$(BIN)/python -m tests.realcp.build

test: lint typecheck unit ## lint + typecheck + unit

# Mutation testing: mutmut (configured under [tool.mutmut] in pyproject.toml), then the mutants it does not make
# (tests/mutation_operators.py: a dropped list entry, a manifest enum swapped, a dict path one key short or long).
# By default only the modules of only_mutate changed since BASE (default main; committed or not, and new files):
# `git diff --name-only` against the merge base. MODULES="gpu_tenancy/builders/metallb/netpool.py" picks modules,
# ALL=1 runs every module of only_mutate. The first run collects which tests reach which function (about a full
# suite's time); later runs reuse that and rerun only the mutants of changed functions. After adding or changing
# tests, remove mutants/ first: mutmut 3.8.1's incremental stats for new tests replaced the older tests' coverage
# here, so mutants then ran against the new tests only. Property tests run derandomised. FRESH=1 runs mutmut's own
# mutants each in a fresh pytest on the module's covering tests instead (no stats run: for a module every program
# run reaches, where `mutmut run` takes hours).
MUTATION_MODULES = $(shell sed -n '/^only_mutate = \[/,/^\]/s/^ *"\([^"]*\)",*/\1/p' pyproject.toml 2>/dev/null)
BASE ?= main
CHANGED_FILES = $(shell git diff --name-only "$$(git merge-base $(BASE) HEAD)" 2>/dev/null; git ls-files --others --exclude-standard 2>/dev/null)
MODULES ?= $(if $(filter 1,$(ALL)),$(MUTATION_MODULES),$(filter $(MUTATION_MODULES),$(CHANGED_FILES)))
$(BIN)/mutmut: requirements-mutation.txt | venv
	$(BIN)/pip install --quiet --disable-pip-version-check -r requirements-mutation.txt
	touch $@

mutation: $(BIN)/mutmut ## Mutation score (mutmut and tests/mutation_operators.py) per module changed since BASE=main (MODULES="a.py ..." or ALL=1 for others, FRESH=1: mutmut's mutants in fresh pytests); exit 1 below 90 %
	@if [ -z "$(strip $(MODULES))" ]; then echo "mutation: no module of only_mutate changed since $(BASE) (MODULES=... or ALL=1 picks some)"; exit 0; fi; \
	mkdir -p mutants && ln -sfn ../.venv mutants/.venv; \
	for module in $(MODULES); do \
	  name=$$(echo "$${module%.py}" | tr / .); \
	  echo "== $$module"; \
	  $(if $(FRESH),GPU_TENANCY_SHARED=$(CURDIR)/../shared $(BIN)/python tests/mutation_operators.py run --mutmut "$$module",CI= HYPOTHESIS_PROFILE=ci GPU_TENANCY_SHARED=$(CURDIR)/../shared $(BIN)/mutmut run --max-children $(or $(JOBS),2) "$$name.*") \
	    > mutants/last-run.log 2>&1 || { tail -20 mutants/last-run.log; exit 1; }; \
	  GPU_TENANCY_SHARED=$(CURDIR)/../shared $(BIN)/python tests/mutation_operators.py run "$$module" \
	    > mutants/last-extra.log 2>&1 || { tail -20 mutants/last-extra.log; exit 1; }; \
	done; \
	$(BIN)/python tests/mutation_scores.py --fail-under 90 $(MODULES)

# The live suite on a throwaway copy of an example stack (tests/integration/support.py E2E_STACKS). Strict: a
# check that cannot run fails the run; E2E_STRICT=0 lets it skip instead (a local dry run).
E2E_STRICT ?= 1
FAULT_CHECKS := tests/integration/test_faults.py
# FAULTS="test_f1 or test_f2" runs some of them (a pytest -k expression; CI splits them over several jobs).
E2E_SUITE = GPU_TENANCY_E2E=1 GPU_TENANCY_E2E_STRICT=$(E2E_STRICT) GPU_TENANCY_E2E_STACK=$(1) $(BIN)/pytest $(2) -m e2e -v -rs

e2e: venv tools ## Live suite: deploy a throwaway copy of the dev stack (sim) on this host, check it, destroy it
	$(call E2E_SUITE,dev,tests/integration --ignore=$(FAULT_CHECKS))

e2e-nvml: venv tools ## Live suite on a copy of dev-nvml (sim-nvml: HAMi's device plugin on a mock NVML)
	$(call E2E_SUITE,dev-nvml,tests/integration --ignore=$(FAULT_CHECKS))

e2e-faults: venv tools ## Live fault checks (tests/integration/test_faults.py) on a throwaway copy of the dev stack
	$(call E2E_SUITE,dev,$(FAULT_CHECKS) $(if $(FAULTS),-k "$(FAULTS)"))

# Promotions checked by `make promotion-diff` (from:to stack names); PROMOTIONS="dev:gpu" checks one.
PROMOTIONS ?= dev:gpu dev:dev-nvml dev-nvml:gpu
promotion-diff: venv ## Print what each promotion changes; fails if a tenant layer or a plan differs
	$(BIN)/pytest tests/test_promotion.py -q -s -k tenant_layer_identical
	@status=0; for step in $(PROMOTIONS); do \
	  $(GPU_TENANCY) promotion Pulumi.$${step%%:*}.yaml Pulumi.$${step##*:}.yaml || status=1; \
	done; exit $$status

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

kubeconfig: runtime ## Write TENANT's admin kubeconfig (mode 0600) under state/kubeconfigs and print its path
	@test -n "$(TENANT)" || { echo "kubeconfig: set TENANT=<name>, e.g. make kubeconfig TENANT=tenant-a" >&2; exit 2; }
	@$(GPU_TENANCY) kubeconfig --stack $(STACK) --tenant "$(TENANT)" --dir $(STATE_DIR)/kubeconfigs

kubeconfig-management: runtime ## Write the management cluster's kubeconfig (mode 0600) and print its path
	@$(GPU_TENANCY) kubeconfig --stack $(STACK) --management --dir $(STATE_DIR)/kubeconfigs

# Optional for status and tenants: TENANT="a b" (only these), JSON=1; for status also PODS=1 (per pod),
# WATCH=<seconds> (redraw in place), SAVE=<file> (the objects read, for --objects), PNG=<file>.
STATUS_OPTIONS = $(foreach t,$(TENANT),--tenant $(t)) $(if $(filter 1,$(JSON)),--json)
status: runtime ## Live GPU allocation per tenant and GPU, why pods wait, quota (TENANT=, PODS=1, WATCH=s, JSON=1)
	@$(GPU_TENANCY) status --stack $(STACK) $(STATUS_OPTIONS) $(if $(filter 1,$(PODS)),--pods) \
	  $(if $(WATCH),--watch $(WATCH)) $(if $(SAVE),--save $(SAVE)) $(if $(PNG),--png $(PNG))

tenants: runtime ## One row per tenant: version, control plane, nodes, GPUs, pods; exit 1 if any is unhealthy
	@$(GPU_TENANCY) tenants --stack $(STACK) $(STATUS_OPTIONS)

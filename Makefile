# One entry point for people and CI. The README's quick start is `make demo`
# and `make test`; everything they need is created on first use.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
DEVCLUSTER := $(PYTHON) devcluster/devcluster.py
# Passed to pytest by `make test`, e.g. make test PYTEST_ARGS="-m 'not slow'"
PYTEST_ARGS ?=
CLUSTER_ENV = eval "$$($(DEVCLUSTER) env)"
# Port bases: the open cluster's ($$TONY_DEVCLUSTER_PORT_BASE, devcluster's
# default 19000), the secure cluster 600 above it and the four-node chaos
# cluster 900 above it. One cluster uses base+20 to base+97 and the Airflow
# stack base+380 and base+432, so the three ranges never overlap and a CI run
# with TONY_DEVCLUSTER_PORT_BASE=20400 uses 20400, 21000 and 21300.
PORT_BASE := $(or $(TONY_DEVCLUSTER_PORT_BASE),19000)
SECURE_PORT_BASE ?= $(shell echo $$(( $(PORT_BASE) + 600 )))
CHAOS_PORT_BASE ?= $(or $(TONY_CHAOS_PORT_BASE),$(shell echo $$(( $(PORT_BASE) + 900 ))))
# The HA profile (ZooKeeper, two RMs, two NameNodes; devcluster/dc_ha.py): 1200 above the base.
HA_PORT_BASE ?= $(or $(TONY_HA_PORT_BASE),$(shell echo $$(( $(PORT_BASE) + 1200 ))))
# The Kerberized HA profile (the HA profile with a KDC, SPNEGO and a second HDFS): 1500 above it.
SECURE_HA_PORT_BASE ?= $(or $(TONY_SECURE_HA_PORT_BASE),$(shell echo $$(( $(PORT_BASE) + 1500 ))))
# `make cluster-up SECURE=1`: the Kerberized profile (a local KDC, SPNEGO, ACLs), the cluster of
# `make test-secure`: its own home (.devcluster-secure, devcluster's default for the profile) and
# ports (SECURE_PORT_BASE), the jar cache shared. A later plain `make cluster-up` or `make demo`
# is the open cluster in .devcluster again; `make cluster-down SECURE=1` stops the secure one.
ifdef SECURE
export TONY_DEVCLUSTER_SECURE := 1
export TONY_DEVCLUSTER_PORT_BASE := $(SECURE_PORT_BASE)
export TONY_DEVCLUSTER_JARS := $(or $(TONY_DEVCLUSTER_JARS),$(CURDIR)/.devcluster/jars)
endif
# `make cluster-up HA=1`: the HA profile in .devcluster-ha on HA_PORT_BASE, the jar cache shared
# (`make cluster-down HA=1` stops it; `devcluster.py failover rm|nn` kills the active one).
ifdef HA
export TONY_DEVCLUSTER_HA := 1
export TONY_DEVCLUSTER_PORT_BASE := $(HA_PORT_BASE)
export TONY_DEVCLUSTER_JARS := $(or $(TONY_DEVCLUSTER_JARS),$(CURDIR)/.devcluster/jars)
endif
# `make cluster-up HA=1 SECURE=1`: the Kerberized HA profile in .devcluster-ha-secure on SECURE_HA_PORT_BASE.
ifdef HA
ifdef SECURE
export TONY_DEVCLUSTER_PORT_BASE := $(SECURE_HA_PORT_BASE)
endif
endif

.PHONY: bench bootstrap bootstrap-test help venv cluster-up cluster-down cluster-status cluster-env airflow-up airflow-down test test-open test-fast test-secure test-chaos test-ha test-ha-secure lint docs mutate reference demo clean

help:
	@echo "make demo            run the tony_nightly_retrain DAG on the local YARN cluster"
	@echo "make test            every test: unit and integration (local cluster), secure, chaos and multi-node"
	@echo "make test-open       the open part of make test alone: unit, integration and e2e on the default cluster"
	@echo "make test-fast       unit tests only: no cluster, no Java"
	@echo "make bootstrap       the Debian packages make demo needs (bootstrap-test: make test's); run by both"
	@echo "make test-secure     the Kerberos tests on a second, Kerberized cluster (make test runs them too)"
	@echo "make test-chaos      node loss, daemon restarts, GPUs and placement on a four-node cluster (make test runs them too)"
	@echo "make test-ha         RM and NameNode failover on the HA cluster profile (make test runs them too, after chaos)"
	@echo "make test-ha-secure  the Kerberized HA profile: a NameNode failover with tokens, data on a second HDFS"
	@echo "make mutate          mutation testing of the outcome-deciding modules -> bench/results/mutation.{json,md}"
	@echo "make lint            ruff (lint, format check) and mypy (strict on the whole package)"
	@echo "make docs            the documentation site from docs/ (MkDocs, strict: a broken link fails) -> build/site"
	@echo "make reference       regenerate docs/jobspec.md and docs/jobspec.schema.json from the JobSpec model"
	@echo "make bench           benchmarks on the local cluster -> bench/results/latest.{json,md}"
	@echo "make cluster-up | cluster-down | cluster-status | -s cluster-env   (SECURE=1: the Kerberized cluster, HA=1: the HA cluster; each its own home and ports)"
	@echo "make airflow-up | airflow-down   Airflow services on PostgreSQL beside the cluster (UI on :19380)"

# The Debian packages a fresh machine lacks (scripts/bootstrap.py): installed when make runs as
# root, named with the command to run otherwise. Nothing to do (a few milliseconds) once present.
# `bootstrap` is what the venv and the demo's cluster need; `bootstrap-test` adds what the test
# suites need (PostgreSQL, Chromium, the MIT KDC).
BOOTSTRAP = $(PYTHON) scripts/bootstrap.py
bootstrap:
	@command -v $(PYTHON) >/dev/null || { echo "install $(PYTHON) first (as root: apt-get install -y python3)"; exit 1; }
	@$(BOOTSTRAP) --for demo

bootstrap-test: bootstrap
	@$(BOOTSTRAP) --for test

# Reinstalls whenever pyproject.toml changes (a new dependency, the tony script); the packages
# its build needs (gssapi's: krb5-config, gcc, Python's headers) come first.
$(VENV)/.installed: pyproject.toml
	$(BOOTSTRAP) --for demo --venv $(VENV)

venv: $(VENV)/.installed

cluster-up:
	$(DEVCLUSTER) up

cluster-down:
	$(DEVCLUSTER) down

cluster-status:
	$(DEVCLUSTER) status

cluster-env:
	@$(DEVCLUSTER) env

# Five parts, each on its own cluster, and every one of them runs whatever the others did: the
# open suite on the default cluster (`make test-open`), the Kerberos subset on the secure one
# (`make test-secure`), the chaos and multi-node suite on the four-node one (`make test-chaos`),
# failover on the HA profile (`make test-ha`) and on the Kerberized HA one (`make test-ha-secure`).
# Their clusters share no port and no state dir, so three chains run side by side, about equally
# long: the open part; HA then chaos; secure then Kerberized HA. Most of a part's time is spent
# waiting on daemons (container launches, heartbeats, node expiry, failovers). TEST_PARALLEL=0
# runs the parts one after the other. The open part prints as it runs; the others' output goes to
# test-artifacts/parts/<part>.log and is printed when they end. The first failing part's exit code
# (in the order open, secure, chaos, ha) is the result.
# Every part runs with TONY_TESTS_MUST_RUN=1 (tests/conftest.py): a skipped test fails there,
# so a missing tool or an unset principal cannot leave the run green with nothing proven. The
# secure tests run only in their own part. The last lines say how many tests each part ran.
MUST_RUN = TONY_TESTS_MUST_RUN=1
TEST_PARALLEL ?= 1
PARTS := test-artifacts/parts
OPEN_LANES := open open2 unit
# The time report every make test writes (tests/_summary.py): seconds per part, file and test.
TEST_TIMES ?= bench/results/test_times
test: bootstrap-test venv
	@rm -f $(PARTS)/*.json $(PARTS)/*.log $(PARTS)/*.rc; mkdir -p $(PARTS); date +%s > $(PARTS)/started; rc=0; s=0; \
	if [ "$(TEST_PARALLEL)" = 1 ]; then \
	  ( $(MAKE) --no-print-directory test-secure; echo $$? > $(PARTS)/secure.rc; \
	    $(MAKE) --no-print-directory test-ha-secure; echo $$? > $(PARTS)/ha-secure.rc ) > $(PARTS)/others.log 2>&1 & others=$$!; \
	  ( $(MAKE) --no-print-directory test-ha; echo $$? > $(PARTS)/ha.rc; \
	    $(MAKE) --no-print-directory test-chaos; echo $$? > $(PARTS)/chaos.rc ) > $(PARTS)/ha.log 2>&1 & ha=$$!; \
	  $(MAKE) --no-print-directory test-open || rc=$$?; \
	  wait $$ha; echo "--- the HA and chaos parts (beside the open part) ---"; cat $(PARTS)/ha.log; \
	  wait $$others; echo "--- the secure parts, single then HA (beside the open part) ---"; cat $(PARTS)/others.log; \
	  for part in secure chaos ha ha-secure; do s=$$(cat $(PARTS)/$$part.rc 2>/dev/null || echo 1); [ $$rc -ne 0 ] || rc=$$s; done; \
	else \
	  $(MAKE) --no-print-directory test-open || rc=$$?; \
	  $(MAKE) --no-print-directory test-secure || { s=$$?; [ $$rc -ne 0 ] || rc=$$s; }; \
	  $(MAKE) --no-print-directory test-chaos || { s=$$?; [ $$rc -ne 0 ] || rc=$$s; }; \
	  $(MAKE) --no-print-directory test-ha || { s=$$?; [ $$rc -ne 0 ] || rc=$$s; }; \
	  $(MAKE) --no-print-directory test-ha-secure || { s=$$?; [ $$rc -ne 0 ] || rc=$$s; }; \
	fi; \
	$(PY) -m tests._summary --times $(TEST_TIMES) $(OPEN_LANES) secure chaos ha ha-secure; exit $$rc

# The open part of make test (unit, integration, e2e) on the default cluster, in three lanes
# side by side (TEST_PARALLEL=0: one after the other), each its own pytest and its own line in
# the closing counts:
#   unit   tests/unit (no cluster; niced: the integration lanes' daemons come first), then
#          UNIT_LANE_FILES (the benchmarks' smoke, the PyTorch jobs, the docs' walk-throughs)
#   open   every integration and e2e test but OPEN2_FILES (so a new test file lands here)
#   open2  OPEN2_FILES: the Airflow-heavy half (airflow dags test, the Airflow stack and browser)
# Most of an integration test's time is spent waiting on YARN, so the two cluster lanes fill
# cores that would idle. They share the cluster (a 14 GiB NodeManager: two tests' jobs fit, a
# third queues); a test that cannot share it (preemption, the NameNode outages) is marked
# `whole_cluster` and holds it alone while the other lane waits (tests/_lanes.py). The cluster
# comes down afterwards even when tests fail; the first failing lane's exit code (open, open2,
# unit) is the result. With PYTEST_ARGS (a narrow run) a lane that selects nothing (pytest exit
# 5) is no failure.
OPEN2_FILES := tests/integration/test_airflow.py tests/integration/test_trust_airflow.py tests/e2e
# The benchmarks' smoke, the PyTorch jobs and the docs' walk-throughs (minutes, mostly waiting on
# YARN) follow the unit tests in their lane, which is otherwise idle for most of the part.
UNIT_LANE_FILES := tests/integration/test_bench_smoke.py tests/integration/test_torch.py \
	tests/integration/test_torch_launch.py tests/integration/test_doc_walkthroughs.py
SIDE_LANES := open2 unit
OPEN_IGNORE := --ignore=tests/unit --ignore=tests/chaos --ignore=tests/ha --ignore=tests/ha_secure --ignore=tests/integration/test_secure.py \
	--ignore=tests/integration/test_secure_trust.py $(addprefix --ignore=,$(OPEN2_FILES) $(UNIT_LANE_FILES))
LANE_ARGS_open := tests $(OPEN_IGNORE)
LANE_ARGS_open2 := $(OPEN2_FILES)
LANE_ARGS_unit := tests/unit $(UNIT_LANE_FILES)
LANE_NICE_unit := nice -n 5
test-open: bootstrap-test venv cluster-up
	@mkdir -p $(PARTS); rc=0; s=0; \
	if [ "$(TEST_PARALLEL)" = 1 ]; then \
	  for lane in $(SIDE_LANES); do \
	    ( $(MAKE) --no-print-directory TONY_TEST_LANES=1 test-lane-$$lane; echo $$? > $(PARTS)/$$lane.rc ) > $(PARTS)/$$lane.log 2>&1 & \
	  done; \
	  $(MAKE) --no-print-directory TONY_TEST_LANES=1 test-lane-open || rc=$$?; wait; \
	  for lane in $(SIDE_LANES); do \
	    echo "--- lane $$lane (beside lane open) ---"; cat $(PARTS)/$$lane.log; \
	    s=$$(cat $(PARTS)/$$lane.rc 2>/dev/null || echo 1); [ $$rc -ne 0 ] || rc=$$s; \
	  done; \
	else \
	  for lane in open $(SIDE_LANES); do $(MAKE) --no-print-directory test-lane-$$lane || { s=$$?; [ $$rc -ne 0 ] || rc=$$s; }; done; \
	fi; \
	$(DEVCLUSTER) down; exit $$rc

# One lane of test-open (the cluster is test-open's): LANE_ARGS_<lane> are its tests.
test-lane-%:
	@rc=0; ( $(CLUSTER_ENV) && $(MUST_RUN) TONY_TEST_PART=$* $(LANE_NICE_$*) $(PY) -m pytest $(LANE_ARGS_$*) \
	  $(PYTEST_ARGS) ) || rc=$$?; if [ $$rc -eq 5 ] && [ -n "$(if $(PYTEST_ARGS),narrow)" ]; then rc=0; fi; exit $$rc

# Node loss, RM and NameNode restarts, GPUs across jobs, placement:
# tests/chaos/conftest.py starts their four-node cluster (.devcluster-chaos,
# ports from CHAOS_PORT_BASE, the jar cache shared) once for the session;
# it comes down here whatever happened. pytest's exit code 5 (PYTEST_ARGS
# deselected every test, e.g. -m 'not slow') is not a failure.
CHAOS_HOME ?= $(or $(TONY_CHAOS_HOME),$(CURDIR)/.devcluster-chaos)
CHAOS_ENV = TONY_CHAOS_HOME="$(CHAOS_HOME)" TONY_CHAOS_PORT_BASE=$(CHAOS_PORT_BASE) \
	TONY_DEVCLUSTER_HOME="$(CHAOS_HOME)" TONY_DEVCLUSTER_PORT_BASE=$(CHAOS_PORT_BASE) \
	TONY_DEVCLUSTER_JARS="$(SECURE_JARS)"
test-chaos: bootstrap-test venv
	@export $(CHAOS_ENV); rc=0; \
	$(MUST_RUN) TONY_TEST_PART=chaos $(PY) -m pytest tests/chaos $(PYTEST_ARGS) || rc=$$?; [ $$rc -ne 5 ] || rc=0; \
	$(DEVCLUSTER) down; exit $$rc

# Failover on the HA profile (tests/ha: ZooKeeper, two RMs, two NameNodes; tests/ha/conftest.py
# starts it once for the session in .devcluster-ha on HA_PORT_BASE, the jar cache shared); it
# comes down here whatever happened. Three tests, about 7 minutes with the cluster's start-up.
HA_HOME ?= $(or $(TONY_HA_HOME),$(CURDIR)/.devcluster-ha)
HA_ENV = TONY_HA_HOME="$(HA_HOME)" TONY_HA_PORT_BASE=$(HA_PORT_BASE) TONY_DEVCLUSTER_HA=1 \
	TONY_DEVCLUSTER_HOME="$(HA_HOME)" TONY_DEVCLUSTER_PORT_BASE=$(HA_PORT_BASE) \
	TONY_DEVCLUSTER_JARS="$(SECURE_JARS)"
test-ha: bootstrap-test venv
	@export $(HA_ENV); rc=0; \
	$(MUST_RUN) TONY_TEST_PART=ha $(PY) -m pytest tests/ha $(PYTEST_ARGS) || rc=$$?; [ $$rc -ne 5 ] || rc=0; \
	$(DEVCLUSTER) down; exit $$rc

# The Kerberized HA profile (tests/ha_secure: the HA profile with a KDC, SPNEGO, delegation tokens
# and a second HDFS, nameservice `warehouse`), in .devcluster-ha-secure on SECURE_HA_PORT_BASE;
# tests/ha_secure/conftest.py starts it, and it comes down here whatever happened.
SECURE_HA_HOME ?= $(or $(TONY_SECURE_HA_HOME),$(CURDIR)/.devcluster-ha-secure)
SECURE_HA_ENV = TONY_SECURE_HA_HOME="$(SECURE_HA_HOME)" TONY_SECURE_HA_PORT_BASE=$(SECURE_HA_PORT_BASE) \
	TONY_DEVCLUSTER_HA=1 TONY_DEVCLUSTER_SECURE=1 TONY_DEVCLUSTER_HOME="$(SECURE_HA_HOME)" \
	TONY_DEVCLUSTER_PORT_BASE=$(SECURE_HA_PORT_BASE) TONY_DEVCLUSTER_JARS="$(SECURE_JARS)"
test-ha-secure: bootstrap-test venv
	@export $(SECURE_HA_ENV); rc=0; \
	$(MUST_RUN) TONY_TEST_PART=ha-secure $(PY) -m pytest tests/ha_secure $(PYTEST_ARGS) || rc=$$?; \
	[ $$rc -ne 5 ] || rc=0; $(DEVCLUSTER) down; exit $$rc

# The secure profile in its own state dir and ports (SECURE_PORT_BASE), sharing
# the open cluster's jar cache; started and stopped here. Every test must run: with the
# principal variable unset (the module would skip) or nothing selected, this target fails.
# HDFS tokens there live 3 minutes at most (TONY_DEVCLUSTER_TOKEN_MAX_LIFETIME_MS),
# so that test_secure's token-refresh job outlives its first token.
SECURE_TOKEN_MAX_LIFETIME_MS ?= 180000
SECURE_ENV = TONY_DEVCLUSTER_SECURE=1 TONY_DEVCLUSTER_HOME="$(CURDIR)/.devcluster-secure" \
	TONY_DEVCLUSTER_PORT_BASE=$(SECURE_PORT_BASE) TONY_DEVCLUSTER_JARS="$(SECURE_JARS)" \
	TONY_DEVCLUSTER_TOKEN_MAX_LIFETIME_MS=$(SECURE_TOKEN_MAX_LIFETIME_MS)
SECURE_JARS ?= $(or $(TONY_DEVCLUSTER_JARS),$(CURDIR)/.devcluster/jars)
test-secure: bootstrap-test venv
	@export $(SECURE_ENV); rc=0; \
	( $(DEVCLUSTER) up && eval "$$($(DEVCLUSTER) env)" && \
	  $(MUST_RUN) TONY_TEST_PART=secure $(PY) -m pytest tests/integration/test_secure.py \
	    tests/integration/test_secure_trust.py $(PYTEST_ARGS) ) || rc=$$?; \
	$(DEVCLUSTER) down; exit $$rc

# Airflow as users run it (PostgreSQL, api-server, scheduler, dag-processor,
# triggerer), pointed at dags/ and the local cluster. The e2e tests start
# and stop their own.
airflow-up: bootstrap-test venv cluster-up
	$(CLUSTER_ENV) && $(PYTHON) devcluster/airflow_stack.py up --python $(PY)

airflow-down:
	$(PYTHON) devcluster/airflow_stack.py down

test-fast: venv
	$(PY) -m pytest tests/unit $(PYTEST_ARGS)

# Mutation testing of the modules that decide outcomes (scripts/mutate.py; not in .ci/run:
# it takes tens of minutes on 2 cores, see bench/results/mutation.md for the last run's time).
# Results: bench/results/mutation.{json,md}; mutmut's work dir mutants/ is kept, so a rerun
# tests only the functions that changed. MUTATE_ARGS="--report-only" rewrites the report.
MUTATE_ARGS ?=
mutate: venv
	$(PY) scripts/mutate.py $(MUTATE_ARGS)

# The formatter only checks here; `$(VENV)/bin/ruff format .` applies it.
lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

# The pages of docs/ as a site in build/site (gitignored), mkdocs' own theme. Strict (mkdocs.yml):
# a link to a page or an anchor that is not there fails the build, so CI runs it after lint.
docs: venv
	$(VENV)/bin/mkdocs build --strict -d build/site

# docs/jobspec.md and its schema are generated from runtime/spec.py; tests/unit/repo/test_reference.py
# fails when they are stale.
reference: venv
	$(PY) scripts/gen_reference.py

# Runs the example DAG with `airflow dags test`; the same job outside Airflow:
#   tony submit dags/training/digits_mwms.yaml   (or python -m airflow_provider_tony submit ...)
# The cluster stays up afterwards so the YARN pages can be browsed; stop it
# with `make cluster-down`.
demo: bootstrap venv cluster-up
	$(CLUSTER_ENV) && $(PY) scripts/demo.py
	@echo "YARN UI: $$($(CLUSTER_ENV) && echo $$TONY_RM_URL)/cluster  (make cluster-down to stop the cluster)"

# Figures to bench/results/latest.{json,md}; BENCH_ARGS="--only startup --repeat 2"
BENCH_ARGS ?=
bench: venv cluster-up
	$(CLUSTER_ENV) && $(PY) bench/run.py $(BENCH_ARGS)

clean: airflow-down cluster-down
	$(MAKE) --no-print-directory cluster-down SECURE=1
	$(MAKE) --no-print-directory cluster-down HA=1
	rm -rf .devcluster .devcluster-secure .devcluster-ha

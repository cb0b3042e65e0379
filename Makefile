# The README's two commands: `make demo` and `make test`. Both create .venv when missing.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
RUNTIME := $(VENV)/.installed-runtime
export MUJOCO_GL ?= egl
export PYTHONUNBUFFERED := 1

.PHONY: install test test-all lint typecheck demo clean check-tables docs

# Two layers: what running robosteer needs (`make demo` stops here), then the test, lint and docs tools on top.
$(RUNTIME): requirements.txt requirements-core.txt pyproject.toml setup.py
	@test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q -r requirements.txt
	$(PY) -m pip install -q --no-deps -e .
	@touch $(RUNTIME)

$(STAMP): $(RUNTIME) requirements-dev.txt
	$(PY) -m pip install -q -r requirements.txt -r requirements-dev.txt
	$(PY) -m pip install -q --no-deps robomimic==0.3.0 openpi-client==0.1.2  # (openpi-client pins numpy<2)
	@touch $(STAMP)

install: $(STAMP)

test: $(STAMP) typecheck
	$(PY) -m ruff check .
	$(PY) benchmarks/results_tables.py
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict --quiet --site-dir $(VENV)/docs-site
	$(PY) -m pytest -n 2 --dist loadgroup --durations=20

# The docs site (mkdocs.yml over docs/): regenerate the CLI reference and the algorithm pages' hyperparameter
# tables from the commands' --help (tests/docs/test_cli_reference.py fails while they are stale), then build
# it strictly into site/ (a page missing from the nav, a broken link or anchor fails).
docs: $(STAMP)
	$(PY) tests/docs/cli_reference.py --write
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict --site-dir site

# Every fenced results table of README.md and docs/**/*.md equals what its rows under docs/results/ give
# (no simulation, ~1 s).
check-tables: $(STAMP)
	$(PY) benchmarks/results_tables.py

# mypy on sim/isaac ([tool.mypy] in pyproject.toml). isaacgym-stubs 1.1rc4 declares two properties named
# `lambda` (a keyword, so no parser accepts the file): check against a copy with them renamed `lambda_`.
# mypy cannot follow robosteer's checkout mapping (robosteer/__init__.py reaches up to sim/ at run time):
# it checks robosteer.sim through a folder whose robosteer/sim links to the repository's sim/.
TYPINGS := $(VENV)/isaacgym-typings
MYPY_SRC := $(VENV)/mypy-src
typecheck: $(STAMP)
	@mkdir -p $(TYPINGS)/isaacgym
	@stubs=$$($(PY) -c 'import importlib.metadata as m; print(m.distribution("isaacgym-stubs").locate_file("isaacgym-stubs"))') \
	  && sed 's/def lambda(/def lambda_(/' "$$stubs/gymapi.pyi" > $(TYPINGS)/isaacgym/gymapi.pyi \
	  && echo 'from . import gymapi as gymapi' > $(TYPINGS)/isaacgym/__init__.pyi
	@mkdir -p $(MYPY_SRC)/robosteer && : > $(MYPY_SRC)/robosteer/__init__.py && ln -sfn $(CURDIR)/sim $(MYPY_SRC)/robosteer/sim
	MYPYPATH=$(TYPINGS):$(MYPY_SRC) $(PY) -m mypy

test-all: $(STAMP)
	$(PY) -m pytest -m ''

lint: $(STAMP)
	$(PY) -m ruff check . && $(PY) -m ruff format --check .

demo: $(RUNTIME)
	bash scripts/demo.sh

clean:
	rm -rf $(VENV) runs outputs

# The GPU simulator (sim=warp: MuJoCo Warp) with the whole stack, in its own environment; not part of `make test`.
GPU_VENV ?= .venv-gpu
GPU_PY := $(GPU_VENV)/bin/python
GPU_STAMP := $(GPU_VENV)/.installed
.PHONY: gpu-env gpu-test

$(GPU_STAMP): requirements-gpu.txt requirements-core.txt pyproject.toml setup.py
	@test -x $(GPU_PY) || python3 -m venv $(GPU_VENV)
	$(GPU_PY) -m pip install -q -r requirements-gpu.txt
	$(GPU_PY) -m pip install -q --no-deps metaworld==3.1.1 -e .
	@touch $(GPU_STAMP)

gpu-env: $(GPU_STAMP)

gpu-test: $(GPU_STAMP)
	PYTHONPATH=. $(GPU_PY) -m pytest tests/sim/gpu

# Try every class of bad input (CLI, datasets, checkpoints, wire protocol); writes docs/probes.md + its rows.
.PHONY: probes
probes: $(STAMP)
	$(PY) benchmarks/probes.py

# Plant known faults in the algorithm files (tests/faults/*.py) and check the default suite kills each one.
.PHONY: faults
faults: $(STAMP)
	$(PY) tests/faults/run.py

# Mutation testing (mutmut 3, tests/mutation/run.py): MODULES="policies/rl/replay.py 'policies/value/*'" runs
# each module's mirrored tests against its mutants in a staged copy outside the checkout, one worker
# (MUTATION_ARGS="--workers 2"); a row per module in docs/results/mutation.jsonl, skipped when it exists.
.PHONY: mutation
MODULES ?=
MUTATION_ARGS ?=
mutation: $(STAMP)
	$(PY) tests/mutation/run.py $(MUTATION_ARGS) $(MODULES)

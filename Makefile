# The README's two commands: `make demo` and `make test`. Both create .venv when missing.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export MUJOCO_GL ?= egl
export PYTHONUNBUFFERED := 1

.PHONY: install test test-all lint demo clean

$(STAMP): requirements.txt requirements-dev.txt pyproject.toml
	@test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q -r requirements.txt -r requirements-dev.txt
	$(PY) -m pip install -q --no-deps robomimic==0.3.0
	$(PY) -m pip install -q --no-deps -e .
	@touch $(STAMP)

install: $(STAMP)

test: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m pytest

test-all: $(STAMP)
	$(PY) -m pytest -m ''

lint: $(STAMP)
	$(PY) -m ruff check . && $(PY) -m ruff format --check .

demo: $(STAMP)
	bash scripts/demo.sh

clean:
	rm -rf $(VENV) runs outputs

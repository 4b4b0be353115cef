# Everything a fresh machine needs (Python 3.11, Java 17): `make demo` runs the main job,
# `make test` runs the checks and the test suite. Both install uv and the locked environment.
SHELL := /bin/bash
UV_VERSION := 0.13.8
UV := $(shell command -v uv 2>/dev/null)
ifeq ($(UV),)
UV := python3 -m uv
endif
export PYSPARK_PYTHON := $(CURDIR)/.venv/bin/python
export PYSPARK_DRIVER_PYTHON := $(CURDIR)/.venv/bin/python
export UV_LINK_MODE := copy

.PHONY: setup demo test lint typecheck unit airflow-ui clean

setup:
	@$(UV) --version >/dev/null 2>&1 || python3 -m pip install --quiet "uv==$(UV_VERSION)"
	$(UV) sync --frozen --python python3.11

demo: setup
	$(UV) run lakecleaner demo

lint: setup
	$(UV) run ruff check lib tests dags plugins spark_jobs bench
	$(UV) run ruff format --check lib tests dags plugins spark_jobs bench

typecheck: setup
	$(UV) run mypy lib

unit: setup
	$(UV) run pytest -q -p no:cacheprovider

test: lint typecheck unit

clean:
	rm -rf lake .venv .pytest_cache .mypy_cache .ruff_cache

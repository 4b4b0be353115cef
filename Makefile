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

.PHONY: setup demo test lint typecheck unit airflow-ui kafka spark-connect spark-connect-stop clean

# --compile-bytecode: the environment's modules compiled once, at install (20 s on 2 cores; a sync
# after it checks them in under a second). Without it every process compiles what it imports from
# source wherever PYTHONDONTWRITEBYTECODE is set (as on CI machines and in many containers):
# importing Airflow, Great Expectations and Spark's Python cost each process twice the CPU.
setup:
	@$(UV) --version >/dev/null 2>&1 || python3 -m pip install --quiet "uv==$(UV_VERSION)"
	$(UV) sync --frozen --python python3.11 --compile-bytecode

demo: setup
	$(UV) run lakecleaner --config config/lakecleaner.yaml demo

lint: setup
	$(UV) run ruff check lib tests bench scripts dags plugins spark_jobs
	$(UV) run ruff format --check lib tests bench scripts dags plugins spark_jobs

# At a low priority: `make test` runs it beside the suite, in the cores' idle moments (30 s of one
# core in a fresh clone, without mypy's cache).
typecheck: setup
	nice -n 10 $(UV) run mypy lib

# The suite's pytest-xdist workers: three on 2 cores where 12 GiB are free, else two. A third of
# the suite's time is Airflow and servers waiting on each other at a fraction of a core (the scheduler
# tests alone: 0.6 of one); a third worker fills those waits and the suite takes a quarter less time
# (1,293 -> 845-956 s on this CI's 2 cores; 8.8 GB in use at the most).
TEST_WORKERS ?= $(shell awk '/^MemAvailable:/ {kb = $$2} END {print (kb >= 12 * 1024 * 1024) ? 3 : 2}' /proc/meminfo 2>/dev/null || echo 2)

# The whole suite, then the engine's tests again on a Spark Connect session (a server the tests
# start), on the local lake: the engine must work unchanged on both kinds of session.
unit: setup
	$(UV) run pytest -q -rs -p no:cacheprovider -n $(TEST_WORKERS) --dist loadgroup --no-loadscope-reorder --durations=20
	LAKECLEANER_TEST_SPARK=connect LAKECLEANER_TEST_BACKENDS=local \
	$(UV) run pytest -q -rs -p no:cacheprovider -n 2 --dist loadgroup tests/engine

# ruff first (seconds); then mypy and the suite at once: a failure of either fails `make test` once
# both have ended.
test: lint
	$(MAKE) --no-print-directory -j2 typecheck unit

# Airflow's UI with the checkout's dags/ and plugins/ (http://127.0.0.1:8080; login admin, with a
# password made on the first start, printed once and kept in airflow_home/passwords.json) on
# config/lakecleaner.yaml, after `lakecleaner airflow setup` has created what the DAGs need (the
# compact tasks' pool). Every component listens on 127.0.0.1 only: the API
# server by --host, and the scheduler and triggerer serve no logs (their log servers bind every
# address; the API server reads the task logs from airflow_home/logs). Ctrl-C or SIGTERM stops them all.
AIRFLOW_UI_HOME ?= $(CURDIR)/airflow_home
AIRFLOW_UI_PORT ?= 8080
# LocalExecutor starts a worker per slot: as many as the machine has cores, not Airflow's 32.
AIRFLOW_UI_PARALLELISM ?= $(shell nproc 2>/dev/null || echo 4)
airflow-ui: setup
	mkdir -p $(AIRFLOW_UI_HOME)
	AIRFLOW_HOME=$(AIRFLOW_UI_HOME) \
	AIRFLOW__CORE__LOAD_EXAMPLES=False \
	AIRFLOW__CORE__EXECUTOR=lakecleaner.orchestration.executor.PreloadedLocalExecutor \
	AIRFLOW__CORE__DAGS_FOLDER=$(CURDIR)/dags \
	AIRFLOW__CORE__PLUGINS_FOLDER=$(CURDIR)/plugins \
	AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS=admin:admin \
	AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE=$(AIRFLOW_UI_HOME)/passwords.json \
	AIRFLOW__API__HOST=127.0.0.1 \
	AIRFLOW__API__PORT=$(AIRFLOW_UI_PORT) \
	AIRFLOW__API__BASE_URL=http://127.0.0.1:$(AIRFLOW_UI_PORT) \
	AIRFLOW__CORE__EXECUTION_API_SERVER_URL=http://127.0.0.1:$(AIRFLOW_UI_PORT)/execution/ \
	AIRFLOW_CONN_SPARK_LAKECLEANER='{"conn_type": "spark", "host": "local[*]"}' \
	LAKECLEANER_CONFIG=$(CURDIR)/config/lakecleaner.yaml \
	AIRFLOW__DATABASE__SQL_ALCHEMY_CONNECT_ARGS=lakecleaner.orchestration.sqlite.SQLITE_CONNECT_ARGS \
	AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT=60 \
	AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL=300 \
	AIRFLOW__CORE__PARALLELISM=$(AIRFLOW_UI_PARALLELISM) \
	$(UV) run sh -c 'lakecleaner airflow login --file $(AIRFLOW_UI_HOME)/passwords.json || exit 1; \
	  airflow db migrate >/dev/null && lakecleaner airflow setup || exit 1; \
	  trap "trap - INT TERM EXIT; kill 0" INT TERM EXIT; \
	  airflow scheduler --skip-serve-logs & airflow dag-processor & airflow triggerer --skip-serve-logs & \
	  airflow api-server --host 127.0.0.1 --port $(AIRFLOW_UI_PORT) & \
	  echo "Airflow: http://127.0.0.1:$(AIRFLOW_UI_PORT) (admin; its password in $(AIRFLOW_UI_HOME)/passwords.json); Ctrl-C stops it"; wait'

# Apache Kafka to try `lakecleaner mirror` on: one KRaft node on 127.0.0.1:$(KAFKA_PORT), the version
# the tests use (Maven fetches it the first time), with a sample CDC topic `customers` and a consumer
# group; it writes .kafka/lakecleaner.yaml, a lake that mirrors it, and prints what to try. Ctrl-C stops it.
KAFKA_PORT ?= 9092
kafka: setup
	$(UV) run lakecleaner dev kafka --port $(KAFKA_PORT) --folder $(CURDIR)/.kafka

# A Spark Connect server from pyspark's own distribution, set up for lakecleaner (`lakecleaner
# connect-server`), on local[*] at sc://127.0.0.1:15002, its logs and pid under .spark-connect/:
# `lakecleaner compact --remote sc://127.0.0.1:15002` (or spark.remote in lakecleaner.yaml) then
# sends runs to it instead of starting a Spark application.
spark-connect: setup
	$(UV) run lakecleaner connect-server start --folder .spark-connect --port 15002
	@echo "logs in .spark-connect/logs; make spark-connect-stop stops it"

spark-connect-stop: setup
	$(UV) run lakecleaner connect-server stop --folder .spark-connect

clean:
	rm -rf lake lakecleaner.yaml airflow_home .venv .pytest_cache .mypy_cache .ruff_cache .spark-connect

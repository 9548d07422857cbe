# walship: `make demo` runs the main job on the embedded default; `make test` runs the checks.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
BIN := $(VENV)/bin
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

.PHONY: setup test lint typecheck pytest demo bench proto clean airflow-env

setup:
	@scripts/setup.sh

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: setup
	$(BIN)/mypy

pytest: setup
	$(BIN)/pytest -n 2 --dist loadgroup

test: lint typecheck pytest

# HBASE=real: the same demo on two real HBase 2.6 clusters from the harness (harness/)
demo: setup
	@HBASE=$(HBASE) scripts/demo.sh

bench: setup
	$(PY) benchmarks/wal_read.py

# Regenerate the protobuf modules from the .proto files (Google's protoc, via grpcio-tools).
proto: setup
	$(PY) -m grpc_tools.protoc -I src --python_out=src --mypy_out=src src/walship/protos/*.proto

# Prepare .airflow/ (SQLite metadata DB) for `source scripts/airflow-env.sh`.
airflow-env: setup
	@bash -c 'source scripts/airflow-env.sh && echo "Airflow home ready: $$AIRFLOW_HOME (source scripts/airflow-env.sh to use it)"'

clean:
	rm -rf .pytest_cache .mypy_cache .ruff_cache build *.egg-info src/*.egg-info .demo

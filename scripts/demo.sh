#!/usr/bin/env bash
# The embedded-default demo (see scripts/demo.py): ZooKeeper, two miniclusters, Airflow.
set -euo pipefail
cd "$(dirname "$0")/.."
exec .venv/bin/python scripts/demo.py

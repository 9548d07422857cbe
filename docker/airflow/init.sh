#!/usr/bin/env bash
# airflow-init (docker-compose.yml): migrate Airflow's metadata database, set the admin's
# password for the simple auth manager (Airflow 3.3's default; its users are
# AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS, their passwords a JSON file the api-server reads) and
# size the pool of walship's Spark jobs (WALSHIP_SPARK_POOL, default walship_spark) to
# SPARK_POOL_SLOTS (default 2, one default worker's cores): the DAGs put their Spark tasks in it,
# so that Airflow submits no more jobs than the workers have cores to run.
# Runs once per `docker compose up`, before the other Airflow services; safe to run again.
set -euo pipefail

say() { printf 'airflow-init: %s\n' "$*"; }

: "${AIRFLOW__DATABASE__SQL_ALCHEMY_CONN:?is not set}"
: "${AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE:?is not set}"
: "${AIRFLOW_ADMIN_PASSWORD:?is not set: put it in .env (see docker/airflow/env.example)}"
admin_user="${AIRFLOW_ADMIN_USER:-admin}"
spark_pool="${WALSHIP_SPARK_POOL:-walship_spark}"
spark_pool_slots="${SPARK_POOL_SLOTS:-2}"
[[ "$spark_pool_slots" =~ ^[1-9][0-9]*$ ]] || { say "SPARK_POOL_SLOTS must be a positive number: $spark_pool_slots"; exit 1; }

case ",${AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS:-admin:admin}," in
  *",${admin_user}:admin,"*) ;;
  *) say "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS does not give ${admin_user} the admin role"; exit 1 ;;
esac

say "airflow $(airflow version 2>/dev/null), walship $(python -c 'from importlib.metadata import version; print(version("walship"))')"
say "migrating the metadata database"
airflow db migrate

say "setting the password of ${admin_user}"
python - "$admin_user" <<'PY'
import json
import os
import sys

path = os.environ["AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE"]
tmp = f"{path}.tmp"
fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
with os.fdopen(fd, "w") as f:
    json.dump({sys.argv[1]: os.environ["AIRFLOW_ADMIN_PASSWORD"]}, f)
    f.write("\n")
os.replace(tmp, path)
PY
say "pool ${spark_pool}: ${spark_pool_slots} slots"
airflow pools set "$spark_pool" "$spark_pool_slots" "walship's Spark jobs: one slot per worker core" >/dev/null
say "done"

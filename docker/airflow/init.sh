#!/usr/bin/env bash
# airflow-init (docker-compose.yml): migrate Airflow's metadata database (FAB's tables with it:
# FAB's auth manager is configured), create the UI's admin with FAB's CLI, and size the pool of
# walship's Spark jobs (WALSHIP_SPARK_POOL, default walship_spark) to SPARK_POOL_SLOTS (default
# 2, one default worker's cores): the DAGs put their Spark tasks in it, so that Airflow submits
# no more jobs than the workers have cores to run.
#
# The admin: AIRFLOW_ADMIN_USER (default admin) with the role Admin and the password
# AIRFLOW_ADMIN_PASSWORD. `airflow users create` leaves an existing user as it is, so for one
# that exists the password is set again from AIRFLOW_ADMIN_PASSWORD: .env stays the one place it
# is kept (FAB ends the admin's open sessions when it does).
# Runs once per `docker compose up`, before the other Airflow services; safe to run again.
set -euo pipefail

say() { printf 'airflow-init: %s\n' "$*"; }

FAB_AUTH_MANAGER=airflow.providers.fab.auth_manager.fab_auth_manager.FabAuthManager

: "${AIRFLOW__DATABASE__SQL_ALCHEMY_CONN:?is not set}"
: "${AIRFLOW_ADMIN_PASSWORD:?is not set: put it in .env (see docker/airflow/env.example)}"
admin_user="${AIRFLOW_ADMIN_USER:-admin}"
admin_email="${AIRFLOW_ADMIN_EMAIL:-${admin_user}@localhost}"
spark_pool="${WALSHIP_SPARK_POOL:-walship_spark}"
spark_pool_slots="${SPARK_POOL_SLOTS:-2}"
[[ "$spark_pool_slots" =~ ^[1-9][0-9]*$ ]] || { say "SPARK_POOL_SLOTS must be a positive number: $spark_pool_slots"; exit 1; }
# `airflow users` is FAB's CLI: it exists only with FAB's auth manager
if [ "${AIRFLOW__CORE__AUTH_MANAGER:-}" != "$FAB_AUTH_MANAGER" ]; then
  say "AIRFLOW__CORE__AUTH_MANAGER must be $FAB_AUTH_MANAGER (FAB's users hold the admin): ${AIRFLOW__CORE__AUTH_MANAGER:-unset}"
  exit 1
fi

say "airflow $(airflow version 2>/dev/null), walship $(python -c 'from importlib.metadata import version; print(version("walship"))')"
say "migrating the metadata database"
airflow db migrate

say "the admin ${admin_user}"
# FAB's CLI masks --password in the command line it records in Airflow's log table
created="$(airflow users create --username "$admin_user" --password "$AIRFLOW_ADMIN_PASSWORD" --role Admin \
  --firstname Walship --lastname Admin --email "$admin_email")"
printf '%s\n' "$created"
case "$created" in
  *"already exist"*)
    say "setting the password of ${admin_user} from AIRFLOW_ADMIN_PASSWORD"
    airflow users reset-password --username "$admin_user" --password "$AIRFLOW_ADMIN_PASSWORD"
    ;;
esac

say "pool ${spark_pool}: ${spark_pool_slots} slots"
airflow pools set "$spark_pool" "$spark_pool_slots" "walship's Spark jobs: one slot per worker core" >/dev/null
say "done"

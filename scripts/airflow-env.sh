# Source this file to run Airflow locally against this checkout:
#   source scripts/airflow-env.sh && airflow dags test walship_replicate
# It keeps Airflow's home (SQLite metadata DB, logs) in .airflow/ and points Airflow at this
# repository's dags/ and plugins/. Connections come from the environment; override
# AIRFLOW_CONN_WALSHIP_SOURCE for another source cluster.
_walship_root="$(cd "$(dirname "${BASH_SOURCE[0]:-$0}")/.." && pwd)"
export WALSHIP_HOME="$_walship_root"
export PATH="$_walship_root/.venv/bin:$PATH"
export AIRFLOW_HOME="${AIRFLOW_HOME_OVERRIDE:-$_walship_root/.airflow}"
export AIRFLOW__CORE__DAGS_FOLDER="$_walship_root/dags"
export AIRFLOW__CORE__PLUGINS_FOLDER="$_walship_root/plugins"
export AIRFLOW__CORE__LOAD_EXAMPLES=False
export AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION=True
export AIRFLOW__CORE__UNIT_TEST_MODE=False
export PYTHONPATH="$_walship_root/plugins${PYTHONPATH:+:$PYTHONPATH}"
if [ -z "${AIRFLOW_CONN_SPARK_DEFAULT:-}" ]; then
  # the interpreter Spark runs ship.py with: this checkout's, where walship is installed; the
  # local Spark's JVMs with walship's options (no site settings to keep here)
  export AIRFLOW_CONN_SPARK_DEFAULT="{\"conn_type\": \"spark\", \"host\": \"local[*]\", \"extra\": {\"pyspark_python\": \"$_walship_root/.venv/bin/python\", \"walship_jvm_options\": true}}"
fi
if [ -z "${AIRFLOW_CONN_WALSHIP_SOURCE:-}" ]; then
  export AIRFLOW_CONN_WALSHIP_SOURCE="{\"conn_type\": \"walship\", \"host\": \"127.0.0.1\", \"port\": 2181, \"extra\": {\"znode_parent\": \"/hbase\", \"wal_root\": \"$_walship_root/.demo/a\"}}"
fi
if [ ! -f "$AIRFLOW_HOME/airflow.db" ]; then
  mkdir -p "$AIRFLOW_HOME"
  airflow db migrate >"$AIRFLOW_HOME/db-migrate.log" 2>&1 || { echo "airflow db migrate failed: see $AIRFLOW_HOME/db-migrate.log"; return 1 2>/dev/null || exit 1; }
fi
unset _walship_root

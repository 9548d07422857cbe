"""`walship_maintenance`, one per Airflow: built by :mod:`walship_airflow.dags.maintenance`,
whose docstring is the DAG's documentation."""

from walship_airflow.dags.maintenance import build

build()

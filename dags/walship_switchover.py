"""`walship_switchover`, one per Airflow (the source a Param): built by
:mod:`walship_airflow.dags.switchover`, whose docstring is the DAG's documentation."""

from walship_airflow.dags.switchover import build

build()

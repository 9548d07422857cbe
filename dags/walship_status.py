"""`walship_status` of every source cluster this Airflow serves (`[walship] sources`; the
default connection `walship_source` keeps the plain DAG id): built by
:mod:`walship_airflow.dags.status`, whose docstring is the DAG's documentation."""

from walship_airflow.dags import build_dags
from walship_airflow.dags.status import build

build_dags(build, globals())

"""`walship_clean` of every source cluster this Airflow serves (`[walship] sources`; the
default connection `walship_source` keeps the plain DAG id): built by
:mod:`walship_airflow.dags.clean`, whose docstring is the DAG's documentation."""

from walship_airflow.dags import build_dags
from walship_airflow.dags.clean import build

build_dags(build, globals())

# walship's image, for every Airflow component of docker-compose.yml (airflow-init, api-server,
# scheduler with the LocalExecutor, dag-processor, triggerer) and for the Spark master and
# workers: Python 3.11 (the project's), Java 17 (Spark 4), walship with Airflow 3.3.2 and
# pyspark 4.2.0 at the versions pinned in constraints.txt. Spark is pyspark's own bundled
# distribution: spark-submit for the ship tasks, spark-class for the standalone daemons, so the
# driver, the executors and the jars are one Spark version and one Python everywhere.
#
#   docker build -t walship:0.1.0 .
#
# dags/, plugins/ and spark_jobs/ are copied into the image and mounted over it by
# docker-compose.yml; a change under src/ needs a rebuild (`docker compose build`).

ARG PYTHON_IMAGE=python:3.11.14-slim-bookworm

# ---- build: a virtualenv with walship and its pinned dependencies ------------------------
FROM ${PYTHON_IMAGE} AS build
SHELL ["/bin/bash", "-o", "pipefail", "-c"]

# Postgres drivers for Airflow's metadata database (sync and async); constraints.txt pins
# the rest, these two are not in it.
ARG PSYCOPG2_VERSION=2.9.13
ARG ASYNCPG_VERSION=0.32.0

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# A compiler only for dependencies without a wheel on this platform; it stays in this stage.
# libkrb5-dev: gssapi and kerberos (walship.security) build against MIT Kerberos.
RUN apt-get update \
 && apt-get install -y --no-install-recommends gcc libc6-dev libkrb5-dev \
 && rm -rf /var/lib/apt/lists/*

RUN python -m venv /opt/venv
WORKDIR /src
COPY pyproject.toml README.md constraints.txt ./
COPY src/ src/
COPY plugins/walship_airflow/ plugins/walship_airflow/
RUN /opt/venv/bin/pip install -c constraints.txt ".[airflow,spark]" \
        "psycopg2-binary==${PSYCOPG2_VERSION}" "asyncpg==${ASYNCPG_VERSION}" \
 && /opt/venv/bin/pip check \
 && /opt/venv/bin/python -c "from importlib.metadata import version as v; print(*(p + ' ' + v(p) for p in ('walship', 'apache-airflow', 'pyspark', 'pyspark-client')))"

# ---- runtime -------------------------------------------------------------------------------
FROM ${PYTHON_IMAGE}
SHELL ["/bin/bash", "-o", "pipefail", "-c"]

# One user for every service that touches the shared WAL volume (HBase's image uses the same
# uid), so HBase's 700 WAL directories stay readable and walship can clean and write dead
# letters there. Group 0 as in Airflow's own image, for platforms that run with a random uid.
ARG WALSHIP_UID=50000

# Debian's man directories are absent in slim images; the JRE's postinst links into them.
RUN mkdir -p /usr/share/man/man1 \
 && apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless procps tini curl \
      libgssapi-krb5-2 krb5-user \
 && rm -rf /var/lib/apt/lists/*

COPY --from=build /opt/venv /opt/venv

ENV PATH=/opt/venv/bin:${PATH} \
    PYTHONUNBUFFERED=1 \
    AIRFLOW_HOME=/opt/airflow \
    PYTHONPATH=/opt/airflow/plugins \
    SPARK_WORKER_DIR=/opt/spark-work

RUN useradd --uid "${WALSHIP_UID}" --gid 0 --home-dir /opt/airflow --no-create-home --shell /bin/bash walship \
 && mkdir -p /opt/airflow/dags /opt/airflow/plugins /opt/airflow/spark_jobs /opt/airflow/logs \
             /opt/airflow/auth /opt/spark-work /wal /deadletters /changelogs \
 && chown -R "${WALSHIP_UID}:0" /opt/airflow /opt/spark-work /wal /deadletters /changelogs \
 && chmod 2775 /opt/airflow /opt/airflow/logs /opt/spark-work /wal /deadletters /changelogs \
 && chmod 2770 /opt/airflow/auth

COPY --chown=${WALSHIP_UID}:0 dags/ /opt/airflow/dags/
COPY --chown=${WALSHIP_UID}:0 plugins/ /opt/airflow/plugins/
COPY --chown=${WALSHIP_UID}:0 spark_jobs/ /opt/airflow/spark_jobs/
COPY docker/airflow/init.sh /usr/local/bin/walship-airflow-init
RUN chmod 0755 /usr/local/bin/walship-airflow-init \
 && spark-submit --version 2>&1 | grep -q "version 4.2.0"

USER ${WALSHIP_UID}
WORKDIR /opt/airflow
ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["airflow", "version"]

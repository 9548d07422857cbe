# walship's image, for every Airflow component of docker-compose.yml (airflow-init, api-server,
# scheduler, dag-processor, triggerer, the Celery workers, flower) and for the Spark master and
# workers: Python 3.11 (the project's), Java 17 (Spark 4), walship with Airflow 3.3.2 (the
# CeleryExecutor, FAB's auth manager) and pyspark 4.2.0 at the versions pinned in
# constraints.txt, and Hadoop's client. Spark is pyspark's own bundled distribution:
# spark-submit for the ship tasks (to the standalone master, or to YARN), spark-class for the
# standalone daemons, so the driver, the executors and the jars are one Spark version and one
# Python everywhere.
#
#   docker build -t walship:0.1.0 .
#
# Hadoop's client serves `hdfs://` WAL roots (pyarrow's HDFS client: libhdfs.so, run in the
# process with Java 17 and the jars on CLASSPATH) and Spark on YARN (HADOOP_CONF_DIR and
# YARN_CONF_DIR). Its jars come from Maven Central, each checked against the SHA-256 pinned
# below: Hadoop's shaded client (hadoop-client-api and hadoop-client-runtime, the version Spark's
# own jars are, so the image holds one Hadoop client) and the libraries its POM leaves unshaded
# for logging, with reload4j logging at WARN to stderr (/etc/hadoop/conf/log4j.properties);
# commons-lang3 for libhdfs's error messages. Hadoop publishes no libhdfs.so built: the `hadoop`
# stage compiles it with scripts/libhdfs.sh (what `make setup` runs), from the C sources in
# PyPI's pydoop 2.0.0 sdist (hash-checked). The cluster's configuration (core-site.xml,
# hdfs-site.xml, yarn-site.xml) is mounted at /etc/hadoop/conf, first on CLASSPATH.
#
# Users: `airflow` (uid 50000, group 0 as in Airflow's own image) runs every service of this
# image; it is also in the group `hadoop` (gid 50100), which HBase's image (docker/hbase) runs its
# `hbase` user in, so that the bundled cluster's WALs (group hadoop, not world-readable) are
# readable here and the cleaner can delete archived ones.
#
# dags/, plugins/ and spark_jobs/ are copied into the image and mounted over it by
# docker-compose.yml; a change under src/ needs a rebuild (`docker compose build`).

ARG PYTHON_IMAGE=python:3.11.14-slim-bookworm
# The Hadoop of Spark 4.2.0's own jars (pyspark/jars/hadoop-client-*-3.5.0.jar): the runtime stage
# checks that they agree.
ARG HADOOP_VERSION=3.5.0

# ---- build: a virtualenv with walship and its pinned dependencies ------------------------
FROM ${PYTHON_IMAGE} AS build
SHELL ["/bin/bash", "-o", "pipefail", "-c"]

# Postgres drivers for Airflow's metadata database (sync and async) and Celery's result
# backend; constraints.txt pins the rest, these two are not in it.
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
RUN /opt/venv/bin/pip install -c constraints.txt ".[spark,airflow,celery]" \
        "psycopg2-binary==${PSYCOPG2_VERSION}" "asyncpg==${ASYNCPG_VERSION}" \
 && /opt/venv/bin/pip check \
 && /opt/venv/bin/python -c "from importlib.metadata import version as v; print(*(p + ' ' + v(p) for p in ('walship', 'apache-airflow', 'apache-airflow-providers-celery', 'apache-airflow-providers-fab', 'pyspark', 'pyspark-client')))"

# ---- hadoop: Hadoop's client jars from Maven Central, and libhdfs.so -------------------------
FROM ${PYTHON_IMAGE} AS hadoop
SHELL ["/bin/bash", "-o", "pipefail", "-c"]

ARG HADOOP_VERSION
ARG MAVEN_CENTRAL=https://repo1.maven.org/maven2
# pip for pydoop's sdist: scripts/libhdfs.sh passes --build-constraint
ARG PIP_VERSION=26.3

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# Debian's man directories are absent in slim images; the JDK's postinst links into them.
RUN mkdir -p /usr/share/man/man1 \
 && apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jdk-headless gcc libc6-dev curl ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && ln -s "java-17-openjdk-$(dpkg --print-architecture)" /usr/lib/jvm/java-17-openjdk

# Each jar: SHA-256, then its path on Maven Central (the two Hadoop pins are HADOOP_VERSION's:
# another version needs its own). hadoop-client-runtime's POM also lists snappy-java (the Snappy
# codec, which reading WALs never uses) and jsr305 (annotations).
RUN set -eux; \
    mkdir -p /opt/hadoop/share/hadoop/client; \
    cd /opt/hadoop/share/hadoop/client; \
    for jar in \
      "cc59446ec9ebaceae56fdb8d8c21477766dc5d426325642151c796bec5c4e6b7 org/apache/hadoop/hadoop-client-api/${HADOOP_VERSION}/hadoop-client-api-${HADOOP_VERSION}.jar" \
      "b7db3e60c5df1cd37c2995b3e0142e57487260706834e5325bbe0a5e683eedf1 org/apache/hadoop/hadoop-client-runtime/${HADOOP_VERSION}/hadoop-client-runtime-${HADOOP_VERSION}.jar" \
      "66d3c980470b99b0c511dad3dfc0ae7b265ec1fb144e96bc0253a8a175fd34d9 commons-logging/commons-logging/1.3.0/commons-logging-1.3.0.jar" \
      "4eeeae8d20c078abb64b015ec158add383ac581571cddc45c68f0c9ae0230720 org/apache/commons/commons-lang3/3.18.0/commons-lang3-3.18.0.jar" \
      "d3ef575e3e4979678dc01bf1dcce51021493b4d11fb7f1be8ad982877c16a1c0 org/slf4j/slf4j-api/1.7.36/slf4j-api-1.7.36.jar" \
      "ae6fdd5c9547896114d5ec7fa7503733b7d2890573d3886fb548b3119c4d3f67 org/slf4j/slf4j-reload4j/1.7.36/slf4j-reload4j-1.7.36.jar" \
      "222f90d3e69541218ef6e70547749d693bd4c1846817e5bd7949b3e28950f99f ch/qos/reload4j/reload4j/1.2.22/reload4j-1.2.22.jar" \
    ; do \
      sha256="${jar%% *}"; path="${jar#* }"; file="${path##*/}"; \
      curl -fsSL --retry 5 -o "${file}" "${MAVEN_CENTRAL}/${path}"; \
      echo "${sha256}  ${file}" | sha256sum -c -; \
    done

# libhdfs.so, linked against the JDK's libjvm by the arch-independent path the runtime stage
# has too
WORKDIR /src
COPY scripts/libhdfs.sh scripts/libhdfs.sh
RUN python -m venv /opt/pydoop \
 && /opt/pydoop/bin/pip install --quiet "pip==${PIP_VERSION}" \
 && JAVA_HOME=/usr/lib/jvm/java-17-openjdk VENV=/opt/pydoop scripts/libhdfs.sh /opt/hadoop/lib/native \
 && rm -f /opt/hadoop/lib/native/.walship-stamp

# ---- runtime -------------------------------------------------------------------------------
FROM ${PYTHON_IMAGE}
SHELL ["/bin/bash", "-o", "pipefail", "-c"]

ARG AIRFLOW_UID=50000
# The group HBase's image writes its WALs as (docker/hbase/Dockerfile's HADOOP_GID).
ARG HADOOP_GID=50100
ARG HADOOP_VERSION

# Debian's man directories are absent in slim images; the JRE's postinst links into them.
RUN mkdir -p /usr/share/man/man1 \
 && apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless procps tini curl \
      libgssapi-krb5-2 krb5-user \
 && rm -rf /var/lib/apt/lists/* \
 && ln -s "java-17-openjdk-$(dpkg --print-architecture)" /usr/lib/jvm/java-17-openjdk

COPY --from=build /opt/venv /opt/venv
COPY --from=hadoop /opt/hadoop /opt/hadoop
COPY docker/airflow/hadoop-conf/ /etc/hadoop/conf/

# CLASSPATH: what `hadoop classpath --glob` would print, the configuration first; libhdfs
# starts its JVM with it, and Spark's launcher ignores it (Spark has its own jars).
ENV PATH=/opt/venv/bin:${PATH} \
    PYTHONUNBUFFERED=1 \
    AIRFLOW_HOME=/opt/airflow \
    PYTHONPATH=/opt/airflow/plugins \
    SPARK_WORKER_DIR=/opt/spark-work \
    JAVA_HOME=/usr/lib/jvm/java-17-openjdk \
    HADOOP_CONF_DIR=/etc/hadoop/conf \
    YARN_CONF_DIR=/etc/hadoop/conf \
    ARROW_LIBHDFS_DIR=/opt/hadoop/lib/native \
    CLASSPATH=/etc/hadoop/conf:/opt/hadoop/share/hadoop/client/hadoop-client-api-${HADOOP_VERSION}.jar:/opt/hadoop/share/hadoop/client/hadoop-client-runtime-${HADOOP_VERSION}.jar:/opt/hadoop/share/hadoop/client/commons-logging-1.3.0.jar:/opt/hadoop/share/hadoop/client/commons-lang3-3.18.0.jar:/opt/hadoop/share/hadoop/client/slf4j-api-1.7.36.jar:/opt/hadoop/share/hadoop/client/slf4j-reload4j-1.7.36.jar:/opt/hadoop/share/hadoop/client/reload4j-1.2.22.jar

RUN groupadd --gid "${HADOOP_GID}" hadoop \
 && useradd --uid "${AIRFLOW_UID}" --gid 0 --groups hadoop --home-dir /opt/airflow --no-create-home \
      --shell /bin/bash airflow \
 && mkdir -p /opt/airflow/dags /opt/airflow/plugins /opt/airflow/spark_jobs /opt/airflow/logs \
             /opt/spark-work /wal /deadletters /changelogs \
 && chown -R "${AIRFLOW_UID}:0" /opt/airflow /opt/spark-work /deadletters /changelogs \
 && chmod 2775 /opt/airflow /opt/airflow/logs /opt/spark-work /deadletters /changelogs \
 && chown "${AIRFLOW_UID}:hadoop" /wal \
 && chmod 2770 /wal

COPY --chown=${AIRFLOW_UID}:0 dags/ /opt/airflow/dags/
COPY --chown=${AIRFLOW_UID}:0 plugins/ /opt/airflow/plugins/
COPY --chown=${AIRFLOW_UID}:0 spark_jobs/ /opt/airflow/spark_jobs/
COPY docker/airflow/init.sh /usr/local/bin/walship-airflow-init
# Checks: Spark's version, its Hadoop client is this one, every CLASSPATH entry exists, and
# pyarrow starts libhdfs's JVM with them (fs.defaultFS: the local file system).
RUN chmod 0755 /usr/local/bin/walship-airflow-init \
 && spark-submit --version 2>&1 | grep -q "version 4.2.0" \
 && spark_jars="$(python -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')" \
 && test -f "${spark_jars}/hadoop-client-api-${HADOOP_VERSION}.jar" \
 && for entry in ${CLASSPATH//:/ }; do test -e "${entry}" || { echo "CLASSPATH: no ${entry}" >&2; exit 1; }; done \
 && python -c "from pyarrow.fs import HadoopFileSystem; HadoopFileSystem('default')"

USER ${AIRFLOW_UID}
WORKDIR /opt/airflow
ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["airflow", "version"]

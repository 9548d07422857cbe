#!/usr/bin/env bash
# One-command set-up of a fresh machine: Java 17+, Debian's zookeeper, docker-compose and
# chromium (with chromium-driver), a C compiler and the Python headers, MIT Kerberos (a KDC for
# the secure tests, its client and headers), PostgreSQL and Redis (the test of Airflow's production
# topology), and .venv with the
# pinned dependencies (constraints.txt) and walship's compiled WAL decoder, the real-HBase harness,
# libhdfs.so (pyarrow's HDFS client) and the Spark driver's class archive.
# Idempotent: a second run only checks.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=.venv
# Prefer Debian's own python3 (built with PGO and LTO): the WAL decoder runs about a fifth
# faster on it than on a plain source build. PYTHON=... overrides.
if [ -z "${PYTHON:-}" ]; then
  if [ -x /usr/bin/python3 ] && /usr/bin/python3 -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then
    PYTHON=/usr/bin/python3
  else
    PYTHON=python3
  fi
fi

say() { printf 'setup: %s\n' "$*"; }

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"
  elif command -v sudo >/dev/null 2>&1; then sudo "$@"
  else say "need root to run: $*"; exit 1
  fi
}

APT_UPDATED=0
apt_install() {
  if ! command -v apt-get >/dev/null 2>&1; then
    say "apt-get not found; install these by hand: $*"; exit 1
  fi
  if [ "$APT_UPDATED" -eq 0 ]; then
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    APT_UPDATED=1
  fi
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

java_major() {
  command -v java >/dev/null 2>&1 || { echo 0; return; }
  java -version 2>&1 | awk -F'"' '/version/ { split($2, v, "."); print (v[1] == "1" ? v[2] : v[1]); exit }'
}

# 1. Python 3.11+
"$PYTHON" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' \
  || { say "Python 3.11 or newer is needed ($PYTHON is $("$PYTHON" --version 2>&1))"; exit 1; }

# 2. Java 17+ (Spark 4 and ZooKeeper run on it)
if [ "$(java_major)" -lt 17 ]; then
  say "installing Java 17 (found: $(java_major))"
  apt_install openjdk-17-jre-headless
fi
[ "$(java_major)" -ge 17 ] || { say "Java 17 or newer is needed"; exit 1; }

# 3. ZooKeeper from Debian's package (started by scripts/zk.sh, never as a system service here)
if [ ! -d /usr/share/zookeeper/lib ] && [ ! -f /usr/share/java/zookeeper.jar ]; then
  say "installing Debian's zookeeper package"
  apt_install zookeeper
fi

# 4. docker-compose from Debian's package: checks docker-compose.yml (tests/unit/test_compose.py)
#    without a Docker daemon; the production stack runs with it or with `docker compose`
if ! command -v docker-compose >/dev/null 2>&1; then
  say "installing Debian's docker-compose package"
  apt_install docker-compose
fi

# 5. Chromium and its WebDriver from Debian's packages: the Airflow "Replication" page is tested
#    in a real headless browser (tests/integration/test_ui.py)
if [ ! -x /usr/bin/chromium ] || [ ! -x /usr/bin/chromedriver ]; then
  say "installing Debian's chromium and chromium-driver packages"
  apt_install chromium chromium-driver
fi

# 6. A C compiler and the Python headers: pip compiles the WAL decoder, the put encoder, the
#    batcher, the sinks' fast path and the RPC round trip (src/walship/wal/_walcodec.c,
#    src/walship/thrift/_putencoder.c, src/walship/replicate/batcher/_batcher.c,
#    src/walship/sinks/_fastpath.c, src/walship/rpc/_exchange.c) into the editable install
py_include=$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
if ! command -v cc >/dev/null 2>&1 && ! command -v gcc >/dev/null 2>&1; then
  say "installing gcc (for the compiled WAL decoder)"
  apt_install gcc libc6-dev
fi
if [ ! -f "$py_include/Python.h" ]; then
  case "$py_include" in
    /usr/include/*) say "installing Debian's python3-dev (headers for the compiled WAL decoder)"; apt_install python3-dev ;;
  esac
  [ -f "$py_include/Python.h" ] || { say "no Python headers for $PYTHON (no $py_include/Python.h)"; exit 1; }
fi

# 6b. MIT Kerberos from Debian's packages: the secure tests run a throw-away KDC of their own
#     (walship_testing.harness.kdc: krb5kdc, kdb5_util, kadmin.local, never as a system service nor with
#     /etc/krb5.conf), kinit/klist for checks, and the headers pip compiles the Python Kerberos
#     clients (gssapi, kerberos) against
if [ ! -x /usr/sbin/krb5kdc ] || [ ! -x /usr/sbin/kadmin.local ] || ! command -v kinit >/dev/null 2>&1 \
   || ! command -v krb5-config >/dev/null 2>&1; then
  say "installing Debian's krb5-kdc, krb5-admin-server, krb5-user and libkrb5-dev packages"
  apt_install krb5-kdc krb5-admin-server krb5-user libkrb5-dev
fi

# 6c. promtool from Debian's prometheus package: the tests check walship's alert rules
#     (src/walship/status/alerts.yml) with `promtool check rules` and run their unit tests with
#     `promtool test rules` (tests/unit/test_alert_rules.py); the Prometheus server the package
#     brings is never started here
if ! command -v promtool >/dev/null 2>&1; then
  say "installing Debian's prometheus package (for promtool)"
  apt_install prometheus
fi

# 6d. PostgreSQL and Redis from Debian's packages: the test of Airflow's production topology
#     (tests/topology.py: the metadata DB and Celery's result backend, Celery's broker) runs
#     throw-away servers of its own on free ports (initdb and postgres from
#     /usr/lib/postgresql/<version>/bin, as the `postgres` user when run as root; redis-server, or
#     valkey-server where Debian has it), never the system services: PostgreSQL's packages are
#     told not to create their "main" cluster (createcluster.conf, read when postgresql-NN is
#     installed), and nothing here starts a server
if ! compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null; then
  say "installing Debian's postgresql package (without its \"main\" cluster)"
  apt_install postgresql-common
  as_root sed -i 's/^#\?[[:space:]]*create_main_cluster[[:space:]]*=.*/create_main_cluster = false/' \
    /etc/postgresql-common/createcluster.conf
  apt_install postgresql
fi
if ! command -v valkey-server >/dev/null 2>&1 && ! command -v redis-server >/dev/null 2>&1; then
  say "installing Debian's redis-server package"
  apt_install redis-server
fi

# 7. The virtualenv with pinned versions
if ! "$PYTHON" -c 'import ensurepip, venv' >/dev/null 2>&1; then
  say "installing python3-venv"
  apt_install python3-venv
fi
PYTHON_REAL=$("$PYTHON" -c 'import os, sys; print(os.path.realpath(sys.executable))')
stamp_of() { { cat pyproject.toml constraints.txt src/walship/wal/_walcodec.c src/walship/wal/_walcodec_context.h src/walship/wal/_walcodec_compressed.h src/walship/thrift/_putencoder.c src/walship/wal/_tuples.h src/walship/replicate/batcher/_batcher.c src/walship/sinks/_fastpath.c src/walship/sinks/_multicall.h src/walship/rpc/_exchange.c; echo "$PYTHON_REAL"; } | sha256sum | cut -d' ' -f1; }
if [ -x "$VENV/bin/python" ] && [ "$(cat "$VENV/.walship-python" 2>/dev/null || true)" != "$PYTHON_REAL" ]; then
  say "recreating $VENV for $PYTHON_REAL"
  rm -rf "$VENV"
fi
if [ ! -x "$VENV/bin/python" ]; then
  say "creating $VENV with $PYTHON_REAL"
  "$PYTHON" -m venv "$VENV"
  echo "$PYTHON_REAL" > "$VENV/.walship-python"
fi
if [ "$(cat "$VENV/.walship-stamp" 2>/dev/null || true)" != "$(stamp_of)" ]; then
  say "installing Python dependencies (pinned in constraints.txt)"
  rm -f src/walship/wal/_walcodec.*.so src/walship/thrift/_putencoder.*.so src/walship/sinks/_fastpath.*.so src/walship/rpc/_exchange.*.so  # a failed (optional) build must not leave an old one behind
  log="$VENV/pip-install.log"
  if ! { "$VENV/bin/python" -m pip install --upgrade pip \
         && "$VENV/bin/python" -m pip install -c constraints.txt -e ".[spark,airflow,celery,dev]"; } >"$log" 2>&1; then
    tail -40 "$log"; say "pip install failed (full log: $log)"; exit 1
  fi
  stamp_of > "$VENV/.walship-stamp"
fi
# built, and (the batcher and the fast path) for the tuples' layout of this source tree
decoder_built() { "$VENV/bin/python" -c 'from walship.wal.reader import default_decoder; from walship.thrift.encoded import put_encoder; from walship.sinks.compiled import FASTPATH; from walship.replicate.batcher.filters import COMPILED; from walship.rpc.wire import exchanges_compiled; import sys; sys.exit(default_decoder() != "c" or put_encoder() != "c" or FASTPATH is None or COMPILED is None or not exchanges_compiled())' 2>/dev/null; }
if ! decoder_built; then
  say "building the compiled WAL decoder, put encoder, batcher, sinks' fast path and RPC round trip (src/walship/wal/_walcodec.c, src/walship/thrift/_putencoder.c, src/walship/replicate/batcher/_batcher.c, src/walship/sinks/_fastpath.c, src/walship/rpc/_exchange.c)"
  rm -f src/walship/wal/_walcodec.*.so src/walship/thrift/_putencoder.*.so src/walship/replicate/batcher/_batcher.*.so src/walship/sinks/_fastpath.*.so src/walship/rpc/_exchange.*.so
  log="$VENV/build-ext.log"
  "$VENV/bin/python" -m pip install --no-deps -e . >"$log" 2>&1 || { tail -40 "$log"; say "pip install failed (full log: $log)"; exit 1; }
  decoder_built || { grep -iE "error|warning: build_ext" "$log" | tail -20; say "the compiled WAL decoder, put encoder, batcher, sinks' fast path or RPC round trip did not build (full log: $log)"; exit 1; }
fi
# walship's own modules as bytecode: an editable install is compiled only where a process may
# write it (not under PYTHONDONTWRITEBYTECODE), and every CLI run, Airflow task and Spark
# worker imports walship; recompiles only what changed
log="$VENV/compileall.log"
"$VENV/bin/python" -m compileall -q -j 0 src dags plugins spark_jobs >"$log" 2>&1 \
  || { tail -20 "$log"; say "compiling walship's modules failed (full log: $log)"; exit 1; }

# 8. The real-HBase harness (harness/: HBase 2.6's own test cluster and Thrift servers, from
#    Maven Central): the first build resolves into the local Maven repository, later ones
#    build offline. Tests and `make demo HBASE=real` run it.
if ! command -v javac >/dev/null 2>&1; then
  say "installing Debian's openjdk-17-jdk-headless (compiles the real-HBase harness)"
  apt_install openjdk-17-jdk-headless
fi
if ! command -v mvn >/dev/null 2>&1; then
  say "installing Debian's maven package (builds the real-HBase harness)"
  apt_install maven
fi
harness_stamp() { cat harness/pom.xml $(find harness/src -type f | sort) | sha256sum | cut -d' ' -f1; }
if [ "$(cat harness/target/.walship-stamp 2>/dev/null || true)" != "$(harness_stamp)" ] \
   || [ ! -f harness/target/classpath.txt ] || [ ! -f harness/target/classes/walship/harness/Launcher.class ]; then
  say "building the real-HBase harness (harness/, HBase 2.6 from Maven Central on the first run)"
  log="$VENV/harness-build.log"
  if ! (cd harness && mvn -B -q -o package) >"$log" 2>&1; then
    (cd harness && mvn -B -q package) >"$log" 2>&1 || { tail -40 "$log"; say "the harness did not build (full log: $log)"; exit 1; }
  fi
  harness_stamp > harness/target/.walship-stamp
fi

# 9. libhdfs.so for pyarrow's HDFS client (`hdfs://` WAL roots), compiled from the Hadoop
#    sources in PyPI's pydoop sdist against the JDK above (no registry serves it built)
VENV="$VENV" scripts/libhdfs.sh "$VENV/libhdfs"

# 10. The class archive of the Spark driver's JVM (walship.spark.jvm): a small job run once
#     with this Java and Spark; walship's job settings map it, and a driver starts about 3 s
#     sooner. Rebuilt when the Java, Spark or walship's Java options change. Without it jobs
#     run as before (its test in `make test` says it is missing).
log="$VENV/spark-jvm.log"
if ! "$VENV/bin/python" -m walship.spark.jvm >"$log" 2>&1; then
  tail -20 "$log"; say "warning: the Spark driver's class archive did not build (full log: $log); jobs start without it"
fi
say "ok: $("$VENV/bin/python" --version), java $(java_major), zookeeper $(dpkg-query -W -f '${Version}' zookeeper 2>/dev/null || echo present), docker-compose $(dpkg-query -W -f '${Version}' docker-compose 2>/dev/null || echo present), chromium $(dpkg-query -W -f '${Version}' chromium 2>/dev/null || echo present), HBase harness $(sed -n 's:.*<hbase.version>\(.*\)</hbase.version>.*:\1:p' harness/pom.xml)"

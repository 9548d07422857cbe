# shellcheck shell=bash
# hbase-env.sh of walship's HBase image (replaces the release's): JVM settings for the three
# daemons the entrypoint starts. Each setting can be overridden from the container's
# environment (docker-compose.yml).

export HBASE_MANAGES_ZK=false
export HBASE_LOG_DIR="${HBASE_LOG_DIR:-/opt/hbase/logs}"
export HBASE_PID_DIR="${HBASE_PID_DIR:-/tmp}"

# Java 17 closes the JDK internals HBase 2.x and its Netty reach into; these are the openings
# HBase's own build uses for its JDK 17 test runs (hbase-surefire.jdk17.flags).
HBASE_JDK17_OPTS="-XX:+IgnoreUnrecognizedVMOptions \
 --add-opens=java.base/java.lang=ALL-UNNAMED \
 --add-opens=java.base/java.lang.reflect=ALL-UNNAMED \
 --add-opens=java.base/java.nio=ALL-UNNAMED \
 --add-opens=java.base/sun.nio.ch=ALL-UNNAMED \
 --add-opens=java.base/java.util=ALL-UNNAMED \
 --add-opens=java.base/java.util.concurrent=ALL-UNNAMED \
 --add-opens=java.base/java.util.concurrent.atomic=ALL-UNNAMED \
 --add-opens=java.base/jdk.internal.util.random=ALL-UNNAMED \
 --add-exports=java.base/jdk.internal.misc=ALL-UNNAMED \
 --add-exports=java.security.jgss/sun.security.krb5=ALL-UNNAMED \
 -Dio.netty.tryReflectionSetAccessible=true"
case " ${HBASE_OPTS:-} " in
  *" --add-opens=java.base/java.lang=ALL-UNNAMED "*) ;;
  *) export HBASE_OPTS="${HBASE_OPTS:-} ${HBASE_JDK17_OPTS}" ;;
esac

export HBASE_MASTER_OPTS="${HBASE_MASTER_OPTS:--Xmx${HBASE_MASTER_HEAP:-512m}}"
export HBASE_REGIONSERVER_OPTS="${HBASE_REGIONSERVER_OPTS:--Xmx${HBASE_REGIONSERVER_HEAP:-1g}}"
export HBASE_THRIFT_OPTS="${HBASE_THRIFT_OPTS:--Xmx${HBASE_THRIFT_HEAP:-256m}}"

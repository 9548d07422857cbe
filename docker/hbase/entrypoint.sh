#!/usr/bin/env bash
# Entrypoint of walship's HBase image: renders conf/hbase-site.xml from the environment, then
#   cluster (default)                 HMaster, one HRegionServer and the Thrift1 and Thrift2
#                                     servers, each its own JVM; the container stops when any of
#                                     them stops
#   master | regionserver | thrift | thrift2
#                                     that daemon alone, in the foreground
#   anything else                     run as given (e.g. `hbase shell`)
#
# Environment (docker-compose.yml sets the per-cluster ones):
#   HBASE_ZNODE_PARENT (required)     the cluster's parent znode, e.g. /hbase-a
#   HBASE_ZK_QUORUM, HBASE_ZK_PORT    ZooKeeper (zookeeper, 2181)
#   HBASE_ROOTDIR                     data (file:///data/hbase)
#   HBASE_WAL_DIR                     write-ahead logs: WALs/ and oldWALs/ (file:///data/wal)
#   HBASE_TMP_DIR                     (/data/tmp)
#   HBASE_LOGROLL_PERIOD_MS           a new WAL at least this often (3600000, HBase's default)
#   HBASE_LOGCLEANER_TTL_MS           how long HBase keeps an archived WAL no queue holds
#                                     (86400000, a day: longer than walship_replay's hourly
#                                     windows and a day's backfill; HBase's default is 600000)
#   HBASE_REGIONSERVER_HOSTNAME       the region server's name (the container's hostname)
#   HBASE_THRIFT_PORT                 (9090)
#   HBASE_THRIFT2_PORT                the Thrift2 (THBaseService) server, walship's exact sink (9091)
#   HBASE_THRIFT_SERVER_TYPE          threadpool (default) | hsha | nonblocking | threadedselector
#   HBASE_THRIFT_FRAMED, HBASE_THRIFT_COMPACT
#                                     true for TFramedTransport / TCompactProtocol (default false:
#                                     buffered transport and binary protocol, which is what
#                                     walship's Thrift1 sink speaks); clients must match
#   HBASE_MASTER_HEAP, HBASE_REGIONSERVER_HEAP, HBASE_THRIFT_HEAP (512m, 1g, 256m)
set -euo pipefail

say() { printf 'hbase-entrypoint: %s\n' "$*" >&2; }

: "${HBASE_CONF_DIR:=/opt/hbase/conf}"
: "${HBASE_ZNODE_PARENT:?must be set, e.g. /hbase-a}"
export HBASE_ZK_QUORUM="${HBASE_ZK_QUORUM:-zookeeper}"
export HBASE_ZK_PORT="${HBASE_ZK_PORT:-2181}"
export HBASE_ROOTDIR="${HBASE_ROOTDIR:-file:///data/hbase}"
export HBASE_WAL_DIR="${HBASE_WAL_DIR:-file:///data/wal}"
export HBASE_TMP_DIR="${HBASE_TMP_DIR:-/data/tmp}"
export HBASE_LOGROLL_PERIOD_MS="${HBASE_LOGROLL_PERIOD_MS:-3600000}"
export HBASE_LOGCLEANER_TTL_MS="${HBASE_LOGCLEANER_TTL_MS:-86400000}"
export HBASE_REGIONSERVER_HOSTNAME="${HBASE_REGIONSERVER_HOSTNAME:-$(uname -n)}"
THRIFT_PORT="${HBASE_THRIFT_PORT:-9090}"
THRIFT_TYPE="${HBASE_THRIFT_SERVER_TYPE:-threadpool}"
THRIFT2_PORT="${HBASE_THRIFT2_PORT:-9091}"

case "$HBASE_ZNODE_PARENT" in
  /*) ;;
  *) say "HBASE_ZNODE_PARENT must start with /: $HBASE_ZNODE_PARENT"; exit 1 ;;
esac
for name in HBASE_LOGROLL_PERIOD_MS HBASE_LOGCLEANER_TTL_MS; do
  [[ "${!name}" =~ ^[0-9]+$ ]] || { say "$name must be a number of milliseconds: ${!name}"; exit 1; }
done
case "$THRIFT_TYPE" in
  threadpool | hsha | nonblocking | threadedselector) ;;
  *) say "HBASE_THRIFT_SERVER_TYPE must be threadpool, hsha, nonblocking or threadedselector: $THRIFT_TYPE"; exit 1 ;;
esac

render_site() {
  local site="$HBASE_CONF_DIR/hbase-site.xml"
  if [ -f /etc/hbase/hbase-site.xml ]; then
    cp /etc/hbase/hbase-site.xml "$site"
    say "using /etc/hbase/hbase-site.xml"
    return
  fi
  shopt -u patsub_replacement 2>/dev/null || true
  local text name value
  text="$(<"$HBASE_CONF_DIR/hbase-site.xml.template")"
  for name in HBASE_ZK_QUORUM HBASE_ZK_PORT HBASE_ZNODE_PARENT HBASE_ROOTDIR HBASE_WAL_DIR HBASE_TMP_DIR \
              HBASE_LOGROLL_PERIOD_MS HBASE_LOGCLEANER_TTL_MS HBASE_REGIONSERVER_HOSTNAME; do
    value="${!name}"
    value="${value//&/&amp;}"
    value="${value//</&lt;}"
    value="${value//>/&gt;}"
    text="${text//"@${name}@"/"$value"}"
  done
  if [[ "$text" =~ @[A-Z0-9_]+@ ]]; then
    say "hbase-site.xml.template: no value for ${BASH_REMATCH[0]}"
    exit 1
  fi
  printf '%s\n' "$text" >"$site"
  say "znode parent $HBASE_ZNODE_PARENT on $HBASE_ZK_QUORUM:$HBASE_ZK_PORT, root $HBASE_ROOTDIR, WALs $HBASE_WAL_DIR"
}

thrift_args() {
  # $1: the port; the Thrift2 server gets its own info port
  local args=(-p "$1" "-$THRIFT_TYPE")
  [ "$1" = "$THRIFT2_PORT" ] && args+=(--infoport 9096)
  [ "${HBASE_THRIFT_FRAMED:-false}" = "true" ] && args+=(-f)
  [ "${HBASE_THRIFT_COMPACT:-false}" = "true" ] && args+=(-c)
  printf '%s\n' "${args[@]}"
}

render_site
mkdir -p "$HBASE_TMP_DIR" "${HBASE_LOG_DIR:-/opt/hbase/logs}"

cmd="${1:-cluster}"
case "$cmd" in
  cluster) ;;
  master | regionserver) exec hbase "$cmd" start ;;
  thrift) mapfile -t targs < <(thrift_args "$THRIFT_PORT"); exec hbase thrift start "${targs[@]}" ;;
  thrift2) mapfile -t targs < <(thrift_args "$THRIFT2_PORT"); exec hbase thrift2 start "${targs[@]}" ;;
  *) exec "$@" ;;
esac

mapfile -t targs < <(thrift_args "$THRIFT_PORT")
mapfile -t t2args < <(thrift_args "$THRIFT2_PORT")
say "starting HMaster, HRegionServer, the Thrift server (port $THRIFT_PORT, ${targs[*]:2}) and Thrift2 (port $THRIFT2_PORT)"
hbase master start &
master=$!
hbase regionserver start &
regionserver=$!
hbase thrift start "${targs[@]}" &
thrift=$!
hbase thrift2 start "${t2args[@]}" &
thrift2=$!

stop_all() {
  # region server and Thrift first (the region server closes and flushes its regions), then
  # the master
  kill -TERM "$thrift" "$thrift2" "$regionserver" 2>/dev/null || true
  wait "$thrift" "$thrift2" "$regionserver" 2>/dev/null || true
  kill -TERM "$master" 2>/dev/null || true
  wait "$master" 2>/dev/null || true
}
trap 'say "stopping"; stop_all; exit 0' TERM INT

status=0
wait -n "$master" "$regionserver" "$thrift" "$thrift2" || status=$?
for pid_name in "$master:HMaster" "$regionserver:HRegionServer" "$thrift:Thrift server" "$thrift2:Thrift2 server"; do
  kill -0 "${pid_name%%:*}" 2>/dev/null || say "${pid_name#*:} exited (status $status); stopping the others"
done
stop_all
exit $(( status == 0 ? 1 : status ))

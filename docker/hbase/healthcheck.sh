#!/usr/bin/env bash
# Healthy when this container's HMaster is the active master and sees a live region server,
# and the Thrift1 and Thrift2 servers accept connections. Says what is missing otherwise.
set -uo pipefail
info_port="${HBASE_MASTER_INFO_PORT:-16010}"
thrift_port="${HBASE_THRIFT_PORT:-9090}"

jmx="$(curl -fsS --max-time 5 "http://127.0.0.1:${info_port}/jmx?qry=Hadoop:service=HBase,name=Master,sub=Server")" \
  || { echo "HMaster's info server (port ${info_port}) does not answer"; exit 1; }
grep -Eq '"tag\.isActiveMaster" *: *"?true' <<<"$jmx" || { echo "HMaster is not active (yet)"; exit 1; }
grep -Eq '"numRegionServers" *: *[1-9]' <<<"$jmx" || { echo "no live region server"; exit 1; }
(exec 3<>"/dev/tcp/127.0.0.1/${thrift_port}") 2>/dev/null \
  || { echo "the Thrift server does not accept connections on ${thrift_port}"; exit 1; }
thrift2_port="${HBASE_THRIFT2_PORT:-9091}"
(exec 3<>"/dev/tcp/127.0.0.1/${thrift2_port}") 2>/dev/null \
  || { echo "the Thrift2 server does not accept connections on ${thrift2_port}"; exit 1; }
echo "ok"

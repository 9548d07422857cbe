#!/usr/bin/env bash
# Build libhdfs.so, the JNI library pyarrow's HDFS client (`hdfs://` WAL roots) loads, into
# $VENV/libhdfs/ (or $1). No registry serves it built: Maven Central's hadoop-hdfs-native-client
# jars hold no native code, Debian packages no Hadoop, PyPI's pyarrow does not bundle it. Its C
# sources (Hadoop's own, Apache-2.0) ship inside PyPI's pydoop 2.0.0 sdist: compiled here against
# the JDK's JNI headers. At run time it needs JAVA_HOME (libjvm) and the Hadoop client jars in
# CLASSPATH; the harness's classpath (harness/target/classpath.txt) holds them for the tests.
# Idempotent: a second run only checks.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${VENV:-.venv}
OUT=${1:-$VENV/libhdfs}
PYDOOP="pydoop==2.0.0 --hash=sha256:c7eb2ad8c36d2a75dc1c6cee701928334614f2e862a70798b0cb278e3102f77d"

say() { printf 'libhdfs: %s\n' "$*"; }

javac_path=$(command -v javac) || { say "javac not found: a JDK (openjdk-17-jdk-headless) is needed"; exit 1; }
JDK=${JAVA_HOME:-$(dirname "$(dirname "$(readlink -f "$javac_path")")")}
[ -f "$JDK/include/jni.h" ] || { say "no $JDK/include/jni.h (set JAVA_HOME to a JDK)"; exit 1; }
[ -f "$JDK/lib/server/libjvm.so" ] || { say "no $JDK/lib/server/libjvm.so"; exit 1; }

stamp=$(printf '%s\n' "$PYDOOP" "$JDK" "$(sha256sum "$0" | cut -d' ' -f1)" | sha256sum | cut -d' ' -f1)
if [ -f "$OUT/libhdfs.so" ] && [ "$(cat "$OUT/.walship-stamp" 2>/dev/null || true)" = "$stamp" ]; then
  exit 0
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
say "building $OUT/libhdfs.so from the libhdfs sources in PyPI's pydoop 2.0.0 sdist"
echo "$PYDOOP" > "$work/req.txt"
# pip prepares an sdist's metadata even to download it; pydoop's setup.py needs pkg_resources,
# which setuptools 81 dropped
echo "setuptools<81" > "$work/build-constraints.txt"
"$VENV/bin/python" -m pip download --quiet --no-deps --no-binary :all: --require-hashes \
  --build-constraint "$work/build-constraints.txt" -r "$work/req.txt" -d "$work" >"$work/pip.log" 2>&1 \
  || { tail -20 "$work/pip.log"; say "pip could not download pydoop 2.0.0"; exit 1; }
tar -xzf "$work"/pydoop-2.0.0.tar.gz -C "$work" pydoop-2.0.0/src/libhdfs
src="$work/pydoop-2.0.0/src/libhdfs"
# written for Hadoop 3.1's commons-lang; Hadoop 3.3's client jars carry commons-lang3 (the same call)
sed -i 's:org/apache/commons/lang/exception/ExceptionUtils:org/apache/commons/lang3/exception/ExceptionUtils:' \
  "$src/exception.c"
mkdir -p "$OUT"
gcc -shared -fPIC -O2 -w -o "$OUT/libhdfs.so.tmp" \
  -I"$src" -I"$src/include" -I"$src/os/posix" -I"$src/os" -I"$JDK/include" -I"$JDK/include/linux" \
  "$src"/*.c "$src"/common/*.c "$src"/os/posix/*.c \
  -L"$JDK/lib/server" -ljvm -lpthread -Wl,-rpath,"$JDK/lib/server"
mv "$OUT/libhdfs.so.tmp" "$OUT/libhdfs.so"
echo "$stamp" > "$OUT/.walship-stamp"
say "ok: $OUT/libhdfs.so"

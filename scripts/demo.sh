#!/usr/bin/env bash
# The embedded-default demo. Until the pipeline lands: write a sample WAL with every cell
# type, dump it as text and as JSON, and check the dump reads back every entry.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin
DIR=.demo
rm -rf "$DIR"; mkdir -p "$DIR"
WAL=$("$BIN/walship" wal sample "$DIR/localhost%2C16020%2C1.1700000000000" --entries 10)
echo "== $WAL (WALPrettyPrinter style)"
"$BIN/walship" wal dump "$WAL" | head -20
echo "== $WAL (--json, first 2 lines)"
"$BIN/walship" wal dump --json "$WAL" > "$DIR/dump.jsonl"
head -2 "$DIR/dump.jsonl"
n=$(wc -l < "$DIR/dump.jsonl")
if [ "$n" -eq 10 ]; then echo "PASS: 10 entries written and read back"; else echo "FAIL: expected 10 entries, got $n"; exit 1; fi

#!/usr/bin/env bash
# Runs bench.mjs three times against each of two throwaway redis-servers
# (from PATH): persistence off, then AOF with `appendfsync everysec`.
# Extra arguments go to bench.mjs (e.g. --jobs 20000).
#
#   npm ci && ./run.sh [--jobs 50000] [--batch 1000] [--concurrency 100]
#
# PORT (default 56390) and PORT+1 must be free.
set -euo pipefail
cd "$(dirname "$0")"
port=${PORT:-56390}
dir=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  # Let them exit before their directories go.
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$dir"
}
trap cleanup EXIT

start() { # name port args...
  local name=$1 p=$2
  shift 2
  mkdir -p "$dir/$name"
  redis-server --port "$p" --bind 127.0.0.1 --dir "$dir/$name" --save "" "$@" \
    --logfile "$dir/$name/redis.log" &
  pids+=($!)
  for _ in $(seq 50); do
    redis-cli -p "$p" ping >/dev/null 2>&1 && return
    sleep 0.1
  done
  echo "redis-server on port $p did not start (see $dir/$name/redis.log)" >&2
  exit 1
}

start off "$port" --appendonly no
start aof "$((port + 1))" --appendonly yes --appendfsync everysec
version=$(redis-server --version | sed 's/.*v=\([^ ]*\).*/\1/')
for name in off aof; do
  p=$port
  [ "$name" = aof ] && p=$((port + 1))
  echo "== redis $version, persistence $name"
  for _ in 1 2 3; do
    node bench.mjs --redis "redis://127.0.0.1:$p" "$@"
  done
done

#!/usr/bin/env bash
# SQLite's share of a `sluice bench jobs` burn-down, without Sluice: builds
# replay.c on the SQLite that libsqlite3-sys bundles (its flags and the
# workspace's LIBSQLITE3_FLAGS), then replays 50,000 jobs' claims and
# completions three times each way (replay.py) and prints the CPU time of
# each run (user + sys). See docs/jobs.md, "Throughput".
#
#   bench/jobs-floor/run.sh [JOBS] [BATCH]
set -euo pipefail
cd "$(dirname "$0")"
jobs=${1:-50000}
batch=${2:-130}
root=$(cd ../.. && pwd)
src=$(cargo metadata --format-version 1 --manifest-path "$root/Cargo.toml" --locked |
  python3 -c 'import json,sys; print(next(p["manifest_path"] for p in json.load(sys.stdin)["packages"] if p["name"] == "libsqlite3-sys").rsplit("/", 1)[0] + "/sqlite3")')
flags=$(sed -n 's/^LIBSQLITE3_FLAGS = "\(.*\)"/\1/p' "$root/.cargo/config.toml")
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# libsqlite3-sys's build.rs flags for the bundled build, then ours.
gcc -O3 -I"$src" -DSQLITE_CORE -DSQLITE_DEFAULT_FOREIGN_KEYS=1 -DSQLITE_ENABLE_API_ARMOR \
  -DSQLITE_ENABLE_COLUMN_METADATA -DSQLITE_ENABLE_DBSTAT_VTAB -DSQLITE_ENABLE_FTS3 \
  -DSQLITE_ENABLE_FTS3_PARENTHESIS -DSQLITE_ENABLE_FTS5 -DSQLITE_ENABLE_JSON1 \
  -DSQLITE_ENABLE_LOAD_EXTENSION=1 -DSQLITE_ENABLE_MEMORY_MANAGEMENT -DSQLITE_ENABLE_RTREE \
  -DSQLITE_ENABLE_STAT4 -DSQLITE_SOUNDEX -DSQLITE_THREADSAFE=1 -DSQLITE_USE_URI -DHAVE_USLEEP=1 \
  -DHAVE_ISNAN -D_POSIX_THREAD_SAFE_FUNCTIONS -DHAVE_LOCALTIME_R $flags \
  replay.c "$src/sqlite3.c" -lpthread -ldl -lm -o "$dir/replay"
mig="$root/crates/jobs/migrations/sqlite"
./replay.py "$mig" setup "$jobs" > "$dir/setup.sql"
"$dir/replay" "$dir/seed.db" "$dir/setup.sql" 2>/dev/null
for way in floor sluice; do ./replay.py "$mig" "$way" "$jobs" "$batch" > "$dir/$way.sql"; done
for _ in 1 2 3; do
  for way in floor sluice; do
    cp "$dir/seed.db" "$dir/run.db"
    [ -e "$dir/seed.db-wal" ] && cp "$dir/seed.db-wal" "$dir/run.db-wal"
    rm -f "$dir/run.db-shm"
    /usr/bin/time -f "$way: %U s user + %S s sys, $jobs jobs in rounds of $batch" \
      "$dir/replay" "$dir/run.db" "$dir/$way.sql" 2>&1 | grep -v '^rows'
    rm -f "$dir"/run.db*
  done
done

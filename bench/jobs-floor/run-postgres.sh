#!/usr/bin/env bash
# PostgreSQL's share of a `sluice bench jobs` burn-down, without Sluice:
# the same row changes as run.sh's floor (replay_pg.py), sent by psql to a
# local server, three times. Prints per run the wall time, the jobs a
# second, and the CPU of the whole server (every process of it, from
# /proc, so the server must run on this machine and this user must read
# its data directory) and of psql. Each run starts from a fresh schema
# (crates/jobs/migrations/postgres applied, JOBS jobs inserted, a
# checkpoint; MIGRATIONS=DIR applies another directory's). See
# docs/jobs.md, "Throughput".
#
#   bench/jobs-floor/run-postgres.sh URL [JOBS] [BATCH]
set -euo pipefail
cd "$(dirname "$0")"
url=$1
jobs=${2:-50000}
batch=${3:-130}
root=$(cd ../.. && pwd)
mig=${MIGRATIONS:-$root/crates/jobs/migrations/postgres}
schema=sluice_jobs_floor
export PGOPTIONS="-c search_path=$schema -c jit=off -c client_min_messages=warning"
dir=$(mktemp -d)
trap 'rm -rf "$dir"; psql -qX "$url" -c "DROP SCHEMA IF EXISTS $schema CASCADE" >/dev/null 2>&1 || true' EXIT
data=$(psql -qAtX "$url" -c "SHOW data_directory")
postmaster=$(head -1 "$data/postmaster.pid")
# The server's CPU seconds so far: its live processes' and the postmaster's
# children that exited (backends of closed connections).
server_cpu() {
  local total=0 p f
  for p in $(pgrep -P "$postmaster") "$postmaster"; do
    f=$(cat "/proc/$p/stat" 2>/dev/null) || continue
    f=${f##*) }
    # shellcheck disable=SC2086
    set -- $f
    total=$((total + ${12} + ${13}))
    [ "$p" = "$postmaster" ] && total=$((total + ${14} + ${15}))
  done
  echo "$total"
}
tck=$(getconf CLK_TCK)
./replay_pg.py setup "$jobs" > "$dir/setup.sql"
./replay_pg.py floor "$jobs" "$batch" > "$dir/floor.sql"
for _ in 1 2 3; do
  {
    echo "DROP SCHEMA IF EXISTS $schema CASCADE; CREATE SCHEMA $schema;"
    cat "$mig"/*.sql
  } | psql -qX -v ON_ERROR_STOP=1 "$url" >/dev/null
  psql -qX -v ON_ERROR_STOP=1 "$url" -f "$dir/setup.sql" >/dev/null
  psql -qX "$url" -c CHECKPOINT >/dev/null
  before=$(server_cpu)
  start=$(date +%s.%N)
  /usr/bin/time -o "$dir/psql.time" -f "%U %S" psql -qX -v ON_ERROR_STOP=1 "$url" -f "$dir/floor.sql" >/dev/null
  end=$(date +%s.%N)
  after=$(server_cpu)
  read -r pu ps < "$dir/psql.time"
  python3 -c "
jobs, wall, server = $jobs, $end - $start, ($after - $before) / $tck
print(f'floor: {jobs} jobs in rounds of $batch: {wall:.2f} s, {jobs / wall:.0f} jobs/s; '
      f'server CPU {server:.2f} s ({server * 1e6 / jobs:.0f} us/job), psql {$pu + $ps:.2f} s')"
done

#!/bin/bash
# The gateway alone in front of `sluice sim`, sequential requests on one
# connection from load.py. Ports PROF_PORT+1 to PROF_PORT+3 on 127.0.0.1
# (PROF_PORT 56170 unless set) must be free.
# Usage: [PROF_CONFIG=gw-on.toml] prof.sh BIN LABEL [stream|messages|messages+stream]
# PROF_CONFIG is the gateway's config (gw.toml unless set; gw-off.toml:
# keys, ledger and budgets off; gw-on.toml: all three on; gw-redis.toml:
# `[redis]` at $REDIS_URL, redis://127.0.0.1:6379 unless set). A config with
# admin_token gets a tenant with budgets and a key with a limit (key.py)
# after each start, and the load is sent as that key.
# Instructions per request (callgrind, gateway only) and CPU per request
# (the gateway's threads' run time from /proc, native run), for 1,000
# sequential chat completions after 200 to warm up; and the gateway's
# thread wake-ups per request (times a thread was put on a CPU, from
# schedstat: a cross-thread hand-over costs one).
set -u
BIN=$1; LABEL=$2; MODE=${3:-}
cd "$(dirname "$0")"
# Results go to results.txt; callgrind dumps to cg.*.out.*, which
# `callgrind_annotate --inclusive=yes cg.LABEL.out.1` reads.
P=${PROF_PORT:-56170}
SIM_PORT=$((P+1)); GW_PORT=$((P+2)); VG_PORT=$((P+3))
CONFIG=${PROF_CONFIG:-gw.toml}
REDIS_URL=${REDIS_URL:-redis://127.0.0.1:6379}
sed -e "s/127.0.0.1:56171/127.0.0.1:$SIM_PORT/" -e "s#redis://127.0.0.1:6379#$REDIS_URL#" $CONFIG >gw.run.toml
ADMIN=$(sed -n 's/^admin_token = "\(.*\)"/\1/p' $CONFIG)
# The key load.py sends as, made after each start (none without admin_token).
keyed() { [ -z "$ADMIN" ] && return; PROF_KEY=$(python3 key.py $1 $ADMIN) || { kill $SIM; exit 1; }; export PROF_KEY; }
# Run time (ns) and times put on a CPU, summed over the process's threads.
cpu() { local t=0 w=0; for f in /proc/$1/task/*/schedstat; do read a b c < $f; t=$((t+a)); w=$((w+c)); done; echo $t $w; }
. ./start.sh
start_sim sim.toml
# Native: CPU per request.
start_gateway gw.run.toml
keyed $GW_PORT
python3 load.py $GW_PORT 500 $MODE
read c0 w0 <<<"$(cpu $GW)"
python3 load.py $GW_PORT 2000 $MODE
read c1 w1 <<<"$(cpu $GW)"
kill $GW; wait $GW 2>/dev/null
echo "$LABEL $MODE cpu_us_per_request $(( (c1-c0)/2000/1000 )) wakeups_per_request $(awk "BEGIN { printf \"%.2f\", ($w1-$w0)/2000 }")" | tee -a results.txt
[ -n "${SKIP_VG:-}" ] && { kill $SIM; exit 0; }
# Callgrind: instructions per request.
rm -rf data
valgrind --tool=callgrind --callgrind-out-file=cg.$LABEL$MODE.out $BIN serve --config gw.run.toml --listen 127.0.0.1:$VG_PORT >vg.log 2>&1 &
VG=$!
wait_up $VG_PORT
keyed $VG_PORT
python3 load.py $VG_PORT 200 $MODE
callgrind_control -z $VG >/dev/null
python3 load.py $VG_PORT 1000 $MODE
callgrind_control -d $VG >/dev/null
sleep 1
kill $VG; wait $VG 2>/dev/null
kill $SIM
F=$(ls -t cg.$LABEL$MODE.out.* 2>/dev/null | head -1)
IR=$(grep -m1 "^summary:" $F | awk '{print $2}')
[ -z "$IR" ] && IR=$(grep -m1 "^totals:" $F | awk '{print $2}')
echo "$LABEL $MODE instructions_per_request $((IR/1000)) ($F)" | tee -a results.txt

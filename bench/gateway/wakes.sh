#!/bin/bash
# Wake-ups per request: the gateway alone (`sluice serve`, gw.toml) in
# front of `sluice sim`, sent N chat completions on one keep-alive
# connection at RATE requests a second (load.py, paced), after 200 to
# warm up. Ports PROF_PORT+4 to PROF_PORT+5 on 127.0.0.1 (PROF_PORT
# 56170 unless set) must be free.
# Usage: [WAKES_CONFIG=gw-redis.toml REDIS_URL=redis://…] [CONNS=C]
#        wakes.sh BIN LABEL RATE [UPSTREAM_MS] [N]
#   WAKES_CONFIG: the gateway's config (gw.toml unless set); with
#   gw-redis.toml, REDIS_URL (redis://127.0.0.1:6379 unless set) is the
#   Redis it decides in, and the script calls Redis ran (INFO
#   commandstats: EVALSHA and EVAL) are counted per request too.
#   CONNS: keep-alive connections the requests are spread over (1
#   unless set; load.py).
#   UPSTREAM_MS: the sim answers after this long (0 unless set; issue
#   12's low-rate case is RATE 20, UPSTREAM_MS 20).
#   N: requests measured (5 s worth at RATE, at least 100, unless set).
# Per request, over the gateway's threads only (counters that do not
# move with the machine's load, unlike latency):
#   - context switches (perf's software event; cross-checked against
#     /proc/PID/task/*/status voluntary+nonvoluntary, split by thread
#     name, which shows which threads a request wakes),
#   - system calls (raw_syscalls:sys_enter), of which futex (a thread
#     woken or parked by another) and epoll_wait (a worker parking on
#     the I/O driver),
#   - wake-ups the gateway's threads did (sched:sched_wakeup),
#   - CPU time (task-clock);
# and the same per second with no requests at all (timers, background
# tasks), over IDLE seconds (2 unless set).
set -u
BIN=$1; LABEL=$2; RATE=$3; UP_MS=${4:-0}
N=${5:-$(python3 -c "print(max(100, int($RATE*5)))")}
IDLE=${IDLE:-2}
cd "$(dirname "$0")"
P=${PROF_PORT:-56170}
SIM_PORT=$((P+4)); GW_PORT=$((P+5))
CONFIG=${WAKES_CONFIG:-gw.toml}
REDIS_URL=${REDIS_URL:-redis://127.0.0.1:6379}
sed -e "s/127.0.0.1:56171/127.0.0.1:$SIM_PORT/" -e "s#redis://127.0.0.1:6379#$REDIS_URL#" $CONFIG >gw.wakes.toml
# Script calls Redis has run (0 without [redis] in the config).
calls() {
  grep -q '^\[redis\]' $CONFIG || { echo 0; return; }
  redis-cli -u $REDIS_URL INFO commandstats | tr -d '\r' \
    | awk -F'[=,:]' '/^cmdstat_(evalsha|eval):/ {n+=$3} END {print n+0}'
}
{ cat sim.toml; printf '\n[defaults.latency]\nbase_ms = %d\n' "$UP_MS"; } >sim.wakes.toml
. ./start.sh
start_sim sim.wakes.toml
start_gateway gw.wakes.toml
# Per thread ("name/tid switches cpu_ns" lines): voluntary+nonvoluntary
# context switches, and run time from schedstat.
switches() { per_thread $GW; }
EVENTS=context-switches,cpu-migrations,raw_syscalls:sys_enter,syscalls:sys_enter_futex,syscalls:sys_enter_epoll_wait,sched:sched_wakeup,task-clock
# counted SECONDS_OR_CMD...: perf stat over the gateway while a command
# runs; prints "event value" lines.
counted() {
  perf stat -x, -e $EVENTS -p $GW -o wakes.perf -- "$@" >/dev/null 2>wakes.load
  awk -F, '/^[0-9.]+,/ {print $3, $1}' wakes.perf
}
python3 load.py $GW_PORT 200 $RATE 2>/dev/null
# Idle: what the gateway does with nothing to do.
counted sleep $IDLE >wakes.idle
s0=$(switches); r0=$(calls)
counted python3 load.py $GW_PORT $N $RATE >wakes.busy
s1=$(switches); r1=$(calls)
reached=$(sed -n 's/.* \([0-9]*\) req\/s/\1/p' wakes.load)
kill $GW; wait $GW 2>/dev/null
kill $SIM; wait $SIM 2>/dev/null
{
  echo "$LABEL rate $RATE (reached $reached) upstream ${UP_MS} ms, $N requests, ${CONNS:-1} connections, $CONFIG"
  awk -v n=$N -v c=$((r1-r0)) 'BEGIN {if (c > 0) printf "  %-28s %10.2f per request (%.1f requests a call)\n", "redis script calls", c/n, n/c}'
  awk -v n=$N '{printf "  %-28s %10.2f per request\n", $1, $2/n}' wakes.busy
  awk -v s=$IDLE '{printf "  idle %-23s %10.1f per second\n", $1, $2/s}' wakes.idle
  echo "  per request, by thread (name/tid): /proc switches, CPU µs (schedstat)"
  join -a2 -e0 -o 0,1.2,1.3,2.2,2.3 <(echo "$s0") <(echo "$s1") \
    | awk -v n=$N '{d=$4-$2; c=($5-$3)/1000/n; if (d/n>=0.01 || c>=0.5) printf "    %-26s %8.2f %8.1f\n", $1, d/n, c}'
} | tee -a results.txt

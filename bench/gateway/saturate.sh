#!/bin/bash
# System calls, context switches and CPU per request at saturation: the
# gateway (`sluice serve`, gw.toml) and the bare hop of `sluice bench
# gateway` (`sluice bench hop`), each in front of the same `sluice sim`,
# sent N chat completions over CONNS keep-alive connections in a closed
# loop (`sluice bench load`) after WARM to warm up. Counted with `perf
# stat -p` over the whole process (all its threads) while the load runs:
# counts, unlike times, do not move with the machine's load.
# Ports PROF_PORT+6 to PROF_PORT+7 (PROF_PORT 56170 unless set) must be
# free; the hop takes a free port.
# Usage: [N=30000] [CONNS=64] [WARM=3000] [SAT_CONFIG=gw-off.toml]
#        saturate.sh BIN LABEL [TOOLS]
#   SAT_CONFIG: the gateway's config (gw.toml unless set; gw-off.toml has
#   the usage ledger off, whose spill file at saturation is counted here
#   too: openat, mkdir, statx, write and close per record spilled).
#   BIN runs the sim and the gateway; TOOLS (BIN unless set) the hop and
#   the load (`bench hop` and `bench load` are hidden commands).
# Prints, per request, for the gateway and the hop:
#   - system calls in all (raw_syscalls:sys_enter) and by kind (those a
#     request's path makes; "other" is the rest), of which reads that
#     found nothing (recvfrom/read returning EAGAIN);
#   - context switches, wake-ups done (sched:sched_wakeup), CPU
#     (task-clock);
#   - per thread name: context switches (/proc status voluntary +
#     nonvoluntary) and CPU µs (schedstat).
set -u
BIN=$1; LABEL=$2; TOOLS=${3:-$1}
N=${N:-30000}; CONNS=${CONNS:-64}; WARM=${WARM:-3000}
cd "$(dirname "$0")"
P=${PROF_PORT:-56170}
SIM_PORT=$((P+6)); GW_PORT=$((P+7))
CONFIG=${SAT_CONFIG:-gw.toml}
sed "s/127.0.0.1:56171/127.0.0.1:$SIM_PORT/" $CONFIG >gw.sat.toml
. ./start.sh
start_sim sim.toml
start_gateway gw.sat.toml
$TOOLS bench hop --upstream http://127.0.0.1:$SIM_PORT >hop.url 2>hop.log &
HOP=$!
for i in $(seq 1 600); do [ -s hop.url ] && break; sleep 0.1; done
HOP_URL=$(cat hop.url)
KINDS="recvfrom sendto read write readv writev epoll_wait epoll_pwait epoll_ctl futex accept4 openat mkdir statx close socket connect setsockopt getsockopt clock_gettime sched_yield mmap munmap madvise brk"
EVENTS="raw_syscalls:sys_enter,context-switches,sched:sched_wakeup,task-clock"
for k in $KINDS; do EVENTS="$EVENTS,syscalls:sys_enter_$k"; done
# Per thread name: switches and run time (ns), summed.
threads() {
  per_thread $1 | awk '{sub(/\/[0-9]+$/, "", $1); s[$1]+=$2; c[$1]+=$3} END {for (n in s) print n, s[n], c[n]}' | sort
}
# measure NAME PID URL [--direct]
measure() {
  local name=$1 pid=$2 url=$3; shift 3
  $TOOLS bench load --target $url --connections $CONNS --requests $WARM "$@" >/dev/null
  local t0; t0=$(threads $pid)
  perf stat -x, -e $EVENTS \
    -e syscalls:sys_exit_recvfrom --filter 'ret == -11' \
    -e syscalls:sys_exit_read --filter 'ret == -11' \
    -p $pid -o sat.perf -- $TOOLS bench load --target $url --connections $CONNS --requests $N "$@" >sat.load
  local t1; t1=$(threads $pid)
  echo "$LABEL $name: $(cat sat.load), $CONNS connections, $CONFIG"
  awk -F, -v n=$N '/^[0-9.]+,/ {
      e=$3; sub(/^syscalls:sys_enter_/, "", e); v=$1/n
      if ($3 ~ /^syscalls:sys_exit_/) { sub(/^syscalls:sys_exit_/, "", e); e=e " EAGAIN"; x[e]=v; next }
      if ($3 ~ /^syscalls:sys_enter_/) { if (v > 0.005) k[e]=v; kinds+=v; next }
      top[$3]=v
    } END {
      printf "  %-24s %8.2f\n", "system calls", top["raw_syscalls:sys_enter"]
      for (e in k) printf "    %-22s %8.2f\n", e, k[e]
      printf "    %-22s %8.2f\n", "other", top["raw_syscalls:sys_enter"] - kinds
      for (e in x) printf "    %-22s %8.2f\n", e, x[e]
      printf "  %-24s %8.2f\n", "context switches", top["context-switches"]
      printf "  %-24s %8.2f\n", "wake-ups done", top["sched:sched_wakeup"]
      printf "  %-24s %8.1f us\n", "CPU (task-clock)", top["task-clock"] * 1000
    }' sat.perf
  echo "  by thread: switches, CPU us (schedstat) per request"
  join -a2 -e0 -o 0,1.2,1.3,2.2,2.3 <(echo "$t0") <(echo "$t1") \
    | awk -v n=$N '{d=($4-$2)/n; c=($5-$3)/1000/n; if (d >= 0.01 || c >= 0.5) printf "    %-22s %8.2f %8.1f\n", $1, d, c}'
}
{
  measure gateway $GW http://127.0.0.1:$GW_PORT
  measure hop $HOP $HOP_URL --direct
} | tee -a results.txt
kill $HOP $GW $SIM; wait 2>/dev/null

#!/bin/bash
# Where a request's time goes on the gateway's serving thread at a low
# rate: `perf record` of the gateway's system calls and scheduler events
# over N chat completions paced at RATE on one keep-alive connection
# (load.py), in front of `sluice sim` answering after UPSTREAM_MS. Each
# request has two halves on the serving thread, each begun by a wake-up:
#   in:  woken for the request, read it, ... write it upstream;
#   out: woken for the answer, read it, ... write it to the client.
# halves.py prints, per half, the wake-up latency (woken -> on a CPU), the
# compute (the read's return -> the write's start) and the system calls,
# p25/p50/p75 in µs. With PROBES set (names of functions, as `nm -C`
# prints them, separated by `;`), each gets a uprobe, and halves.py also
# prints when each is first entered in each half, after the read: a
# timeline of the half, each hit costing a trap of a few µs.
# Times move with the machine's load; take them at rest. Needs perf and
# the kernel's raw_syscalls, sched and uprobe tracing (root).
# Ports PROF_PORT+1 and +2 (PROF_PORT 56170 unless set) must be free.
# Usage: [PROBES='sluice_usage::read_body;...'] halves.sh BIN RATE N [UPSTREAM_MS]
set -u
BIN=$(realpath "$1"); RATE=$2; N=$3; UP_MS=${4:-0}
cd "$(dirname "$0")"
P=${PROF_PORT:-56170}
SIM_PORT=$((P+1)); GW_PORT=$((P+2))
sed "s/127.0.0.1:56171/127.0.0.1:$SIM_PORT/" gw.toml >gw.run.toml
{ cat sim.toml; printf '\n[defaults.latency]\nbase_ms = %d\n' "$UP_MS"; } >sim.halves.toml
EVENTS=raw_syscalls:sys_enter,raw_syscalls:sys_exit,sched:sched_switch,sched:sched_wakeup
UPROBES=/sys/kernel/tracing/uprobe_events
if [ -n "${PROBES:-}" ]; then
  # A uprobe takes a file offset: the symbol's address less its
  # segment's address plus the segment's offset.
  SEGS=$(readelf -lW "$BIN" | awk '$1 == "LOAD" && / R E / { print $2, $3 }')
  i=0
  IFS=';' read -ra NAMES <<<"$PROBES"
  for name in "${NAMES[@]}"; do
    addr=$(nm -C --defined-only "$BIN" | grep -F " $name" | grep -E '^[0-9a-f]+ [tT] ' | head -1 | cut -d' ' -f1)
    [ -z "$addr" ] && { echo "no symbol: $name" >&2; continue; }
    read -r off vaddr <<<"$SEGS"
    echo "p:halves/p$i $BIN:$(printf '0x%x' $((0x$addr - vaddr + off)))" >>$UPROBES
    echo "p$i $name" >>probes.names
    i=$((i+1))
  done
  EVENTS="$EVENTS,halves:*"
fi
. ./start.sh
start_sim sim.halves.toml
start_gateway gw.run.toml
python3 load.py $GW_PORT 40 $RATE
SERVING=$(for t in /proc/$GW/task/*; do [ "$(cat $t/comm)" = sluice-gateway ] && echo ${t##*/}; done | paste -sd,)
perf record -q -o halves.data -e "$EVENTS" -a -- python3 load.py $GW_PORT $N $RATE
kill $GW $SIM; wait 2>/dev/null
perf script -i halves.data 2>/dev/null | python3 halves.py "$SERVING" probes.names
if [ -n "${PROBES:-}" ]; then
  for j in $(seq 0 $((i - 1))); do echo "-:halves/p$j" >>$UPROBES; done
  rm -f probes.names
fi

#!/bin/bash
# The gateway's system calls per request, counted by `strace -c` over all
# its threads, in front of `sluice sim` (gw.toml), sequential requests on
# one keep-alive connection from load.py. Counts, unlike times, do not
# move with the machine's load. Ports PROF_PORT+1 and +2 (PROF_PORT 56170
# unless set) must be free.
# Usage: syscalls.sh BIN N [stream]
set -u
BIN=$1; N=$2; MODE=${3:-}
cd "$(dirname "$0")"
P=${PROF_PORT:-56170}
SIM_PORT=$((P+1)); GW_PORT=$((P+2))
sed "s/127.0.0.1:56171/127.0.0.1:$SIM_PORT/" gw.toml >gw.run.toml
. ./start.sh
start_sim sim.toml
start_gateway gw.run.toml
python3 load.py $GW_PORT 100 $MODE
strace -f -c -o strace.out $(for t in /proc/$GW/task/*; do echo -p ${t##*/}; done) &
ST=$!
sleep 1
python3 load.py $GW_PORT $N $MODE
kill -INT $ST; wait $ST
kill $GW $SIM; wait 2>/dev/null
awk -v n=$N 'NR > 2 && $NF != "total" && $4 ~ /^[0-9]+$/ { printf "%-14s %8.2f per request\n", $NF, $4 / n }
  $NF == "total" { printf "%-14s %8.2f per request\n", "all", $4 / n }' strace.out

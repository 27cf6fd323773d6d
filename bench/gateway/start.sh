# Sourced by the scripts here (after BIN, SIM_PORT and GW_PORT are set):
# starts `sluice sim` and `sluice serve` on 127.0.0.1 and waits for each.

# Waits up to two minutes for PORT's /healthz.
wait_up() { for i in $(seq 1 600); do curl -s -o /dev/null http://127.0.0.1:$1/healthz && return 0; sleep 0.2; done; return 1; }

# start_sim CONFIG: a fresh data dir, the sim on SIM_PORT (pid in SIM).
start_sim() {
  rm -rf data
  $BIN sim --listen 127.0.0.1:$SIM_PORT --config "$1" >sim.log 2>&1 &
  SIM=$!
  wait_up $SIM_PORT || { echo sim down; kill $SIM; exit 1; }
}

# start_gateway CONFIG: the gateway on GW_PORT (pid in GW).
start_gateway() {
  $BIN serve --config "$1" --listen 127.0.0.1:$GW_PORT >gw.log 2>&1 &
  GW=$!
  wait_up $GW_PORT || { echo gateway down; kill $GW $SIM; exit 1; }
}

# per_thread PID: a line per thread of PID, "name/tid switches run_ns":
# its context switches (voluntary + nonvoluntary, /proc status) and its
# run time (schedstat).
per_thread() {
  for d in /proc/$1/task/*; do
    n=$(tr ' ' _ <$d/comm 2>/dev/null) || continue
    read ns _ <$d/schedstat 2>/dev/null || continue
    awk -v n="$n/${d##*/}" -v ns=$ns '/^(non)?voluntary_ctxt_switches/ {s+=$2} END {print n, s, ns}' $d/status 2>/dev/null
  done | sort
}

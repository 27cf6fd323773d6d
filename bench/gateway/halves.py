"""Reads `perf script` (raw_syscalls, sched and `halves:` uprobe events)
on stdin and prints the two halves of each request on the serving
threads: see halves.sh. argv[1]: the serving threads' ids, comma-
separated; argv[2]: a file naming the probes (`p0 name` lines), if any."""
import collections
import os
import re
import sys

SERVING = {int(t) for t in sys.argv[1].split(",") if t}
NAMES = {}
if len(sys.argv) > 2 and os.path.exists(sys.argv[2]):
    NAMES = dict(line.rstrip("\n").split(" ", 1) for line in open(sys.argv[2]))
READS = {0, 45}  # read, recvfrom
WRITES = {20, 44}  # writev, sendto (a `write` is an eventfd's wake-up)
LINE = re.compile(r"^\s*.+?\s+(\d+)\s+\[\d+\]\s+([\d.]+):\s+(\S+):\s*(.*)$")

woken, running, halves = {}, {}, []
for line in sys.stdin:
    m = LINE.match(line)
    if not m:
        continue
    tid, t, event, rest = int(m[1]), float(m[2]) * 1e6, m[3], m[4]
    if event == "sched:sched_wakeup":
        pid = int(re.search(r"pid=(\d+)", rest)[1])
        if pid in SERVING:
            woken[pid] = t
    elif event == "sched:sched_switch":
        nxt = int(re.search(r"next_pid=(\d+)", rest)[1])
        # A thread preempted mid-half goes on with the same half.
        if nxt in SERVING and nxt not in running:
            running[nxt] = {"woken": woken.pop(nxt, None), "on": t, "events": []}
        prev = int(re.search(r"prev_pid=(\d+)", rest)[1])
        if prev in running and "prev_state=S" in rest:
            halves.append(running.pop(prev))
    elif tid in running:
        if event.startswith("raw_syscalls:sys_e"):
            nr = int(re.search(r"NR (\d+)", rest)[1])
            enter = event.endswith("enter")
            fd = rest.split("(")[1].split(",")[0] if enter else None
            running[tid]["events"].append(("enter" if enter else "exit", nr, fd, t))
        elif event.startswith("halves:"):
            probe = event.split(":")[1]
            running[tid]["events"].append(("probe", NAMES.get(probe, probe), None, t))

stats = collections.defaultdict(list)
client_fd = None
for h in halves:
    events = h["events"]
    read = next((t for k, nr, _, t in events if k == "exit" and nr in READS), None)
    reads = [fd for k, nr, fd, _ in events if k == "enter" and nr in READS]
    write = next((t for k, nr, _, t in events if k == "enter" and nr in WRITES), None)
    if read is None or write is None:
        continue
    # The first half recorded reads the client's connection.
    if client_fd is None:
        client_fd = reads[0]
    half = "in" if reads[0] == client_fd else "out"
    stats[(half, "compute: read -> write")].append(write - read)
    if h["woken"] is not None:
        stats[(half, "wake-up")].append(h["on"] - h["woken"])
    stats[(half, "system calls")].append(sum(1 for e in events if e[0] == "enter"))
    seen = set()
    for k, name, _, t in events:
        if k == "probe" and name not in seen and read <= t <= write:
            seen.add(name)
            stats[(half, "  entered " + name)].append(t - read)


def q(v, p):
    return v[min(len(v) - 1, int(len(v) * p))]


order = {"wake-up": 0, "system calls": 1}
for key in sorted(stats, key=lambda k: (k[0], order.get(k[1], 2), q(sorted(stats[k]), 0.5))):
    v = sorted(stats[key])
    print(f"{key[0]:3} {key[1][:60]:60} n={len(v):4}  p25 {q(v, .25):7.1f}  p50 {q(v, .5):7.1f}  p75 {q(v, .75):7.1f}")

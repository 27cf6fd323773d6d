"""Memory of a `sluice serve` before and after a flood of long, random
model names (issue 33): the issue's two 8 MB names, then a hundred random
1 MiB ones over the chat, embeddings and acquire routes. Every one should
be refused (400 naming `model`) and leave nothing behind.

    python3 bench/flood-names.py target/debug/sluice
"""
import json, random, re, shutil, string, subprocess, sys, tempfile, threading, urllib.error, urllib.request

BIN = sys.argv[1]
WORK = tempfile.mkdtemp(prefix="sluice-flood-")
def start(args):
    p = subprocess.Popen([BIN] + args, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    for line in p.stderr:
        m = re.search(r"listening on (\S+)", line)
        if m:
            # Keep reading, so that the server never blocks on a full pipe.
            threading.Thread(target=lambda: [None for _ in p.stderr], daemon=True).start()
            return p, m.group(1)
sim, sim_addr = start(["sim", "--listen", "127.0.0.1:0"])
data = WORK + "/data"
cfg = f'''data_dir = "{data}"
[trace]
enabled = false
[[providers]]
name = "openai"
base_url = "{sim_addr}/openai/v1"
[[tenants]]
name = "acme"
api_key = "key-acme"
'''
open(WORK + "/sluice.toml", "w").write(cfg)
gw, addr = start(["serve", "--config", WORK + "/sluice.toml", "--listen", "127.0.0.1:0"])
def rss():
    for l in open(f"/proc/{gw.pid}/status"):
        if l.startswith("VmRSS:"):
            return int(l.split()[1]) / 1024
def post(path, body):
    req = urllib.request.Request(f"{addr}{path}", data=json.dumps(body).encode(),
        headers={"authorization": "Bearer key-acme", "content-type": "application/json"})
    try:
        return urllib.request.urlopen(req).status
    except urllib.error.HTTPError as e:
        return e.code
for _ in range(5):
    post("/v1/chat/completions", {"model": "openai/gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]})
before = rss()
statuses = {}
# The two 8 MB names, then 100 random 1 MiB names over three routes.
names = ["openai/" + "a" * (8_000_000 - 200)] * 2 + [
    "openai/" + "".join(random.choices(string.ascii_letters, k=1 << 20)) for _ in range(100)]
for i, n in enumerate(names):
    path, body = [("/v1/chat/completions", {"model": n, "messages": [{"role": "user", "content": "hi"}]}),
                  ("/v1/embeddings", {"model": n, "input": "x"}),
                  ("/v1/limits/acquire", {"model": n})][i % 3]
    s = post(path, body)
    statuses[s] = statuses.get(s, 0) + 1
after = rss()
print(f"RSS before {before:.1f} MB, after {len(names)} requests ({sum(map(len, names)) / 2**20:.0f} MiB of names): {after:.1f} MB; statuses {statuses}")
gw.kill(); sim.kill()
shutil.rmtree(WORK, ignore_errors=True)

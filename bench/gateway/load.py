"""Sends N chat completions one after another on one keep-alive connection
(as the key in $PROF_KEY when it is set).

Usage: load.py PORT N [stream] [messages] [RATE]. With `messages` the
same question goes to /v1/messages as an Anthropic Messages client asks
it (translated both ways, as `sluice bench gateway` (b) sends it). With
RATE (requests a second) the requests start on a schedule, one every 1/RATE s, so that the gateway
idles between them as it does under an open loop at that rate; without,
each starts when the last answer is read. Prints the rate reached.
With CONNS=C in the environment the N requests are spread over C
keep-alive connections, one thread each (request i on connection i mod
C, at the same schedule), so that up to C are in the gateway at once.
"""
import http.client, json, os, sys, threading, time
port, n = int(sys.argv[1]), int(sys.argv[2])
# Words may be joined by `+` (`messages+stream`: one word for prof.sh).
rest = [w for a in sys.argv[3:] for w in a.split("+")]
stream = "stream" in rest
messages = "messages" in rest
rates = [float(a) for a in rest if a not in ("stream", "messages")]
rate = rates[0] if rates else None
body = {"model": "openai/gpt-4o-mini", "max_tokens": 16, "messages": [{"role": "user", "content": "ping"}]}
path = "/v1/chat/completions"
if messages:
    path = "/v1/messages"
    body["stream"] = stream
elif stream:
    body["stream"] = True
    body["stream_options"] = {"include_usage": True}
data = json.dumps(body).encode()
headers = {"content-type": "application/json"}
if os.environ.get("PROF_KEY"):
    headers["authorization"] = "Bearer " + os.environ["PROF_KEY"]
conns = max(1, int(os.environ.get("CONNS", "1")))
bad = [0] * conns
start = time.monotonic()


def send(k):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    for i in range(k, n, conns):
        if rate:
            wait = start + i / rate - time.monotonic()
            if wait > 0:
                time.sleep(wait)
        c.request("POST", path, body=data, headers=headers)
        r = c.getresponse()
        r.read()
        if r.status != 200:
            bad[k] += 1


threads = [threading.Thread(target=send, args=(k,)) for k in range(conns)]
for t in threads:
    t.start()
for t in threads:
    t.join()
bad = sum(bad)
took = time.monotonic() - start
print(f"{n} sent, {bad} not 200, {n / took:.0f} req/s", file=sys.stderr)

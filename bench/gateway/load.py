"""Sends N chat completions one after another on one keep-alive connection
(as the key in $PROF_KEY when it is set)."""
import http.client, json, os, sys
port, n, stream = int(sys.argv[1]), int(sys.argv[2]), len(sys.argv) > 3 and sys.argv[3] == "stream"
body = {"model": "openai/gpt-4o-mini", "max_tokens": 16, "messages": [{"role": "user", "content": "ping"}]}
if stream:
    body["stream"] = True
    body["stream_options"] = {"include_usage": True}
data = json.dumps(body).encode()
headers = {"content-type": "application/json"}
if os.environ.get("PROF_KEY"):
    headers["authorization"] = "Bearer " + os.environ["PROF_KEY"]
c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
bad = 0
for i in range(n):
    c.request("POST", "/v1/chat/completions", body=data, headers=headers)
    r = c.getresponse()
    r.read()
    if r.status != 200:
        bad += 1
print(f"{n} sent, {bad} not 200", file=sys.stderr)

"""Creates the tenant of gw-on.toml's profile (budgets far above the
load: a month's money in Europe/Paris, a rolling day's tokens and
requests) and a key of it with a request limit, through the admin API;
prints the key. The same tenant and key as `sluice bench gateway` (d)."""
import http.client, json, sys
port, admin = int(sys.argv[1]), sys.argv[2]
c = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
def post(path, body):
    c.request("POST", path, body=json.dumps(body).encode(),
              headers={"content-type": "application/json", "authorization": f"Bearer {admin}"})
    r = c.getresponse()
    data = r.read()
    if r.status // 100 != 2:
        sys.exit(f"{path}: {r.status} {data.decode()}")
    return json.loads(data)
post("/v1/tenants", {"name": "bench", "budgets": [
    {"name": "monthly", "money": "1000000", "period": "month", "time_zone": "Europe/Paris"},
    {"name": "daily", "tokens": 1_000_000_000_000, "requests": 1_000_000_000, "window_seconds": 86_400}]})
print(post("/v1/keys", {"tenant": "bench", "limits": {"requests_per_minute": 100_000_000}})["key"])

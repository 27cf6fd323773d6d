"""A key issued through the admin API, used by the official OpenAI SDK:
it works, streams, is refused on a model outside its allow-list and on its
own rate limit (a 429 the SDK raises as RateLimitError), and once revoked."""

import json
import os
import subprocess
import tempfile
import urllib.request

import openai
import pytest

from conftest import BIN, PROVIDER_KEYS, free_port, wait_http

ADMIN = "py-admin-token"


@pytest.fixture(scope="module")
def keyed_gateway():
    sim_port, gw_port = free_port(), free_port()
    tmp = tempfile.mkdtemp(prefix="sluice-py-keys-")
    config = os.path.join(tmp, "sluice.toml")
    with open(config, "w") as f:
        f.write(
            f"""
data_dir = "{tmp}/data"
admin_token = "{ADMIN}"

[retry]
max_retry_after_ms = 50

[[providers]]
name = "openai"
base_url = "http://127.0.0.1:{sim_port}/openai/v1"
"""
        )
    procs = [
        subprocess.Popen([BIN, "sim", "--listen", f"127.0.0.1:{sim_port}"]),
        subprocess.Popen(
            [BIN, "serve", "--config", config, "--listen", f"127.0.0.1:{gw_port}"],
            env={**os.environ, **PROVIDER_KEYS},
        ),
    ]
    try:
        wait_http(f"http://127.0.0.1:{sim_port}/_sim/stats")
        wait_http(f"http://127.0.0.1:{gw_port}/healthz")
        yield f"http://127.0.0.1:{gw_port}"
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()


def admin(url, path, body):
    req = urllib.request.Request(
        url + path,
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {ADMIN}", "Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())


def client(url, key):
    return openai.OpenAI(base_url=url + "/v1", api_key=key, max_retries=0)


def ask(c, model="openai/gpt-4o-mini", **kw):
    return c.chat.completions.create(
        model=model, messages=[{"role": "user", "content": "Say hello"}], max_tokens=8, **kw
    )


def test_an_issued_key_works_until_revoked(keyed_gateway):
    admin(keyed_gateway, "/v1/tenants", {"name": "py"})
    issued = admin(
        keyed_gateway,
        "/v1/keys",
        {"tenant": "py", "limits": {"requests_per_minute": 3, "models": ["openai/gpt-4o-mini"]}},
    )
    key = issued["key"]
    assert key.startswith("sk-sluice-" + issued["id"] + "_")
    c = client(keyed_gateway, key)

    assert ask(c).choices[0].message.content
    chunks = list(ask(c, stream=True))
    assert any(ch.choices and ch.choices[0].delta.content for ch in chunks)

    with pytest.raises(openai.PermissionDeniedError):
        ask(c, model="openai/gpt-4o")
    with pytest.raises(openai.AuthenticationError):
        ask(client(keyed_gateway, "sk-not-a-key"))

    # The third call of the minute passed above; the fourth is over the key's limit.
    ask(c)
    with pytest.raises(openai.RateLimitError) as e:
        ask(c)
    assert "caller:key:" + issued["id"] + ":rpm" in str(e.value)
    assert int(e.value.response.headers["retry-after"]) >= 1

    admin(keyed_gateway, "/v1/keys/" + issued["id"] + "/revoke", {})
    with pytest.raises(openai.AuthenticationError):
        ask(c)

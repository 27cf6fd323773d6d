"""Starts `sluice sim` and `sluice serve` (real processes, loopback only) for
the tests that use the official OpenAI Python SDK against the gateway."""

import os
import socket
import subprocess
import tempfile
import time
import urllib.request

import pytest

BIN = os.environ.get("SLUICE_BIN", "target/debug/sluice")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


PROVIDER_KEYS = {
    "OPENAI_API_KEY": "sk-test-openai",
    "ANTHROPIC_API_KEY": "sk-ant-test",
    "GEMINI_API_KEY": "test-gemini-key",
}


def wait_http(url: str, timeout: float = 30.0) -> None:
    end = time.time() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=1) as r:
                if r.status < 500:
                    return
        except Exception:
            if time.time() > end:
                raise
            time.sleep(0.1)


@pytest.fixture(scope="session")
def gateway():
    sim_port, gw_port = free_port(), free_port()
    tmp = tempfile.mkdtemp(prefix="sluice-py-")
    config = os.path.join(tmp, "sluice.toml")
    with open(config, "w") as f:
        f.write(
            f"""
data_dir = "{tmp}/data"

[[providers]]
name = "openai"
base_url = "http://127.0.0.1:{sim_port}/openai/v1"

[[providers]]
name = "anthropic"
base_url = "http://127.0.0.1:{sim_port}/anthropic/v1"
format = "anthropic"

[[providers]]
name = "google"
base_url = "http://127.0.0.1:{sim_port}/google/v1beta"
format = "gemini"
"""
        )
    procs = [
        subprocess.Popen([BIN, "sim", "--listen", f"127.0.0.1:{sim_port}"]),
        subprocess.Popen(
            [BIN, "serve", "--config", config, "--listen", f"127.0.0.1:{gw_port}"],
            # The sim wants a key, each provider's way, as they do.
            env={**os.environ, **PROVIDER_KEYS},
        ),
    ]
    try:
        wait_http(f"http://127.0.0.1:{sim_port}/_sim/stats")
        wait_http(f"http://127.0.0.1:{gw_port}/healthz")
        yield {"url": f"http://127.0.0.1:{gw_port}", "sim": f"http://127.0.0.1:{sim_port}"}
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()

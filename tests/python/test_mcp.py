"""`/mcp` with the official MCP Python SDK as the client (Streamable HTTP):
`sluice serve` in front of `sluice sim`'s MCP server and a stdio server it
spawns (mcp_stdio_server.py). Tools of both are listed (a shared name as
`{server}.{tool}`), a Gmail tool's calls are counted by the sim under
gmail, progress comes back through the gateway, a call the client gives
up on is cancelled upstream, resources and prompts of both servers pass
through, and a tenant's allow-list hides tools, resources and prompts and
refuses them by name. A server's tools/list_changed reaches the open
sessions, and a resource's update the session that subscribed to it."""

import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request

import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from conftest import BIN, free_port, wait_http

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(scope="module")
def mcp_gateway():
    sim_port, gw_port = free_port(), free_port()
    tmp = tempfile.mkdtemp(prefix="sluice-py-mcp-")
    config = os.path.join(tmp, "sluice.toml")
    with open(config, "w") as f:
        f.write(
            f"""
data_dir = "{tmp}/data"

[[tenants]]
name = "acme"
api_key = "py-key-acme"

[[tenants]]
name = "globex"
api_key = "py-key-globex"
mcp = ["sim.SLACK_*"]

[[mcp_servers]]
name = "sim"
url = "http://127.0.0.1:{sim_port}/mcp"
headers = {{ Authorization = "Bearer ${{PY_SIM_TOKEN}}" }}

[[mcp_servers]]
name = "local"
command = [{json.dumps(sys.executable)}, {json.dumps(os.path.join(HERE, "mcp_stdio_server.py"))}]
"""
        )
    env = dict(os.environ, PY_SIM_TOKEN="sim-secret")
    procs = [
        subprocess.Popen([BIN, "sim", "--listen", f"127.0.0.1:{sim_port}"]),
        subprocess.Popen(
            [BIN, "serve", "--config", config, "--listen", f"127.0.0.1:{gw_port}"],
            env=env,
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


async def session_run(url, key, body, message_handler=None):
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {key}"})
    async with http:
        async with streamable_http_client(f"{url}/mcp", http_client=http) as streams:
            read, write = streams[0], streams[1]
            async with ClientSession(read, write, message_handler=message_handler) as session:
                await session.initialize()
                return await body(session)


def run(url, key, body, message_handler=None):
    return asyncio.run(session_run(url, key, body, message_handler))


def sim_stats(sim):
    with urllib.request.urlopen(f"{sim}/_sim/stats") as r:
        return json.load(r)


def test_tools_of_both_servers_are_listed_and_called(mcp_gateway):
    email = {"recipient_email": "a@example.com", "subject": "hi", "body": "hello"}

    async def body(s):
        names = [t.name for t in (await s.list_tools()).tools]
        sent = await s.call_tool("GMAIL_SEND_EMAIL", email)
        local = await s.call_tool(
            "local.GITHUB_CREATE_ISSUE", {"owner": "o", "repo": "r", "title": "t"}
        )
        echoed = await s.call_tool("echo", {"text": "through sluice"})
        return names, sent, local, echoed

    names, sent, local, echoed = run(mcp_gateway["url"], "py-key-acme", body)
    assert "GMAIL_SEND_EMAIL" in names and "count_to" in names, names
    # Both servers have GITHUB_CREATE_ISSUE: each is named for its server.
    assert "sim.GITHUB_CREATE_ISSUE" in names and "local.GITHUB_CREATE_ISSUE" in names
    assert "GITHUB_CREATE_ISSUE" not in names
    assert not sent.is_error
    assert sent.structured_content["api"] == "gmail"
    # The header's ${PY_SIM_TOKEN} reached the sim's server.
    assert sent.structured_content["authorization"] == "Bearer sim-secret"
    assert "local issue o/r: t" in local.content[0].text
    assert echoed.content[0].text == "through sluice"
    assert sim_stats(mcp_gateway["sim"])["apis"]["gmail"]["ok"] >= 1


def test_progress_comes_back_through_the_gateway(mcp_gateway):
    seen = []

    async def on_progress(progress, total, message):
        seen.append((progress, total, message))

    async def body(s):
        return await s.call_tool("count_to", {"n": 3}, progress_callback=on_progress)

    result = run(mcp_gateway["url"], "py-key-acme", body)
    assert result.content[0].text == "counted to 3"
    assert [p for p, _, _ in seen] == [1, 2, 3], seen
    assert seen[-1][2] == "step 3"


def test_an_allow_list_hides_tools_and_names_itself(mcp_gateway):
    async def body(s):
        names = [t.name for t in (await s.list_tools()).tools]
        try:
            await s.call_tool("GMAIL_SEND_EMAIL", {"recipient_email": "a", "subject": "b", "body": "c"})
        except Exception as e:  # the SDK raises the JSON-RPC error
            return names, str(e)
        return names, None

    names, error = run(mcp_gateway["url"], "py-key-globex", body)
    assert names and all(n.startswith("SLACK_") for n in names), names
    assert error is not None and "allow-list" in error and "globex" in error, error


def test_resources_and_prompts_of_both_servers_pass_through(mcp_gateway):
    async def body(s):
        resources = [str(r.uri) for r in (await s.list_resources()).resources]
        templates = [t.uri_template for t in (await s.list_resource_templates()).resource_templates]
        gmail = await s.read_resource("sim://apis/gmail")
        notes = await s.read_resource("local://notes")
        prompts = [p.name for p in (await s.list_prompts()).prompts]
        sim_prompt = await s.get_prompt(
            "sim.compose_email", {"recipient": "a@example.com", "topic": "lunch"}
        )
        local_prompt = await s.get_prompt("local.compose_email", {"recipient": "b@example.com"})
        try:
            await s.read_resource("sim://apis/nope")
        except Exception as e:  # the sim's own error, through the gateway
            missing = str(e)
        else:
            missing = None
        return resources, templates, gmail, notes, prompts, sim_prompt, local_prompt, missing

    before = sim_stats(mcp_gateway["sim"])["apis"].get("gmail", {}).get("requests", 0)
    resources, templates, gmail, notes, prompts, sim_prompt, local_prompt, missing = run(
        mcp_gateway["url"], "py-key-acme", body
    )
    assert "sim://apis/gmail" in resources and "local://notes" in resources, resources
    assert "sim://apis/{api}" in templates, templates
    assert json.loads(gmail.contents[0].text)["api"] == "gmail"
    assert notes.contents[0].text == "local notes"
    # Both servers have compose_email: each is named for its server.
    assert "sim.compose_email" in prompts and "local.compose_email" in prompts, prompts
    assert "a@example.com" in sim_prompt.messages[0].content.text
    assert "local: write to b@example.com" in local_prompt.messages[0].content.text
    assert missing is not None and "sim://apis/nope" in missing, missing
    # Reading a resource is not a call of the API: the sim counted none.
    after = sim_stats(mcp_gateway["sim"])["apis"].get("gmail", {}).get("requests", 0)
    assert after == before


def test_a_call_the_client_gives_up_on_is_cancelled_upstream(mcp_gateway):
    marker = os.path.join(tempfile.mkdtemp(prefix="sluice-py-cancel-"), "cancelled")

    async def body(s):
        try:
            await s.call_tool("wait_for_cancel", {"marker": marker}, read_timeout_seconds=1.0)
        except Exception as e:  # the SDK gives up and sends notifications/cancelled
            return str(e)
        return None

    error = run(mcp_gateway["url"], "py-key-acme", body)
    assert error is not None
    # The stdio server's handler was cancelled: the gateway passed the
    # cancellation on. Waited for, not timed.
    deadline = time.monotonic() + 30
    while not os.path.exists(marker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert os.path.exists(marker), "the upstream call was never cancelled"


def test_an_allow_list_hides_resources_and_prompts_of_other_servers(mcp_gateway):
    async def body(s):
        resources = [str(r.uri) for r in (await s.list_resources()).resources]
        prompts = [p.name for p in (await s.list_prompts()).prompts]
        try:
            await s.read_resource("local://notes")
        except Exception as e:
            return resources, prompts, str(e)
        return resources, prompts, None

    resources, prompts, error = run(mcp_gateway["url"], "py-key-globex", body)
    # globex may call sim.SLACK_*: it sees the sim's resources and
    # prompts, none of the local server's.
    assert "sim://apis/slack" in resources and "local://notes" not in resources, resources
    assert "sim.compose_email" in prompts and "local.compose_email" not in prompts, prompts
    assert error is not None and "allow-list" in error and "globex" in error, error


def test_a_wrong_key_is_refused_before_any_message(mcp_gateway):
    req = urllib.request.Request(
        f"{mcp_gateway['url']}/mcp",
        data=b"{}",
        headers={"Authorization": "Bearer nope", "Content-Type": "application/json"},
        method="POST",
    )
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req)
    assert e.value.code == 401


def test_a_changed_tool_list_and_an_updated_resource_reach_the_session(mcp_gateway):
    heard = []
    tools_changed, resource_updated = asyncio.Event(), asyncio.Event()

    async def on_message(message):
        name = type(getattr(message, "root", message)).__name__
        heard.append(name)
        if name == "ToolListChangedNotification":
            tools_changed.set()
        if name == "ResourceUpdatedNotification":
            resource_updated.set()

    async def body(s):
        before = [t.name for t in (await s.list_tools()).tools]
        grew = await s.call_tool("grow", {"name": "grown_tool"})
        # Waited for, not timed (the bound only ends a broken run).
        await asyncio.wait_for(tools_changed.wait(), 60)
        after = [t.name for t in (await s.list_tools()).tools]
        called = await s.call_tool("grown_tool", {})
        await s.subscribe_resource("local://counter")
        touched = await s.call_tool("touch", {"uri": "local://counter"})
        await asyncio.wait_for(resource_updated.wait(), 60)
        await s.unsubscribe_resource("local://counter")
        untouched = await s.call_tool("touch", {"uri": "local://counter"})
        return before, grew, after, called, touched, untouched

    before, grew, after, called, touched, untouched = run(
        mcp_gateway["url"], "py-key-acme", body, on_message
    )
    assert "grown_tool" not in before and "grown_tool" in after, after
    assert grew.content[0].text == "grew grown_tool"
    assert called.content[0].text == "grown_tool grown"
    assert "ToolListChangedNotification" in heard and "ResourceUpdatedNotification" in heard, heard
    assert touched.content[0].text == "touched local://counter"
    # The session's unsubscribe, the last, reached the server.
    assert untouched.content[0].text == "local://counter has no subscriber"

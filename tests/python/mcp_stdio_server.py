"""A small MCP server on stdio, spawned by `sluice serve` for
test_mcp.py: a tool that reports progress, one whose name the sim's
server also has (so the gateway lists both as `{server}.{tool}`), an
echo, a tool that waits until it is cancelled (and leaves a file saying
so), a resource and a prompt whose name the sim's server also has, a
tool that adds a tool and says the tool list changed, and a resource
clients may subscribe to with a tool that updates it."""

import anyio

from mcp import types
from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("sluice-test-stdio")
subscribed: set[str] = set()


@server.tool()
async def count_to(n: int, ctx: Context) -> str:
    """Counts to n, reporting progress at each step."""
    for i in range(1, n + 1):
        await ctx.report_progress(i, n, f"step {i}")
    return f"counted to {n}"


@server.tool(name="GITHUB_CREATE_ISSUE")
async def create_issue(owner: str, repo: str, title: str) -> str:
    """A GitHub tool of the same name as the sim's."""
    return f"local issue {owner}/{repo}: {title}"


@server.tool()
async def echo(text: str) -> str:
    """Answers with its argument."""
    return text


@server.tool()
async def wait_for_cancel(marker: str) -> str:
    """Waits until the call is cancelled, then writes `marker` (a path)."""
    try:
        await anyio.sleep_forever()
    finally:
        with open(marker, "w") as f:
            f.write("cancelled")
    return "never"


@server.resource("local://notes", mime_type="text/plain")
def notes() -> str:
    """Notes kept by the local server."""
    return "local notes"


@server.prompt(name="compose_email")
def compose_email(recipient: str) -> str:
    """A prompt of the same name as the sim's."""
    return f"local: write to {recipient}"


@server.tool()
async def grow(name: str, ctx: Context) -> str:
    """Adds a tool called `name`, then says the tool list changed."""

    def grown() -> str:
        return f"{name} grown"

    server.add_tool(grown, name=name, description="A tool added at run time.")
    await ctx.session.send_tool_list_changed()
    return f"grew {name}"


@server.resource("local://counter", mime_type="text/plain")
def counter() -> str:
    """A resource that `touch` updates."""
    return "counter"


async def on_subscribe(ctx, params: types.SubscribeRequestParams) -> types.EmptyResult:
    subscribed.add(str(params.uri))
    return types.EmptyResult()


async def on_unsubscribe(ctx, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
    subscribed.discard(str(params.uri))
    return types.EmptyResult()


server._lowlevel_server.add_request_handler("resources/subscribe", types.SubscribeRequestParams, on_subscribe)
server._lowlevel_server.add_request_handler("resources/unsubscribe", types.UnsubscribeRequestParams, on_unsubscribe)


@server.tool()
async def touch(uri: str, ctx: Context) -> str:
    """Says `uri` was updated, when a client subscribed to it."""
    if uri not in subscribed:
        return f"{uri} has no subscriber"
    await ctx.session.send_resource_updated(uri)
    return f"touched {uri}"


if __name__ == "__main__":
    server.run("stdio")

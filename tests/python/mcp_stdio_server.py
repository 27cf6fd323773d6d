"""A small MCP server on stdio, spawned by `sluice serve` for
test_mcp.py: a tool that reports progress, one whose name the sim's
server also has (so the gateway lists both as `{server}.{tool}`), and an
echo."""

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("sluice-test-stdio")


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


if __name__ == "__main__":
    server.run("stdio")

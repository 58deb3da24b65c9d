"""A `tools/call` through a2a-gateway's `/mcp` (spec §21) against the same tool served directly by the official MCP
Python SDK (`MCPServer`, the SDK's FastMCP, over streamable HTTP), side by side in one run (docs/BENCHMARKS.md).

    python tests/benches/mcp_tools_call.py GATEWAY_MCP_URL [N] [PORT]

Starts the SDK's server with `add_numbers(a, b) -> {"sum": a + b}` (the demo agent's capability of the same name) on
127.0.0.1:PORT (default 18765), then, with one `ClientSession` per server (`mcp.client.streamable_http`, the current
revision), makes N sequential calls to each (default 300, after 20 warm-up calls), alternating blocks of 50 so that
both see the same machine, and prints each server's median, p90 and the ratio of the medians as one JSON line.
"""

import contextlib
import json
import statistics
import subprocess
import sys
import time

import anyio
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

SERVER = """
import sys
from mcp.server.mcpserver import MCPServer
app = MCPServer("python-sdk-add")
@app.tool()
def add_numbers(a: float, b: float) -> dict:
    \"\"\"Adds two numbers.\"\"\"
    return {"sum": a + b}
app.run("streamable-http", host="127.0.0.1", port=int(sys.argv[1]), stateless_http=True, json_response=False)
"""


def check(r) -> None:
    """The answer is 5, as structuredContent or as the text of the result."""
    sc = r.structured_content
    text = "".join(getattr(c, "text", "") for c in r.content)
    ok = not r.is_error and ((isinstance(sc, dict) and (sc.get("sum") == 5 or sc.get("result", {}).get("sum") == 5)) or "5" in text)
    assert ok, r


async def main(gateway: str, python_url: str, n: int, block: int = 50, warm: int = 20) -> dict:
    ours: list[float] = []
    theirs: list[float] = []
    async with contextlib.AsyncExitStack() as stack:
        sessions = []
        for url in (gateway, python_url):
            read, write = await stack.enter_async_context(streamable_http_client(url))
            s = await stack.enter_async_context(ClientSession(read, write))
            s.adopt(await s.discover())
            for _ in range(warm):
                check(await s.call_tool("add_numbers", {"a": 2, "b": 3}))
            sessions.append(s)
        # Alternate blocks: each server's calls are spread over the same minutes.
        while len(ours) < n:
            for s, times in zip(sessions, (ours, theirs)):
                for _ in range(min(block, n - len(times))):
                    t = time.perf_counter()
                    r = await s.call_tool("add_numbers", {"a": 2, "b": 3})
                    times.append((time.perf_counter() - t) * 1000)
                    check(r)

    def summary(v: list[float]) -> dict:
        v = sorted(v)
        return {"calls": len(v), "median_ms": round(statistics.median(v), 3), "p90_ms": round(v[int(len(v) * 0.9)], 3)}

    out = {"a2a_gateway": summary(ours), "python_sdk": summary(theirs)}
    out["ratio_gateway_over_python"] = round(out["a2a_gateway"]["median_ms"] / out["python_sdk"]["median_ms"], 3)
    return out


if __name__ == "__main__":
    gateway = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 300
    port = int(sys.argv[3]) if len(sys.argv) > 3 else 18765
    server = subprocess.Popen([sys.executable, "-c", SERVER, str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(2.0)
        print(json.dumps(anyio.run(main, gateway, f"http://127.0.0.1:{port}/mcp", n)))
    finally:
        server.terminate()
        server.wait()

"""Both MCP transports, driven by the official SDK's `ClientSession` from synchronous tests."""

import shutil
import sys
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import httpx2 as httpx
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

CONSOLE_SCRIPT = shutil.which("memory-platform-mcp", path=str(Path(sys.executable).parent))


def http_transport(url: str, headers: dict):
    @asynccontextmanager
    async def connect():
        async with httpx.AsyncClient(headers=headers, timeout=30) as http:
            async with streamable_http_client(url, http_client=http) as streams:
                yield streams

    return connect


def stdio_transport(base_url: str, api_key: str):
    """`memory-platform-mcp` as an MCP host starts it: a child process on stdio, configured by env."""
    assert CONSOLE_SCRIPT, "memory-platform-mcp is not installed beside this Python (make install installs it)"
    env = {"MEMORY_PLATFORM_URL": base_url, "MEMORY_PLATFORM_API_KEY": api_key}
    return lambda: stdio_client(StdioServerParameters(command=CONSOLE_SCRIPT, env=env))


def run(connect, scenario):
    """Opens a session, initializes it, and returns what `await scenario(session)` returns."""

    async def main():
        async with connect() as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            return await scenario(session)

    return anyio.run(main)


def call(connect, tool: str, arguments: dict | None = None):
    async def scenario(session):
        return await session.call_tool(tool, arguments or {})

    return run(connect, scenario)


def text(result) -> str:
    return "\n".join(block.text for block in result.content)

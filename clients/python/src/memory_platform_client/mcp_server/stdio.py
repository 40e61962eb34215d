"""`memory-platform-mcp`: the MCP tools over stdio, for hosts that start a local process. Each tool
makes one REST call to the platform at MEMORY_PLATFORM_URL with MEMORY_PLATFORM_API_KEY."""

from __future__ import annotations

import argparse
import os
import sys

from memory_platform_client import __version__
from memory_platform_client.client import AsyncMemoryClient
from memory_platform_client.contract import Tool, sdk_method
from memory_platform_client.mcp_server.tools import build_server


class HTTPBackend:
    """The tools' backend over the REST API: each tool calls the SDK method its row names."""

    def __init__(self, client: AsyncMemoryClient):
        self.client = client

    async def call(self, tool: Tool, arguments: dict):
        return await sdk_method(self.client, tool)(**arguments)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="memory-platform-mcp",
        description="Serve the Memory Platform's MCP tools over stdio, talking to the platform over HTTP.",
    )
    parser.add_argument(
        "--url",
        default=os.environ.get("MEMORY_PLATFORM_URL"),
        help="the platform's base URL (default: $MEMORY_PLATFORM_URL)",
    )
    parser.add_argument(
        "--api-key",
        default=os.environ.get("MEMORY_PLATFORM_API_KEY"),
        help="the client's API key (default: $MEMORY_PLATFORM_API_KEY)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=float(os.environ.get("MEMORY_PLATFORM_TIMEOUT", "30")),
        help="seconds per HTTP request (default: $MEMORY_PLATFORM_TIMEOUT or 30)",
    )
    args = parser.parse_args(argv)
    if not args.url or not args.api_key:
        parser.error("set MEMORY_PLATFORM_URL and MEMORY_PLATFORM_API_KEY (or pass --url and --api-key)")

    backend = HTTPBackend(AsyncMemoryClient(args.url, args.api_key, timeout=args.timeout))
    build_server(lambda ctx: backend, version=__version__).run("stdio")


if __name__ == "__main__":
    sys.exit(main())

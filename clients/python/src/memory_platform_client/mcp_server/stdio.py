"""`memory-platform-mcp`: the MCP tools over stdio, for hosts that start a local process. Each tool
makes one REST call to the platform at MEMORY_PLATFORM_URL with MEMORY_PLATFORM_API_KEY."""

from __future__ import annotations

import argparse
import os
import sys

from memory_platform_client import __version__
from memory_platform_client.client import AsyncMemoryClient
from memory_platform_client.mcp_server.tools import build_server


class HTTPBackend:
    """The tools' backend over the REST API."""

    def __init__(self, client: AsyncMemoryClient):
        self.client = client

    async def add(self, *, user_id, session_id, messages, session_tag, seal, outcome):
        return await self.client.add(user_id, session_id, messages, session_tag=session_tag, seal=seal, outcome=outcome)

    async def search(self, *, user_id, query, memory_types, search_method, limit, session_id):
        return await self.client.search(
            user_id, query, memory_types=memory_types, search_method=search_method, limit=limit, session_id=session_id
        )

    async def retrieve_skills(self, *, task, k, user_id, session_id):
        return await self.client.retrieve_skills(task, k=k, user_id=user_id, session_id=session_id)

    async def apply_skill(self, *, skill_id, user_id, session_id):
        return await self.client.apply_skill(skill_id, user_id=user_id, session_id=session_id)

    async def skill_feedback(self, *, skill_id, user_id, session_id, verdict, reason):
        return await self.client.skill_feedback(
            skill_id, user_id=user_id, session_id=session_id, verdict=verdict, reason=reason
        )

    async def list_sessions(self, *, user_id, session_tag, status, limit, offset):
        return await self.client.sessions.page(
            limit=limit, offset=offset, user_id=user_id, session_tag=session_tag, status=status
        )

    async def get_session(self, *, session_id, user_id, scope, limit, offset):
        return await self.client.sessions.get(session_id, user_id, scope=scope, limit=limit, offset=offset)

    async def delete_memory(self, *, memory_type, memory_id):
        await self.client.delete_memory(memory_type, memory_id)

    async def erase_user(self, *, user_id):
        return await self.client.erase_user(user_id)

    async def get_context(self, *, user_id, messages, query, session_id, max_tokens, memory_types):
        return await self.client.context(
            user_id, messages, query=query, session_id=session_id, max_tokens=max_tokens, memory_types=memory_types
        )

    async def list_memories(self, *, memory_type, user_id, limit, offset, **filters):
        return await self.client.memories.page(memory_type, user_id, limit=limit, offset=offset, **filters)

    async def get_memory(self, *, memory_type, memory_id):
        return await self.client.memories.get(memory_type, memory_id)

    async def update_memory(self, *, memory_type, memory_id, **fields):
        return await self.client.memories.update(memory_type, memory_id, **fields)

    async def memory_history(self, *, memory_type, memory_id):
        return await self.client.memories.history(memory_type, memory_id)

    async def get_profile(self, *, profile_id):
        return await self.client.profiles.get(profile_id)

    async def list_entities(self, *, user_id, kind, limit, offset):
        return await self.client.entities.page(limit=limit, offset=offset, user_id=user_id, kind=kind)

    async def delete_session(self, *, session_id, user_id, scope):
        return await self.client.sessions.delete(session_id, user_id, scope=scope)

    async def consolidate_memories(self, *, user_id, dry_run):
        return await self.client.memories.consolidate(user_id, dry_run=dry_run)


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

"""The MCP tools' backend: each tool calls the operation its REST endpoint calls, so both transports
check access, validate, answer and refuse alike (tests/mcp_server/test_contract.py checks OPERATIONS)."""

import asyncio
import inspect
import json
import logging
from concurrent.futures import Executor
from functools import partial

from asgiref.sync import sync_to_async
from django.db import close_old_connections
from memory_platform_client.contract import Tool
from memory_platform_client.errors import error_from_body
from rest_framework.utils.encoders import JSONEncoder

from apps.context import operations as context
from apps.conversations import operations as conversations
from apps.core.errors import ApplicationError, as_application_error
from apps.core.pagination import Page
from apps.memories import operations as memories
from apps.privacy import operations as privacy
from apps.profiles import operations as profiles
from apps.search import operations as search
from apps.skills import operations as skills

logger = logging.getLogger(__name__)

# Where the tool's `memory_type` picks the endpoint, one operation per type.
OPERATIONS = {
    "add_memory": conversations.add_memory,
    "search_memory": search.search_memory,
    "retrieve_skills": skills.retrieve_skills,
    "apply_skill": skills.apply_skill,
    "skill_feedback": skills.skill_feedback,
    "list_sessions": conversations.list_sessions,
    "get_session": conversations.get_session,
    "delete_memory": {
        "message": privacy.delete_message,
        "episodic": memories.delete_memory,
        "semantic": memories.delete_memory,
        "procedural": skills.delete_skill,
    },
    "erase_user": privacy.erase_user,
    "get_context": context.get_context,
    "list_memories": memories.list_memories,
    "get_memory": memories.get_memory,
    "update_memory": memories.update_memory,
    "memory_history": memories.get_memory_history,
    "get_profile": profiles.get_profile,
    "list_entities": profiles.list_entities,
    "delete_session": conversations.delete_session,
    "consolidate_memories": memories.consolidate_memories,
}


def operation_for(tool: Tool, arguments: dict):
    target = OPERATIONS[tool.name]
    return target[arguments[tool.selector.name]] if isinstance(target, dict) else target


def operation_arguments(operation, tool: Tool, arguments: dict) -> dict:
    """As its REST view passes them: path arguments by name (or wire name, e.g. `item_id`), the rest
    as `query` or `data`; a selector that picked the operation only if the operation takes it."""
    accepted = inspect.signature(operation).parameters
    chosen_by = tool.selector.name if isinstance(OPERATIONS[tool.name], dict) else None
    keywords, fields = {}, {}
    for arg in tool.tool_args:
        if arg.name not in arguments:
            continue
        if arg.where != "path":
            fields[arg.wire_name] = arguments[arg.name]
        elif arg.name in accepted or arg.wire_name in accepted:
            keywords[arg.name if arg.name in accepted else arg.wire_name] = arguments[arg.name]
        elif arg.name != chosen_by:
            raise TypeError(f"{operation.__qualname__} takes no {arg.name}")
    if "query" in accepted:
        keywords["query"] = fields
    elif "data" in accepted:
        keywords["data"] = fields
    elif fields:
        raise TypeError(f"{operation.__qualname__} takes no {', '.join(fields)}")
    return keywords


def plain_json(value):
    """Serializer output (ReturnDicts, lazy strings) as the plain JSON the REST API would send."""
    if isinstance(value, Page):
        value = {"count": value.count, "results": value.results}
    return None if value is None else json.loads(json.dumps(value, cls=JSONEncoder))


def answer(function, /, **arguments):
    """MCP's mapping of the error family: the exception the SDK raises for the same REST answer."""
    try:
        return function(**arguments)
    except Exception as exc:
        error = as_application_error(exc)
        if error is None:
            logger.exception("unexpected error in an MCP tool", exc_info=exc)
            error = ApplicationError(
                "An unexpected error occurred; it has been logged.", status=500, code="server_error"
            )
        raise error_from_body(error.status, plain_json(error.body())) from exc


def in_request_cycle(function, /, **arguments):
    """Drops stale connections before and after, as Django does around a request (CONN_MAX_AGE)."""
    close_old_connections()
    try:
        return answer(function, **arguments)
    finally:
        close_old_connections()


class PlatformBackend:
    """Without an executor, operations run on the outermost `async_to_sync` caller's thread, inside
    an in-process test's transaction."""

    def __init__(self, *, client, executor: Executor | None = None):
        self.client = client
        self.executor = executor

    async def _run(self, operation, /, **arguments):
        arguments["client"] = self.client
        if self.executor is None:
            return plain_json(await sync_to_async(answer, thread_sensitive=True)(operation, **arguments))
        loop = asyncio.get_running_loop()
        return plain_json(await loop.run_in_executor(self.executor, partial(in_request_cycle, operation, **arguments)))

    async def call(self, tool: Tool, arguments: dict):
        operation = operation_for(tool, arguments)
        return await self._run(operation, **operation_arguments(operation, tool, arguments))

"""The MCP tools' backend inside the platform: each tool calls the operation its REST endpoint
calls (apps.<app>.operations) with the caller and the tool's arguments, so both transports check
access, validate, answer and refuse alike. The tools' arguments left unset (None) are not sent, as
a REST client leaves them out."""

import asyncio
import json
import logging
from concurrent.futures import Executor
from functools import partial

from asgiref.sync import sync_to_async
from django.db import close_old_connections
from memory_platform_client.errors import error_from_body
from rest_framework.utils.encoders import JSONEncoder

from apps.agent import operations as agent
from apps.conversations import operations as conversations
from apps.core.errors import ApplicationError, NotFound, as_application_error
from apps.core.pagination import Page
from apps.privacy import operations as privacy
from apps.profiles import operations as profiles
from apps.search import operations as search
from apps.skills import operations as skills

logger = logging.getLogger(__name__)

DELETIONS = {
    "message": privacy.delete_message,
    "procedural": skills.delete_skill,
}


def given(**arguments) -> dict:
    return {name: value for name, value in arguments.items() if value is not None}


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
    """`answer` on a worker thread, as Django runs a request: stale or broken connections are
    dropped before and after, so CONN_MAX_AGE applies as it does for the REST API."""
    close_old_connections()
    try:
        return answer(function, **arguments)
    finally:
        close_old_connections()


class PlatformBackend:
    """The backend of one caller. With an executor, operations run on its threads (the ORM is
    synchronous); without, on the thread of the outermost `async_to_sync` caller (in-process tests,
    inside the test's transaction)."""

    def __init__(self, *, client, executor: Executor | None = None):
        self.client = client
        self.executor = executor

    async def _run(self, operation, /, **arguments):
        arguments["client"] = self.client
        if self.executor is None:
            return plain_json(await sync_to_async(answer, thread_sensitive=True)(operation, **arguments))
        loop = asyncio.get_running_loop()
        return plain_json(await loop.run_in_executor(self.executor, partial(in_request_cycle, operation, **arguments)))

    async def add(self, *, user_id, session_id, messages, session_tag, seal, outcome) -> dict:
        data = given(
            user_id=user_id,
            session_id=session_id,
            messages=messages,
            session_tag=session_tag,
            seal=seal,
            outcome=outcome,
        )
        return await self._run(conversations.add_memory, data=data)

    async def search(self, *, user_id, query, memory_types, search_method, limit, session_id) -> dict:
        data = given(
            user_id=user_id,
            query=query,
            memory_types=memory_types,
            search_method=search_method,
            limit=limit,
            session_id=session_id,
        )
        return await self._run(search.search_memory, data=data)

    async def retrieve_skills(self, *, task, k, user_id, session_id) -> dict:
        data = given(task=task, k=k, user_id=user_id, session_id=session_id)
        return await self._run(skills.retrieve_skills, data=data)

    async def apply_skill(self, *, skill_id, user_id, session_id) -> dict:
        data = given(user_id=user_id, session_id=session_id)
        return await self._run(skills.apply_skill, skill_id=skill_id, data=data)

    async def skill_feedback(self, *, skill_id, user_id, session_id, verdict, reason) -> dict:
        data = given(user_id=user_id, session_id=session_id, verdict=verdict, reason=reason)
        return await self._run(skills.skill_feedback, skill_id=skill_id, data=data)

    async def list_sessions(self, *, user_id, session_tag, status, limit, offset) -> dict:
        query = given(user_id=user_id, session_tag=session_tag, status=status, limit=limit, offset=offset)
        return await self._run(conversations.list_sessions, query=query)

    async def get_session(self, *, session_id, user_id, scope, limit, offset) -> dict:
        query = given(user_id=user_id, scope=scope, limit=limit, offset=offset)
        return await self._run(conversations.get_session, session_id=session_id, query=query)

    async def delete_memory(self, *, memory_type, memory_id) -> None:
        if memory_type in agent.MEMORY_TYPES:  # episodic and semantic: with the cascade of an edit
            return await self._run(agent.memory_delete, memory_type=memory_type, memory_id=memory_id)
        delete = DELETIONS.get(memory_type, _unknown_memory_type)
        return await self._run(delete, item_id=memory_id)

    async def erase_user(self, *, user_id) -> dict:
        return await self._run(privacy.erase_user, user_id=user_id)

    # The agent's API: each tool is one call of the operation its REST view calls.

    async def get_context(self, **arguments) -> dict:
        return await self._run(agent.context_get, data=given(**arguments))

    async def list_memories(self, *, memory_type, **filters) -> dict:
        return await self._run(agent.memory_list, memory_type=memory_type, data=given(**filters))

    async def get_memory(self, *, memory_type, memory_id) -> dict:
        return await self._run(agent.memory_get, memory_type=memory_type, memory_id=memory_id)

    async def update_memory(self, *, memory_type, memory_id, **fields) -> dict:
        return await self._run(agent.memory_update, memory_type=memory_type, memory_id=memory_id, data=given(**fields))

    async def memory_history(self, *, memory_type, memory_id) -> dict:
        return await self._run(agent.memory_history, memory_type=memory_type, memory_id=memory_id)

    async def get_profile(self, *, profile_id) -> dict:
        return await self._run(profiles.get_profile, profile_id=profile_id)

    async def list_entities(self, **filters) -> dict:
        return await self._run(profiles.list_entities, query=given(**filters))

    async def delete_session(self, *, session_id, user_id, scope) -> dict:
        return await self._run(agent.session_delete, session_id=session_id, data=given(user_id=user_id, scope=scope))

    async def consolidate_memories(self, *, user_id, dry_run) -> dict:
        return await self._run(agent.memory_consolidate, data=given(user_id=user_id, dry_run=dry_run))


def _unknown_memory_type(*, client, item_id):
    raise NotFound()

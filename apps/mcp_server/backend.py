"""The MCP tools' backend inside the platform. Each method does what the tool's REST view does:
the view's own permission classes and scoped queryset, the same input serializer, one service or
selector call, the same output serializer; errors become the REST API's JSON error."""

import asyncio
import json
import logging
from concurrent.futures import Executor
from functools import partial
from types import SimpleNamespace

from django.db import close_old_connections
from memory_platform_client.errors import error_from_body
from rest_framework import exceptions
from rest_framework.utils.encoders import JSONEncoder

from apps.agent import operations
from apps.conversations.selectors import session_messages
from apps.conversations.serializers import (
    MemoryAddInputSerializer,
    MemoryAddOutputSerializer,
    MessageOutputSerializer,
    SessionListFilterSerializer,
    SessionOutputSerializer,
)
from apps.conversations.services import message_delete, messages_ingest
from apps.conversations.turns import TurnError
from apps.conversations.views import MemoryAddView, MessageDeleteView, SessionDetailView, SessionListView
from apps.core.api import check_parameters, require_write_access
from apps.core.errors import api_exception_handler, error_body
from apps.privacy.serializers import ErasureAcceptedOutputSerializer
from apps.privacy.services.erasure import erasure_request
from apps.privacy.services.subjects import USER, Subject
from apps.privacy.views import UserErasureView
from apps.search.engine import search
from apps.search.serializers import MemorySearchInputSerializer, render_hit
from apps.search.views import MemorySearchView
from apps.skills.serializers import SkillOutputSerializer, SkillRetrieveInputSerializer, SkillRetrieveOutputSerializer
from apps.skills.services.retrieve import skills_retrieve
from apps.skills.services.skills import skill_delete
from apps.skills.views import ProceduralMemoryDeleteView, SkillRetrieveView

logger = logging.getLogger(__name__)

DELETIONS = {
    "message": (MessageDeleteView, lambda item: message_delete(message=item)),
    "procedural": (ProceduralMemoryDeleteView, lambda item: skill_delete(skill=item)),
}


def view_for(view_class, method: str, client, query: dict | None = None, path: dict | None = None):
    """The REST view of the same operation, bound to the caller (and to the query string it would
    have read), after its permission checks: read-only clients are refused writes, and clients
    without can_erase erasure, exactly as in the REST API. `path` holds the arguments the REST API
    takes in its path; they and the query obey the same text rules (apps.core.api.check_parameters)."""
    view = view_class()
    query_params = {key: value for key, value in (query or {}).items() if value is not None}
    view.request = SimpleNamespace(method=method, user=client, query_params=query_params)
    for permission in view.get_permissions():
        if not permission.has_permission(view.request, view):
            raise exceptions.PermissionDenied(getattr(permission, "message", None), code=getattr(permission, "code", None))
    check_parameters([(name, [value]) for name, value in {**(path or {}), **query_params}.items() if isinstance(value, str)])
    return view


def validated(serializer_class, data: dict) -> dict:
    serializer = serializer_class(data={key: value for key, value in data.items() if value is not None})
    serializer.is_valid(raise_exception=True)
    return serializer.validated_data


def as_api_error(exc: Exception):
    """The exception the SDK raises for the REST answer this exception would have produced."""
    response = api_exception_handler(exc, {})
    if response is None:
        logger.exception("unexpected error in an MCP tool", exc_info=exc)
        body = error_body(status_code=500, code="server_error", message="An unexpected error occurred; it has been logged.")
        return error_from_body(500, body)
    return error_from_body(response.status_code, plain_json(response.data))


def plain_json(value):
    """Serializer output (ReturnDicts, lazy strings) as the plain JSON the REST API would send."""
    return None if value is None else json.loads(json.dumps(value, cls=JSONEncoder))


def in_request_cycle(function, /, *args, **kwargs):
    """Runs ORM work on a worker thread as Django runs a request: stale or broken connections are
    dropped before and after, so CONN_MAX_AGE applies as it does for the REST API."""
    close_old_connections()
    try:
        return function(*args, **kwargs)
    except Exception as exc:
        raise as_api_error(exc) from exc
    finally:
        close_old_connections()


class PlatformBackend:
    def __init__(self, *, client, executor: Executor):
        self.client = client
        self.executor = executor

    async def _run(self, function, /, **kwargs):
        loop = asyncio.get_running_loop()
        result = await loop.run_in_executor(self.executor, partial(in_request_cycle, function, **kwargs))
        return plain_json(result)

    async def add(self, **arguments) -> dict:
        return await self._run(self._add, **arguments)

    def _add(self, *, user_id, session_id, messages, session_tag, seal, outcome) -> dict:
        view_for(MemoryAddView, "POST", self.client)
        data = validated(MemoryAddInputSerializer, {
            "user_id": user_id, "session_id": session_id, "messages": messages, "session_tag": session_tag,
            "seal": seal, "outcome": outcome,
        })
        try:
            body = messages_ingest(
                client=self.client, user_id=data["user_id"], session_id=data["session_id"], messages=data["messages"],
                session_tag=data.get("session_tag"), seal=data["seal"], outcome=data.get("outcome"),
            )
        except TurnError as exc:
            raise exceptions.ValidationError({"messages": exc.errors}) from None
        return MemoryAddOutputSerializer(body).data

    async def search(self, **arguments) -> dict:
        return await self._run(self._search, **arguments)

    def _search(self, *, user_id, query, memory_types, search_method, limit, session_id) -> dict:
        view_for(MemorySearchView, "POST", self.client)
        params = dict(validated(MemorySearchInputSerializer, {
            "user_id": user_id, "query": query, "memory_types": memory_types, "search_method": search_method,
            "limit": limit, "session_id": session_id,
        }))
        query = params.pop("query")
        hits = search(
            reader=self.client.reader, query=query, memory_types=params.pop("memory_types", None),
            method=params.pop("search_method", None), limit=params.pop("limit"), filters=params,
        )
        results = [render_hit(hit) for hit in hits]
        return {"query": query, "count": len(results), "reranked_by": hits.reranked_by,
                "decomposed_into": hits.decomposed_into, "results": results}

    async def retrieve_skills(self, **arguments) -> dict:
        return await self._run(self._retrieve_skills, **arguments)

    def _retrieve_skills(self, *, task, k, user_id) -> dict:
        view_for(SkillRetrieveView, "POST", self.client)
        data = validated(SkillRetrieveInputSerializer, {"task": task, "k": k, "user_id": user_id})
        hits = skills_retrieve(reader=self.client.reader, task=data["task"], k=data["k"], user_id=data.get("user_id"))
        skills = [{**SkillOutputSerializer(skill).data, "score": score} for skill, score in hits]
        return SkillRetrieveOutputSerializer({"task": data["task"], "skills": skills}).data

    async def list_sessions(self, **arguments) -> dict:
        return await self._run(self._list_sessions, **arguments)

    def _list_sessions(self, *, user_id, session_tag, status, limit, offset) -> dict:
        view = view_for(SessionListView, "GET", self.client)
        filters = validated(SessionListFilterSerializer, {
            "user_id": user_id, "session_tag": session_tag, "status": status, "limit": limit, "offset": offset,
        })
        sessions = view.get_queryset(filters=filters)
        return {"count": sessions.count(), "results": SessionOutputSerializer(sessions[offset : offset + limit], many=True).data}

    async def get_session(self, **arguments) -> dict:
        return await self._run(self._get_session, **arguments)

    def _get_session(self, *, session_id, user_id, scope, limit, offset) -> dict:
        view = view_for(SessionDetailView, "GET", self.client,
                        {"user_id": user_id, "scope": scope, "limit": limit, "offset": offset}, {"session_id": session_id})
        session = view.get_session(session_id)
        query = view.owner_query()
        messages = session_messages(session=session)[query["offset"] : query["offset"] + query["limit"]]
        body = SessionOutputSerializer(session).data
        body["messages"] = MessageOutputSerializer(messages, many=True).data
        next_offset = query["offset"] + query["limit"]
        body["messages_next_offset"] = next_offset if next_offset < session.message_count else None
        return body

    async def delete_memory(self, **arguments) -> None:
        return await self._run(self._delete_memory, **arguments)

    def _delete_memory(self, *, memory_type, memory_id) -> None:
        if memory_type in operations.MEMORY_TYPES:
            return operations.memory_delete(client=self.client, memory_type=memory_type, memory_id=memory_id)
        if memory_type not in DELETIONS:
            raise exceptions.NotFound()
        view_class, delete = DELETIONS[memory_type]
        item = view_for(view_class, "DELETE", self.client, path={"item_id": memory_id}).get_object(pk=memory_id)
        require_write_access(self.client, item)
        delete(item)

    async def erase_user(self, **arguments) -> dict:
        return await self._run(self._erase_user, **arguments)

    def _erase_user(self, *, user_id) -> dict:
        view = view_for(UserErasureView, "DELETE", self.client, path={"user_id": user_id})
        end_user = view.get_object(user_id=user_id)
        subject = Subject(organization=self.client.organization, kind=USER, subject_id=end_user.user_id, end_user=end_user)
        return ErasureAcceptedOutputSerializer(erasure_request(subject=subject, requested_by=self.client)).data

    # The agent's API: each tool is one call of its operation (apps.agent.operations), as its REST view is.

    async def get_context(self, **arguments) -> dict:
        return await self._run(operations.context_get, client=self.client, data=arguments)

    async def list_memories(self, *, memory_type, **filters) -> dict:
        return await self._run(operations.memory_list, client=self.client, memory_type=memory_type, data=filters)

    async def get_memory(self, *, memory_type, memory_id) -> dict:
        return await self._run(operations.memory_get, client=self.client, memory_type=memory_type, memory_id=memory_id)

    async def update_memory(self, *, memory_type, memory_id, **fields) -> dict:
        return await self._run(
            operations.memory_update, client=self.client, memory_type=memory_type, memory_id=memory_id, data=fields
        )

    async def memory_history(self, *, memory_type, memory_id) -> dict:
        return await self._run(operations.memory_history, client=self.client, memory_type=memory_type, memory_id=memory_id)

    async def get_profile(self, *, profile_id) -> dict:
        return await self._run(operations.profile_get, client=self.client, profile_id=profile_id)

    async def list_entities(self, **filters) -> dict:
        return await self._run(operations.entity_list_page, client=self.client, data=filters)

    async def delete_session(self, *, session_id, user_id, scope) -> dict:
        return await self._run(
            operations.session_delete, client=self.client, session_id=session_id, data={"user_id": user_id, "scope": scope}
        )

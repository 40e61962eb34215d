"""`MemoryClient` (blocking) and `AsyncMemoryClient`: the same methods, the second awaited.

Results are the platform's JSON as dicts and lists, exactly as documented in its OpenAPI schema.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable
from typing import Any
from urllib.parse import quote

import httpx2 as httpx

from memory_platform_client._http import (
    DEFAULT_TIMEOUT,
    AsyncDriver,
    Call,
    Item,
    Op,
    Retries,
    Sleep,
    SyncDriver,
    api_base_url,
    client_headers,
)
from memory_platform_client.errors import TaskTimeoutError
from memory_platform_client.messages import to_json, to_messages

DELETABLE_MEMORY_TYPES = ("message", "episodic", "semantic", "procedural")
MANAGED_MEMORY_TYPES = ("episodic", "semantic")
TERMINAL_TASK_STATUSES = frozenset({"succeeded", "dead", "cancelled"})
PAGE_SIZE = 100
TRANSCRIPT_PAGE_SIZE = 1000


def _segment(value: Any) -> str:
    """One path segment: user ids may hold any character, '/' included."""
    text = str(value)
    if not text:
        raise ValueError("an id must not be empty")
    return quote(text, safe="")


def _body(**fields) -> dict:
    return {key: to_json(value) for key, value in fields.items() if value is not None}


def _one(call: Call) -> Op:
    return (yield call)


def _pages(path: str, filters: dict, page_size: int) -> Op:
    offset = filters.pop("offset", 0) or 0
    while True:
        page = yield Call("GET", path, params={**filters, "limit": page_size, "offset": offset})
        for item in page["results"]:
            yield Item(item)
        if not page.get("next") or not page["results"]:
            return
        offset += len(page["results"])


def _session_with_transcript(path: str, owner: dict, limit: int | None, offset: int) -> Op:
    if limit is not None:
        return (yield Call("GET", path, params={**owner, "limit": limit, "offset": offset}))
    session = yield Call("GET", path, params={**owner, "limit": TRANSCRIPT_PAGE_SIZE, "offset": offset})
    while session.get("messages_next_offset") is not None:
        page = yield Call(
            "GET",
            path,
            params={**owner, "limit": TRANSCRIPT_PAGE_SIZE, "offset": session["messages_next_offset"]},
        )
        session["messages"].extend(page["messages"])
        session["messages_next_offset"] = page.get("messages_next_offset")
    return session


def _wait(task_id: str, timeout: float, poll_interval: float) -> Op:
    deadline = time.monotonic() + timeout
    while True:
        task = yield Call("GET", f"tasks/{_segment(task_id)}/")
        if task["status"] in TERMINAL_TASK_STATUSES:
            return task
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TaskTimeoutError(f"task {task_id} is still {task['status']} after {timeout}s", task)
        yield Sleep(min(poll_interval, remaining))


class _Listing:
    """A list endpoint: `iter(**filters)` walks every page lazily, `list(**filters)` collects them,
    `page(limit=, offset=, **filters)` returns one page as the platform sends it."""

    path = ""

    def __init__(self, client):
        self._client = client

    def page(self, *, limit: int | None = None, offset: int | None = None, **filters):
        return self._client._driver.run(
            _one(Call("GET", self.path, params={**filters, "limit": limit, "offset": offset}))
        )

    def iter(self, *, page_size: int = PAGE_SIZE, **filters):
        return self._client._driver.iterate(_pages(self.path, filters, page_size))

    def list(self, *, page_size: int = PAGE_SIZE, **filters):
        return self._client._driver.collect(_pages(self.path, filters, page_size))


class Sessions(_Listing):
    """`GET sessions/` filters: user_id, session_tag, status, start, end.

    A session is named by its id and owner; `scope` is needed only when the same id exists in
    several scopes the key reads (by default the key's write scope wins)."""

    path = "sessions/"

    def _path(self, session_id: str, action: str = "") -> str:
        return f"sessions/{_segment(session_id)}/{action}"

    def get(
        self, session_id: str, user_id: str, *, scope: str | None = None, limit: int | None = None, offset: int = 0
    ):
        """The session with its transcript in `messages`: every turn, or `limit` turns from `offset`."""
        owner = {"user_id": user_id, "scope": scope}
        return self._client._driver.run(_session_with_transcript(self._path(session_id), owner, limit, offset))

    def seal(self, session_id: str, user_id: str, *, scope: str | None = None):
        call = Call("POST", self._path(session_id, "seal"), params={"user_id": user_id, "scope": scope})
        return self._client._driver.run(_one(call))

    def set_outcome(self, session_id: str, user_id: str, outcome: str, *, scope: str | None = None):
        call = Call(
            "PATCH", self._path(session_id), params={"user_id": user_id, "scope": scope}, json={"outcome": outcome}
        )
        return self._client._driver.run(_one(call))

    def retag(self, session_id: str, user_id: str, session_tag: str, *, scope: str | None = None):
        """Moves a session to `task` or `conversation` routing, until anything has been learned from it
        (afterwards the platform answers 409 naming what)."""
        call = Call(
            "PATCH",
            self._path(session_id),
            params={"user_id": user_id, "scope": scope},
            json={"session_tag": session_tag},
        )
        return self._client._driver.run(_one(call))

    def distill(self, session_id: str, user_id: str, *, scope: str | None = None):
        call = Call("POST", self._path(session_id, "distill"), params={"user_id": user_id, "scope": scope})
        return self._client._driver.run(_one(call))

    def delete(self, session_id: str, user_id: str, *, scope: str | None = None):
        """Deletes the session's turns and what was learned only from them, in the background →
        `{session_id, user_id, scope, task_id, status}` (`wait_for_task(task_id)` to wait)."""
        call = Call("DELETE", self._path(session_id), params={"user_id": user_id, "scope": scope})
        return self._client._driver.run(_one(call))


class Skills(_Listing):
    """`GET skills/` filters: status, entry_type, scope, user_id, q."""

    path = "skills/"

    def get(self, skill_id: str):
        """The skill with its `versions`."""
        return self._client._driver.run(_one(Call("GET", f"skills/{_segment(skill_id)}/")))

    def delete(self, skill_id: str):
        return self._client._driver.run(_one(Call("DELETE", f"skills/{_segment(skill_id)}/")))


class Experiences(_Listing):
    """`GET experiences/` filters: status, experience_type, scope, user_id, session_id, q."""

    path = "experiences/"

    def delete(self, experience_id: str):
        """Skills evolved from it alone go too; others lose its text and return to review."""
        return self._client._driver.run(_one(Call("DELETE", f"experiences/{_segment(experience_id)}/")))


class Profiles(_Listing):
    """`GET profiles/` (compiled person pages) filters: user_id and the others the API documents."""

    path = "profiles/"

    def get(self, profile_id: str):
        """The page with its revisions and sources."""
        return self._client._driver.run(_one(Call("GET", f"profiles/{_segment(profile_id)}/")))

    def findings(self, profile_id: str):
        """What lint found about the page: `{profile_id, findings: [{kind, severity, status, detail, …}]}`."""
        return self._client._driver.run(_one(Call("GET", f"profiles/{_segment(profile_id)}/findings")))

    def delete(self, profile_id: str):
        return self._client._driver.run(_one(Call("DELETE", f"profiles/{_segment(profile_id)}/")))


class Entities(_Listing):
    """`GET entities/` (people, places, things and their co-occurrence edges) filters: user_id, kind."""

    path = "entities/"

    def delete(self, entity_id: str):
        """The entity with its mentions, edges and page."""
        return self._client._driver.run(_one(Call("DELETE", f"entities/{_segment(entity_id)}/")))


class Memories:
    """Episodic and semantic memories, managed: `list`/`iter`/`page` one user's (filters: subject,
    start, end, q), `get`, `create` (stored as given, no model involved), `update` (recorded in
    the history with this client as actor), `delete`, `history`."""

    def __init__(self, client):
        self._client = client

    @staticmethod
    def _path(memory_type: str, memory_id: str | None = None, suffix: str = "") -> str:
        if memory_type not in MANAGED_MEMORY_TYPES:
            raise ValueError(f"memory_type must be one of {', '.join(MANAGED_MEMORY_TYPES)}")
        return f"memory/{memory_type}/" + (f"{_segment(memory_id)}{suffix}" if memory_id is not None else "")

    def _run(self, call: Call):
        return self._client._driver.run(_one(call))

    def page(self, memory_type: str, user_id: str, *, limit: int | None = None, offset: int | None = None, **filters):
        params = {**filters, "user_id": user_id, "limit": limit, "offset": offset}
        return self._run(Call("GET", self._path(memory_type), params=params))

    def iter(self, memory_type: str, user_id: str, *, page_size: int = PAGE_SIZE, **filters):
        return self._client._driver.iterate(_pages(self._path(memory_type), {**filters, "user_id": user_id}, page_size))

    def list(self, memory_type: str, user_id: str, *, page_size: int = PAGE_SIZE, **filters):
        return self._client._driver.collect(_pages(self._path(memory_type), {**filters, "user_id": user_id}, page_size))

    def get(self, memory_type: str, memory_id: str):
        return self._run(Call("GET", self._path(memory_type, memory_id)))

    def create(self, memory_type: str, user_id: str, **fields):
        """semantic: name, summary[, details, source, reason]; episodic: summary, occurred_at[, details,
        time_granularity, actor, event_type, reason]."""
        return self._run(Call("POST", self._path(memory_type), json=_body(user_id=user_id, **fields)))

    def update(self, memory_type: str, memory_id: str, **fields):
        """semantic: name, summary, details; episodic: summary, details, occurred_at, time_granularity;
        and a `reason` for the history."""
        return self._run(Call("PATCH", self._path(memory_type, memory_id), json=_body(**fields)))

    def delete(self, memory_type: str, memory_id: str):
        return self._run(Call("DELETE", self._path(memory_type, memory_id)))

    def history(self, memory_type: str, memory_id: str):
        """`{id, memory_type, changes: [{operation, actor, reason, previous_value, new_value, created_at}]}`."""
        return self._run(Call("GET", self._path(memory_type, memory_id, "/history")))

    def consolidate(self, user_id: str | None = None, *, dry_run: bool = False):
        """Merges duplicate memories and resolves contradicting ones for `user_id` (None: every user of the
        key's write scope), in the background → `{user_id, scope, dry_run, task_id, status}`;
        `wait_for_task(task_id)["result"]` lists what was merged, retired and flagged."""
        return self._run(Call("POST", "memory/consolidate", json=_body(user_id=user_id, dry_run=dry_run)))


class _Methods:
    """The API, written once; `_driver` makes each call blocking or awaitable."""

    _driver: SyncDriver | AsyncDriver

    def _setup(self, base_url: str, retries: Retries | None):
        self.base_url = api_base_url(base_url)
        self.retries = retries or Retries()
        self.sessions = Sessions(self)
        self.skills = Skills(self)
        self.experiences = Experiences(self)
        self.profiles = Profiles(self)
        self.entities = Entities(self)
        self.memories = Memories(self)

    def _run(self, call: Call):
        return self._driver.run(_one(call))

    def me(self):
        """The calling client: its organisation, write scope and read scopes."""
        return self._run(Call("GET", "me"))

    def add(
        self,
        user_id: str,
        session_id: str,
        messages: Iterable[Any],
        *,
        session_tag: str | None = None,
        seal: bool = False,
        outcome: str | None = None,
        occurred_at=None,
        filter_tags: dict | None = None,
        idempotency_key: str | None = None,
    ):
        """Stores turns of one session (OpenAI chat messages: dicts or the openai SDK's objects).

        Sends `Idempotency-Key` (yours, or a fresh one per call), so a retried add is stored once.
        """
        body = _body(
            user_id=user_id,
            session_id=session_id,
            messages=to_messages(messages),
            session_tag=session_tag,
            seal=seal,
            outcome=outcome,
            occurred_at=occurred_at,
            filter_tags=filter_tags,
        )
        headers = {"Idempotency-Key": idempotency_key or f"sdk-{uuid.uuid4().hex}"}
        return self._run(Call("POST", "memory/add", json=body, headers=headers))

    def search(
        self,
        user_id: str,
        query: str = "",
        *,
        memory_types: Iterable[str] | None = None,
        search_method: str | None = None,
        limit: int | None = None,
        session_id: str | None = None,
        session_tag: str | None = None,
        start=None,
        end=None,
        filter_tags: dict | None = None,
        time_window: str | None = None,
    ):
        """Searches one user's memories; an empty query lists the most recent items. `time_window`
        (`filter`, `boost`, `off`) says what a time the query names ("last May") does. Each hit has `id`,
        `memory_type`, `score` and `text` (whatever its type), then its type's own fields."""
        body = _body(
            user_id=user_id,
            query=query,
            memory_types=list(memory_types) if memory_types else None,
            search_method=search_method,
            limit=limit,
            session_id=session_id,
            session_tag=session_tag,
            start=start,
            end=end,
            filter_tags=filter_tags,
            time_window=time_window,
        )
        return self._run(Call("POST", "memory/search", json=body))

    def search_all_users(
        self,
        query: str = "",
        *,
        memory_types: Iterable[str] | None = None,
        search_method: str | None = None,
        limit: int | None = None,
        session_id: str | None = None,
        session_tag: str | None = None,
        start=None,
        end=None,
        filter_tags: dict | None = None,
        time_window: str | None = None,
    ):
        """The same search across every user of the organisation (within the key's read scopes)."""
        params = {
            "query": query,
            "memory_types": ",".join(memory_types) if memory_types else None,
            "search_method": search_method,
            "limit": limit,
            "session_id": session_id,
            "session_tag": session_tag,
            "start": start,
            "end": end,
            "filter_tags": filter_tags,
            "time_window": time_window,
        }
        return self._run(Call("GET", "memory/search_all_users", params=params))

    def context(
        self,
        user_id: str,
        messages: Iterable[Any] | None = None,
        *,
        query: str | None = None,
        session_id: str | None = None,
        scope: str | None = None,
        max_tokens: int | None = None,
        memory_types: Iterable[str] | None = None,
    ):
        """Prompt-ready context for a user (and session) within `max_tokens` estimated tokens:
        `text` to put in the prompt, and `items` (each with its id and type) to cite."""
        body = _body(
            user_id=user_id,
            messages=to_messages(messages) if messages is not None else None,
            query=query,
            session_id=session_id,
            scope=scope,
            max_tokens=max_tokens,
            memory_types=list(memory_types) if memory_types else None,
        )
        return self._run(Call("POST", "memory/context", json=body))

    def retrieve_skills(self, task: str, k: int = 5, user_id: str | None = None, session_id: str | None = None):
        """Act time: the top-k active skills for a task description. With `session_id` (and `user_id`),
        each skill returned is recorded as used by that task session; its outcome counts for the skill."""
        body = _body(task=task, k=k, user_id=user_id, session_id=session_id)
        return self._run(Call("POST", "skills/retrieve", json=body))

    def apply_skill(self, skill_id: str, *, user_id: str, session_id: str):
        """Reports that the agent followed a skill it retrieved in this task session."""
        body = _body(user_id=user_id, session_id=session_id)
        return self._run(Call("POST", f"skills/{_segment(skill_id)}/uses", json=body))

    def skill_feedback(self, skill_id: str, *, user_id: str, session_id: str, verdict: str, reason: str = ""):
        """A verdict on a skill for a task session: `helped`, `hurt` or `irrelevant`, with a reason."""
        body = _body(user_id=user_id, session_id=session_id, verdict=verdict, reason=reason)
        return self._run(Call("POST", f"skills/{_segment(skill_id)}/feedback", json=body))

    def delete_memory(self, memory_type: str, memory_id: str):
        """Deletes one item: `message`, `episodic`, `semantic` or `procedural`."""
        if memory_type not in DELETABLE_MEMORY_TYPES:
            raise ValueError(f"memory_type must be one of {', '.join(DELETABLE_MEMORY_TYPES)}")
        return self._run(Call("DELETE", f"memory/{memory_type}/{_segment(memory_id)}"))

    def erase_user(self, user_id: str):
        """Erases everything about one person in the organisation → `{erasure_id, status, task_id}`.
        Needs a key with the can_erase permission (otherwise `PermissionDeniedError`)."""
        return self._run(Call("DELETE", f"users/{_segment(user_id)}/memories"))

    def erase_client(self, client_id: str):
        """Erases what one client of the organisation wrote, and revokes its keys (needs can_erase)."""
        return self._run(Call("DELETE", f"clients/{_segment(client_id)}/memories"))

    def erasure(self, erasure_id: str):
        return self._run(Call("GET", f"erasures/{_segment(erasure_id)}/"))

    def task(self, task_id: str):
        return self._run(Call("GET", f"tasks/{_segment(task_id)}/"))

    def wait_for_task(self, task_id: str, timeout: float = 60.0, *, poll_interval: float = 0.5):
        """Polls until the task has `succeeded`, is `dead` or `cancelled`, and returns it;
        raises `TaskTimeoutError` after `timeout` seconds."""
        return self._driver.run(_wait(task_id, timeout, poll_interval))


class MemoryClient(_Methods):
    """The platform's REST API, blocking. Use it as a context manager, or call `close()`.

    `MemoryClient("http://127.0.0.1:8000", api_key="mp_…", timeout=30)`; pass `retries=Retries(...)`
    to change the retry policy, or `http_client=` an `httpx2.Client` of your own.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        retries: Retries | None = None,
        http_client: httpx.Client | None = None,
    ):
        self._setup(base_url, retries)
        self._owns_http = http_client is None
        http = http_client or httpx.Client(timeout=timeout)
        http.base_url = self.base_url
        http.headers.update(client_headers(api_key))
        self._driver = SyncDriver(http, self.retries)

    def close(self) -> None:
        if self._owns_http:
            self._driver.http.close()

    def __enter__(self) -> MemoryClient:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


class AsyncMemoryClient(_Methods):
    """The same methods as `MemoryClient`, each awaited; `iter()` is an async iterator."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        retries: Retries | None = None,
        http_client: httpx.AsyncClient | None = None,
    ):
        self._setup(base_url, retries)
        self._owns_http = http_client is None
        http = http_client or httpx.AsyncClient(timeout=timeout)
        http.base_url = self.base_url
        http.headers.update(client_headers(api_key))
        self._driver = AsyncDriver(http, self.retries)

    async def aclose(self) -> None:
        if self._owns_http:
            await self._driver.http.aclose()

    async def __aenter__(self) -> AsyncMemoryClient:
        return self

    async def __aexit__(self, *exc_info) -> None:
        await self.aclose()

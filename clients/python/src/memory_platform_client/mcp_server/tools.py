"""The MCP tools, defined once for both transports: names, argument schemas, annotations and the
text a model reads. Each tool makes one call on a backend: the platform's own services behind
`/mcp`, or the REST API through `AsyncMemoryClient` behind the stdio server. Either backend
returns the REST API's JSON and raises this package's `APIError`s, so both transports answer
alike, errors included."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Annotated, Any, Literal, Protocol

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

from memory_platform_client.errors import APIConnectionError, APIError
from memory_platform_client.messages import ChatMessage, to_messages

SERVER_NAME = "memory-platform"
INSTRUCTIONS = (
    "Long-term memory shared by this agent's sessions. Store conversation turns with add_memory "
    "(same user_id and session_id for one conversation); before answering, get_context gives what "
    "memory knows that bears on the latest message, within a token budget (search_memory looks up "
    "something specific); call retrieve_skills at the start of a task for learned procedures, with the "
    "task's session_id, then apply_skill for each one you followed and skill_feedback when one helped or hurt. "
    "list_memories, get_memory, update_memory and memory_history manage the facts and events learned."
)
CLIP = 300
TRANSCRIPT_CLIP = 2000

MemoryType = Literal["message", "episodic", "semantic", "procedural", "experience", "profile"]
DeletableMemoryType = Literal["message", "episodic", "semantic", "procedural"]
SearchMethod = Literal["bm25", "embedding", "hybrid", "fuzzy"]
SessionTag = Literal["conversation", "task"]
ManagedMemoryType = Literal["episodic", "semantic"]
ContextType = Literal["profile", "semantic", "episodic", "message", "procedural"]

UserId = Annotated[str, Field(description="Your application's id of the person (end user) the memory is about.")]
SessionId = Annotated[str, Field(description="The conversation or task id: 1-64 letters, digits, '_' or '-'.")]
SkillId = Annotated[str, Field(description="The skill's id, as retrieve_skills shows it.")]
TaskSessionId = Annotated[
    str, Field(description="The task session that retrieved the skill (the session_id given to retrieve_skills).")
]

READ = ToolAnnotations(read_only_hint=True, open_world_hint=False)
WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False)
EDIT = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
DESTRUCTIVE = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False)


class Backend(Protocol):
    """One method per tool; each returns the REST API's JSON for the same operation."""

    async def add(
        self,
        *,
        user_id: str,
        session_id: str,
        messages: list[dict],
        session_tag: str | None,
        seal: bool,
        outcome: str | None,
    ) -> dict: ...

    async def search(
        self,
        *,
        user_id: str,
        query: str,
        memory_types: list[str] | None,
        search_method: str | None,
        limit: int,
        session_id: str | None,
    ) -> dict: ...

    async def retrieve_skills(self, *, task: str, k: int, user_id: str | None, session_id: str | None) -> dict: ...

    async def apply_skill(self, *, skill_id: str, user_id: str, session_id: str) -> dict: ...

    async def skill_feedback(
        self, *, skill_id: str, user_id: str, session_id: str, verdict: str, reason: str | None
    ) -> dict: ...

    async def list_sessions(
        self, *, user_id: str | None, session_tag: str | None, status: str | None, limit: int, offset: int
    ) -> dict:
        """At least `count` (all matches) and `results` (this page)."""

    async def get_session(
        self, *, session_id: str, user_id: str, scope: str | None, limit: int, offset: int
    ) -> dict: ...

    async def delete_memory(self, *, memory_type: str, memory_id: str) -> None: ...

    async def erase_user(self, *, user_id: str) -> dict: ...

    async def get_context(
        self,
        *,
        user_id: str,
        messages: list[dict] | None,
        query: str | None,
        session_id: str | None,
        max_tokens: int,
        memory_types: list[str] | None,
    ) -> dict: ...

    async def list_memories(
        self,
        *,
        memory_type: str,
        user_id: str,
        subject: str | None,
        start: str | None,
        end: str | None,
        q: str | None,
        limit: int,
        offset: int,
    ) -> dict:
        """At least `count` (all matches) and `results` (this page)."""

    async def get_memory(self, *, memory_type: str, memory_id: str) -> dict: ...

    async def update_memory(self, *, memory_type: str, memory_id: str, **fields) -> dict: ...

    async def memory_history(self, *, memory_type: str, memory_id: str) -> dict: ...

    async def get_profile(self, *, profile_id: str) -> dict: ...

    async def list_entities(self, *, user_id: str, kind: str | None, limit: int, offset: int) -> dict:
        """At least `count` (all matches) and `results` (this page)."""

    async def delete_session(self, *, session_id: str, user_id: str, scope: str | None) -> dict: ...

    async def consolidate_memories(self, *, user_id: str | None, dry_run: bool) -> dict: ...


BackendFor = Callable[[Context], Backend]


def build_server(backend_for: BackendFor, *, name: str = SERVER_NAME, version: str = "") -> MCPServer:
    """An MCPServer with the platform's tools; `backend_for(ctx)` gives the backend of one call (on
    the platform it is the caller's, resolved from the request's API key)."""
    server = MCPServer(name, instructions=INSTRUCTIONS, version=version)

    def tool(name: str, title: str, annotations: ToolAnnotations):
        def register(function):
            # The docstring is the description the model reads, without the source's indentation.
            server.add_tool(
                function,
                name=name,
                title=title,
                description=inspect.cleandoc(function.__doc__),
                annotations=annotations,
            )
            return function

        return register

    async def call(ctx: Context, operation: str, **arguments) -> Any:
        try:
            return await getattr(backend_for(ctx), operation)(**arguments)
        except APIError as exc:
            raise ToolError(error_text(exc)) from exc
        except APIConnectionError as exc:
            raise ToolError(f"The memory platform could not be reached: {exc}") from exc

    @tool("add_memory", "Add to memory", WRITE)
    async def add_memory(
        user_id: UserId,
        session_id: SessionId,
        messages: Annotated[list[ChatMessage], Field(min_length=1, description="The turns to store, oldest first.")],
        ctx: Context,
        session_tag: Annotated[
            SessionTag | None,
            Field(description="'conversation' (with a person; default) or 'task' (tool work, distilled into skills)."),
        ] = None,
        seal: Annotated[bool, Field(description="Close the session after these turns.")] = False,
        outcome: Annotated[
            Literal["success", "failure", "unknown"] | None, Field(description="How a task session ended.")
        ] = None,
    ) -> CallToolResult:
        """Store turns of a conversation or task session in long-term memory. Later turns of the same
        session_id are appended; the platform extracts facts and events, or skills, in the background."""
        body = await call(
            ctx,
            "add",
            user_id=user_id,
            session_id=session_id,
            messages=to_messages(messages),
            session_tag=session_tag,
            seal=seal,
            outcome=outcome,
        )
        return result(render_add(body), body)

    @tool("search_memory", "Search memory", READ)
    async def search_memory(
        user_id: UserId,
        query: Annotated[str, Field(description="What to look for; empty lists the most recent items.")],
        ctx: Context,
        memory_types: Annotated[
            list[MemoryType] | None,
            Field(
                description="Default: every type. message = transcript turns, episodic = dated events, "
                "semantic = facts, procedural = skills, experience = distilled lessons, "
                "profile = compiled pages about people."
            ),
        ] = None,
        search_method: Annotated[SearchMethod | None, Field(description="Default: the best for each type.")] = None,
        limit: Annotated[int, Field(ge=1, le=100)] = 10,
        session_id: Annotated[str | None, Field(description="Only this session's items.")] = None,
    ) -> CallToolResult:
        """Search one user's memories (facts, events, transcript turns, skills, lessons, profiles) by meaning
        and keywords."""
        body = await call(
            ctx,
            "search",
            user_id=user_id,
            query=query,
            memory_types=memory_types,
            search_method=search_method,
            limit=limit,
            session_id=session_id,
        )
        return result(render_search(body), body)

    @tool("retrieve_skills", "Retrieve skills", READ)
    async def retrieve_skills(
        task: Annotated[str, Field(description="The task at hand, in a sentence or two.")],
        ctx: Context,
        k: Annotated[int, Field(ge=1, le=50, description="How many skills.")] = 5,
        user_id: Annotated[
            str | None,
            Field(
                description="The end user the agent acts for: also the skills this user taught. Without it, only the skills shared by the whole scope."
            ),
        ] = None,
        session_id: Annotated[
            str | None,
            Field(
                description="The task session the skills serve (with user_id): its outcome, once sealed, counts for or against each skill returned."
            ),
        ] = None,
    ) -> CallToolResult:
        """The learned procedures (skills) most relevant to a task, with their instructions: call it before acting."""
        body = await call(ctx, "retrieve_skills", task=task, k=k, user_id=user_id, session_id=session_id)
        return result(render_skills(body), body)

    @tool("apply_skill", "Mark a skill applied", EDIT)
    async def apply_skill(
        skill_id: SkillId, user_id: UserId, session_id: TaskSessionId, ctx: Context
    ) -> CallToolResult:
        """Report that you followed a skill that retrieve_skills returned for this task session: the
        session's outcome then counts for the skill as applied, not only as retrieved (also when it was not
        among the top few results, which count anyway). Marking it again changes nothing."""
        body = await call(ctx, "apply_skill", skill_id=skill_id, user_id=user_id, session_id=session_id)
        return result(
            f"Marked {body['applied']} use(s) of skill {body['skill_id']} in session {body['session_id']} "
            f"as applied (since {when(body['applied_at'])}).",
            body,
        )

    @tool("skill_feedback", "Give feedback on a skill", WRITE)
    async def skill_feedback(
        skill_id: SkillId,
        user_id: UserId,
        session_id: TaskSessionId,
        verdict: Annotated[
            Literal["helped", "hurt", "irrelevant"], Field(description="What the skill did for this task.")
        ],
        ctx: Context,
        reason: Annotated[str | None, Field(description="Why, in a sentence (at most 2000 characters).")] = None,
    ) -> CallToolResult:
        """Say whether a skill helped, hurt or was irrelevant to a task session, and why. The session must
        be one of this user's sessions you can read (add it first). Each call records one verdict, with you
        as its actor; the skill's effectiveness shows it."""
        body = await call(
            ctx,
            "skill_feedback",
            skill_id=skill_id,
            user_id=user_id,
            session_id=session_id,
            verdict=verdict,
            reason=reason,
        )
        return result(
            f"Recorded '{body['verdict']}' on skill {body['skill_id']} v{body['version']} for session "
            f"{body['session_id']}, by {body['actor']}.",
            body,
        )

    @tool("list_sessions", "List sessions", READ)
    async def list_sessions(
        ctx: Context,
        user_id: Annotated[str | None, Field(description="Only this user's sessions.")] = None,
        session_tag: SessionTag | None = None,
        status: Literal["open", "sealed"] | None = None,
        limit: Annotated[int, Field(ge=1, le=100)] = 20,
        offset: Annotated[int, Field(ge=0)] = 0,
    ) -> CallToolResult:
        """Stored sessions, most recent first, one page at a time."""
        page = await call(
            ctx, "list_sessions", user_id=user_id, session_tag=session_tag, status=status, limit=limit, offset=offset
        )
        end = offset + len(page["results"])
        body = {"count": page["count"], "next_offset": end if end < page["count"] else None, "results": page["results"]}
        return result(render_sessions(body, offset), body)

    @tool("get_session", "Read a session", READ)
    async def get_session(
        session_id: SessionId,
        user_id: UserId,
        ctx: Context,
        limit: Annotated[int, Field(ge=1, le=1000, description="Turns to return.")] = 100,
        offset: Annotated[int, Field(ge=0, description="Turns to skip from the start.")] = 0,
        scope: Annotated[
            str | None, Field(description="Only when the same session id exists in several scopes you read.")
        ] = None,
    ) -> CallToolResult:
        """One session with its transcript (turns in order, with ids)."""
        body = await call(
            ctx, "get_session", session_id=session_id, user_id=user_id, scope=scope, limit=limit, offset=offset
        )
        return result(render_session(body, offset), body)

    @tool("delete_memory", "Delete a memory", DESTRUCTIVE)
    async def delete_memory(
        memory_type: DeletableMemoryType,
        memory_id: Annotated[str, Field(description="The item's id, as search_memory or get_session show it.")],
        ctx: Context,
    ) -> CallToolResult:
        """Delete one stored item for good: a transcript turn, an episodic or semantic memory, or a skill."""
        await call(ctx, "delete_memory", memory_type=memory_type, memory_id=memory_id)
        body = {"deleted": True, "memory_type": memory_type, "id": memory_id}
        return result(f"Deleted {memory_type} {memory_id}.", body)

    @tool("erase_user", "Erase a user", DESTRUCTIVE)
    async def erase_user(user_id: UserId, ctx: Context) -> CallToolResult:
        """Erase everything stored about one person in the organisation (right to erasure). Irreversible;
        it runs in the background. Needs a key with the can_erase permission."""
        body = await call(ctx, "erase_user", user_id=user_id)
        return result(
            f"Erasure of user {user_id} accepted: erasure {body['erasure_id']}, status {body['status']}. "
            "Everything stored about this user is being deleted.",
            body,
        )

    @tool("get_context", "Get context", READ)
    async def get_context(
        user_id: UserId,
        ctx: Context,
        messages: Annotated[
            list[ChatMessage] | None,
            Field(description="The latest turns, oldest first; the context is for the last one with text."),
        ] = None,
        query: Annotated[str | None, Field(description="Instead of messages: what the context is for.")] = None,
        session_id: Annotated[
            str | None, Field(description="The current session; a task session adds its top skills.")
        ] = None,
        max_tokens: Annotated[
            int, Field(ge=64, le=100_000, description="Token budget of the block (estimated).")
        ] = 1500,
        memory_types: Annotated[
            list[ContextType] | None, Field(description="Use only these types (default all).")
        ] = None,
    ) -> CallToolResult:
        """What long-term memory knows that bears on the latest message, as a block ready for the prompt
        (who the user is, relevant facts, dated events, earlier turns, skills for a task), within a token
        budget. Each line is marked [n]; the structured result gives each item's id and type to cite."""
        body = await call(
            ctx,
            "get_context",
            user_id=user_id,
            messages=to_messages(messages) if messages else None,
            query=query,
            session_id=session_id,
            max_tokens=max_tokens,
            memory_types=memory_types,
        )
        return result(body["text"] or f"Memory holds nothing yet about user {user_id} for this.", body)

    @tool("list_memories", "List memories", READ)
    async def list_memories(
        memory_type: ManagedMemoryType,
        user_id: UserId,
        ctx: Context,
        subject: Annotated[str | None, Field(description="A fact's subject or an event's actor.")] = None,
        start: Annotated[str | None, Field(description="From this time (ISO 8601).")] = None,
        end: Annotated[str | None, Field(description="Until this time (ISO 8601).")] = None,
        q: Annotated[str | None, Field(description="Text the memory contains.")] = None,
        limit: Annotated[int, Field(ge=1, le=100)] = 20,
        offset: Annotated[int, Field(ge=0)] = 0,
    ) -> CallToolResult:
        """One user's learned facts (semantic) or dated events (episodic), newest first, one page at a time."""
        page = await call(
            ctx,
            "list_memories",
            memory_type=memory_type,
            user_id=user_id,
            subject=subject,
            start=start,
            end=end,
            q=q,
            limit=limit,
            offset=offset,
        )
        end_at = offset + len(page["results"])
        body = {
            "count": page["count"],
            "next_offset": end_at if end_at < page["count"] else None,
            "results": page["results"],
        }
        return result(render_memories(body, memory_type, offset), body)

    @tool("get_memory", "Read a memory", READ)
    async def get_memory(
        memory_type: ManagedMemoryType,
        memory_id: Annotated[str, Field(description="The memory's id.")],
        ctx: Context,
    ) -> CallToolResult:
        """One episodic or semantic memory with every field."""
        body = await call(ctx, "get_memory", memory_type=memory_type, memory_id=memory_id)
        return result(_memory_text(body), body)

    @tool("update_memory", "Correct a memory", EDIT)
    async def update_memory(
        memory_type: ManagedMemoryType,
        memory_id: Annotated[str, Field(description="The memory's id.")],
        ctx: Context,
        name: Annotated[str | None, Field(description="semantic: the subject.")] = None,
        summary: Annotated[str | None, Field(description="The statement itself.")] = None,
        details: Annotated[str | None, Field(description="More about it.")] = None,
        occurred_at: Annotated[str | None, Field(description="episodic: when it happened (ISO 8601).")] = None,
        time_granularity: Annotated[
            Literal["exact", "day", "week", "month", "year"] | None,
            Field(description="episodic: how precise occurred_at is."),
        ] = None,
        reason: Annotated[str | None, Field(description="Why, for the memory's history.")] = None,
    ) -> CallToolResult:
        """Correct a learned fact or event. The change is kept in the memory's history, and what was derived
        from it (profile pages, entity links) is updated."""
        fields = {
            "name": name,
            "summary": summary,
            "details": details,
            "occurred_at": occurred_at,
            "time_granularity": time_granularity,
            "reason": reason,
        }
        body = await call(
            ctx,
            "update_memory",
            memory_type=memory_type,
            memory_id=memory_id,
            **{key: value for key, value in fields.items() if value is not None},
        )
        return result("Updated. " + _memory_text(body), body)

    @tool("memory_history", "Memory history", READ)
    async def memory_history(
        memory_type: ManagedMemoryType,
        memory_id: Annotated[str, Field(description="The memory's id.")],
        ctx: Context,
    ) -> CallToolResult:
        """Every change of a memory: who made it, when, and its value before and after."""
        body = await call(ctx, "memory_history", memory_type=memory_type, memory_id=memory_id)
        return result(render_history(body), body)

    @tool("get_profile", "Read a profile", READ)
    async def get_profile(
        profile_id: Annotated[str, Field(description="The profile's id, as get_context or search_memory show it.")],
        ctx: Context,
    ) -> CallToolResult:
        """The compiled page about one person in a user's memory, with its sources and revisions."""
        body = await call(ctx, "get_profile", profile_id=profile_id)
        return result(
            f"Profile of {body['name']} (revision {body['revision']}, {body['status']}):\n{body['markdown']}", body
        )

    @tool("list_entities", "List entities", READ)
    async def list_entities(
        user_id: UserId,
        ctx: Context,
        kind: Annotated[Literal["person", "place", "organization"] | None, Field(description="Only this kind.")] = None,
        limit: Annotated[int, Field(ge=1, le=100)] = 20,
        offset: Annotated[int, Field(ge=0)] = 0,
    ) -> CallToolResult:
        """The people, places and organisations one user's memory names, most mentioned first, with who
        appears with whom."""
        page = await call(ctx, "list_entities", user_id=user_id, kind=kind, limit=limit, offset=offset)
        end_at = offset + len(page["results"])
        body = {
            "count": page["count"],
            "next_offset": end_at if end_at < page["count"] else None,
            "results": page["results"],
        }
        return result(render_entities(body, offset), body)

    @tool("delete_session", "Delete a session", DESTRUCTIVE)
    async def delete_session(
        session_id: SessionId,
        user_id: UserId,
        ctx: Context,
        scope: Annotated[
            str | None, Field(description="Only when the same session id exists in several scopes you read.")
        ] = None,
    ) -> CallToolResult:
        """Delete a whole session for good: its turns and everything learned only from it (facts, events,
        lessons; skills and profile pages built on them are updated). Irreversible; it runs in the background."""
        body = await call(ctx, "delete_session", session_id=session_id, user_id=user_id, scope=scope)
        return result(
            f"Deletion of session {body['session_id']} accepted: task {body['task_id']}, status {body['status']}.", body
        )

    @tool("consolidate_memories", "Consolidate memories", DESTRUCTIVE)
    async def consolidate_memories(
        ctx: Context,
        user_id: Annotated[
            str | None,
            Field(description="The person whose memories to consolidate; omit for every user of your scope."),
        ] = None,
        dry_run: Annotated[bool, Field(description="Only report what would change.")] = False,
    ) -> CallToolResult:
        """Merge duplicate and paraphrased facts and events into one, and resolve contradicting facts (the
        outdated one is retired; without a model they are flagged for review). Merged and retired memories
        are hidden from search but kept with their history. Runs in the background: the task's result
        lists what changed; try dry_run first."""
        body = await call(ctx, "consolidate_memories", user_id=user_id, dry_run=dry_run)
        what = "Dry run" if body["dry_run"] else "Consolidation"
        return result(f"{what} accepted: task {body['task_id']}, status {body['status']}.", body)

    return server


def result(text: str, structured: dict) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=structured)


def error_text(exc: APIError) -> str:
    lead = {401: "Not authenticated", 403: "Refused", 404: "Not found", 409: "Conflict"}.get(exc.status, "Failed")
    message = exc.message if exc.message.endswith(".") else exc.message + "."
    return f"{lead} ({exc.status} {exc.code}): {message}"


def clip(text: Any, limit: int = CLIP) -> str:
    text = " ".join(str(text or "").split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def when(value: str | None) -> str:
    """An ISO timestamp to the minute, in the platform's time zone (UTC)."""
    return value[:16].replace("T", " ") if value else "-"


def render_add(body: dict) -> str:
    first, last = body.get("first_seq"), body.get("last_seq")
    seqs = "" if first is None else f", turn #{first}" if first == last else f", turns #{first}–#{last}"
    text = (
        f"Stored {body['messages_stored']} turn(s) in session {body['session_id']} of user {body['user_id']} "
        f"({body['session_tag']}, {body['status']}){seqs}; {len(body.get('task_ids') or [])} background task(s) queued."
    )
    if body.get("messages_truncated"):
        text += f" {body['messages_truncated']} turn(s) were cut to the size limit."
    return text


def _hit_text(hit: dict) -> str:
    kind = hit["memory_type"]
    if kind == "message":
        speaker = hit["role"] + (f" {hit['name']}" if hit.get("name") else "")
        return f"{when(hit.get('occurred_at'))} session {hit['session_id']} #{hit['seq']} {speaker}: {clip(hit['content'])}"
    if kind == "episodic":
        return f"{when(hit.get('occurred_at'))} {clip(hit['summary'])}"
    if kind == "semantic":
        return f"{hit['name']}: {clip(hit['summary'])} (updated {when(hit.get('updated_at'))})"
    if kind == "procedural":
        return f"skill {hit['name']} ({hit['entry_type']}, v{hit['version']}): {clip(hit['description'])}"
    if kind == "profile":
        return f"profile of {hit['name']} (revision {hit['revision']}): {clip(hit['markdown'])}"
    if kind == "experience":
        return f"lesson {clip(hit['title'], 120)}: {clip(hit['content'])} ({when(hit.get('created_at'))})"
    return clip(hit)


def render_search(body: dict) -> str:
    hits = body["results"]
    if not hits:
        return f"No results for {body['query']!r}."
    lines = [f"{len(hits)} result(s) for {body['query']!r}:"]
    for number, hit in enumerate(hits, 1):
        lines.append(f"{number}. [{hit['memory_type']}] id={hit['id']} score={hit['score']:.4f} {_hit_text(hit)}")
    return "\n".join(lines)


def render_skills(body: dict) -> str:
    skills = body["skills"]
    if not skills:
        return f"No skills match {body['task']!r}."
    lines = [f"{len(skills)} skill(s) for {body['task']!r}:"]
    for number, skill in enumerate(skills, 1):
        lines.append(
            f"{number}. {skill['name']} ({skill['entry_type']}, v{skill['version']}, score {skill['score']:.4f}, "
            f"effectiveness ×{skill['effectiveness_factor']:.2f}) "
            f"id={skill['id']}\n   {clip(skill['description'])}\n   Instructions: {clip(skill['instructions'], 1200)}"
        )
    return "\n".join(lines)


def render_sessions(body: dict, offset: int) -> str:
    sessions = body["results"]
    if not sessions:
        return f"No sessions ({body['count']} in all)."
    lines = [f"{body['count']} session(s); showing {offset + 1}–{offset + len(sessions)}:"]
    for session in sessions:
        lines.append(
            f"- {session['session_id']} · user {session['user_id']} · {session['session_tag']} · {session['status']}"
            f" · outcome {session['outcome']} · {session['message_count']} turn(s) · last {when(session['last_message_at'])}"
        )
    if body["next_offset"] is not None:
        lines.append(f"More with offset={body['next_offset']}.")
    return "\n".join(lines)


def render_session(body: dict, offset: int) -> str:
    messages = body["messages"]
    lines = [
        f"Session {body['session_id']} of user {body['user_id']} ({body['session_tag']}, {body['status']}, "
        f"outcome {body['outcome']}), {body['message_count']} turn(s)"
        + (f"; showing {offset + 1}–{offset + len(messages)}:" if messages else "; no turns in this range.")
    ]
    for message in messages:
        speaker = message["role"] + (f" {message['name']}" if message.get("name") else "")
        calls = message.get("tool_calls") or []
        names = [str((call.get("function") or {}).get("name", "?")) for call in calls if isinstance(call, dict)]
        called = f" [calls {', '.join(names)}]" if names else ""
        lines.append(
            f"#{message['seq']} {when(message['occurred_at'])} {speaker}{called}: "
            f"{clip(message['content'], TRANSCRIPT_CLIP)} (id={message['id']})"
        )
    if body.get("messages_next_offset") is not None:
        lines.append(f"More with offset={body['messages_next_offset']}.")
    return "\n".join(lines)


def _memory_text(memory: dict) -> str:
    if memory["memory_type"] == "episodic":
        actor = f"{memory['actor']}: " if memory.get("actor") else ""
        line = f"{when(memory.get('occurred_at'))} {actor}{clip(memory['summary'])}"
    else:
        line = f"{memory['name']}: {clip(memory['summary'])}"
    return f"[{memory['memory_type']}] id={memory['id']} {line}"


def render_memories(body: dict, memory_type: str, offset: int) -> str:
    memories = body["results"]
    if not memories:
        return f"No {memory_type} memories ({body['count']} in all)."
    lines = [
        f"{body['count']} {memory_type} memor{'y' if body['count'] == 1 else 'ies'}; showing {offset + 1}–{offset + len(memories)}:"
    ]
    lines += [f"- {_memory_text(memory)}" for memory in memories]
    if body["next_offset"] is not None:
        lines.append(f"More with offset={body['next_offset']}.")
    return "\n".join(lines)


def render_history(body: dict) -> str:
    lines = [f"{len(body['changes'])} change(s) of {body['memory_type']} memory {body['id']}:"]
    for change in body["changes"]:
        after = change.get("new_value") or {}
        summary = clip(after.get("summary", ""), 120) if after else "(deleted)"
        reason = f" ({clip(change['reason'], 120)})" if change.get("reason") else ""
        lines.append(f"- {when(change['created_at'])} {change['operation']} by {change['actor']}{reason}: {summary}")
    return "\n".join(lines)


def render_entities(body: dict, offset: int) -> str:
    entities = body["results"]
    if not entities:
        return f"No entities ({body['count']} in all)."
    lines = [
        f"{body['count']} entit{'y' if body['count'] == 1 else 'ies'}; showing {offset + 1}–{offset + len(entities)}:"
    ]
    for entity in entities:
        peers = ", ".join(f"{edge['name']} ×{edge['weight']}" for edge in entity.get("edges", [])[:5])
        lines.append(
            f"- {entity['name']} ({entity['kind']}, {entity['mention_count']} mention(s)) id={entity['id']}"
            + (f"; with {peers}" if peers else "")
        )
    if body["next_offset"] is not None:
        lines.append(f"More with offset={body['next_offset']}.")
    return "\n".join(lines)

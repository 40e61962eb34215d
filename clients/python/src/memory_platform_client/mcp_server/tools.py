"""The MCP tools of both transports, built from the tool table (memory_platform_client.contract):
each tool's name, argument schema, annotations and description come from its row; what is written
here is how each answer reads to a model. Each tool makes one call on a backend: the platform's own
operations behind `/mcp`, or the SDK over the REST API behind the stdio server. Either backend
returns the REST API's JSON and raises this package's `APIError`s, so both transports answer alike,
errors included."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Annotated, Any, Literal, Protocol

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

from memory_platform_client.contract import TOOLS, Arg, Tool
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

ANNOTATIONS = {
    "read": ToolAnnotations(read_only_hint=True, open_world_hint=False),
    "write": ToolAnnotations(
        read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
    ),
    "edit": ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False),
    "destructive": ToolAnnotations(
        read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
    ),
}
SCALARS = {"string": str, "datetime": str, "integer": int, "boolean": bool, "object": dict[str, Any]}


class Backend(Protocol):
    async def call(self, tool: Tool, arguments: dict[str, Any]) -> Any:
        """The REST API's JSON for the tool's endpoint, called with `arguments` (the tool's arguments
        that were given, by their table names); None for an answer without a body."""


BackendFor = Callable[[Context], Backend]


def build_server(backend_for: BackendFor, *, name: str = SERVER_NAME, version: str = "") -> MCPServer:
    """An MCPServer with a tool per row of the table; `backend_for(ctx)` gives the backend of one call
    (on the platform it is the caller's, resolved from the request's API key)."""
    server = MCPServer(name, instructions=INSTRUCTIONS, version=version)
    for tool in TOOLS:
        server.add_tool(
            tool_function(tool, backend_for),
            name=tool.name,
            title=tool.title,
            description=tool.description,
            annotations=ANNOTATIONS[tool.effect],
        )
    return server


def argument_type(arg: Arg) -> tuple[Any, Any]:
    """The annotation and default of a tool's parameter: the JSON Schema MCP publishes and pydantic
    checks comes from these."""
    if arg.type == "messages":
        base: Any = list[ChatMessage]
    else:
        base = Literal[arg.enum] if arg.enum else SCALARS[arg.type]
        if arg.type == "datetime":
            base = Annotated[base, Field(json_schema_extra={"format": "date-time"})]
        if arg.many:
            base = list[base]
    is_list = arg.many or arg.type == "messages"
    bounds = {"min_length" if is_list else "ge": arg.minimum, "max_length" if is_list else "le": arg.maximum}
    bounds = {key: value for key, value in bounds.items() if value is not None}
    if bounds:
        base = Annotated[base, Field(**bounds)]
    described = Field(description=arg.description)
    if arg.required:
        return Annotated[base, described], inspect.Parameter.empty
    default = arg.default_for_tool
    if default is None:
        return Annotated[base | None, described], None
    return Annotated[base, described], default


def tool_function(tool: Tool, backend_for: BackendFor):
    """The tool's function for MCPServer: its signature is the table's arguments (and the context)."""
    present = PRESENTERS[tool.name]
    messages = {arg.name for arg in tool.tool_args if arg.type == "messages"}

    async def run(ctx: Context, **given) -> CallToolResult:
        # Unset arguments are left out, as a REST client leaves them out.
        arguments = {
            name: to_messages(value) if name in messages else value
            for name, value in given.items()
            if value is not None
        }
        try:
            body = await backend_for(ctx).call(tool, arguments)
        except APIError as exc:
            raise ToolError(error_text(exc)) from exc
        except APIConnectionError as exc:
            raise ToolError(f"The memory platform could not be reached: {exc}") from exc
        return present(body, arguments)

    parameters = [inspect.Parameter("ctx", inspect.Parameter.KEYWORD_ONLY, annotation=Context)]
    for arg in tool.tool_args:
        annotation, default = argument_type(arg)
        parameters.append(
            inspect.Parameter(arg.name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation, default=default)
        )
    run.__name__ = run.__qualname__ = tool.name
    run.__signature__ = inspect.Signature(parameters, return_annotation=CallToolResult)
    run.__annotations__ = {parameter.name: parameter.annotation for parameter in parameters} | {
        "return": CallToolResult
    }
    return run


# What each tool's answer reads like -----------------------------------------------------------------


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
    """A hit's line: its `text` (every hit has one), after what places it (date, session, kind)."""
    kind, text = hit["memory_type"], clip(hit["text"])
    if kind == "message":
        speaker = hit["role"] + (f" {hit['name']}" if hit.get("name") else "")
        return f"{when(hit.get('occurred_at'))} session {hit['session_id']} #{hit['seq']} {speaker}: {text}"
    if kind == "episodic":
        return f"{when(hit.get('occurred_at'))} {text}"
    if kind == "semantic":
        return f"{text} (updated {when(hit.get('updated_at'))})"
    if kind == "procedural":
        return f"skill ({hit['entry_type']}, v{hit['version']}) {text}"
    if kind in ("profile", "topic"):
        what = "profile of" if kind == "profile" else "topic"
        return f"{what} {hit['name']} (revision {hit['revision']}): {text}"
    if kind == "experience":
        return f"lesson {text} ({when(hit.get('created_at'))})"
    return text


def render_search(body: dict) -> str:
    hits, window = body["results"], body.get("time_window")
    when_named = (
        f" ({window['expression']!r}: {window['start']} to {window['end']}, {window['mode']})" if window else ""
    )
    if not hits:
        return f"No results for {body['query']!r}{when_named}."
    lines = [f"{len(hits)} result(s) for {body['query']!r}{when_named}:"]
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


def paged(page: dict, offset: int) -> dict:
    """A list endpoint's page as a tool answers it: the offset of the next page instead of links."""
    end = offset + len(page["results"])
    return {"count": page["count"], "next_offset": end if end < page["count"] else None, "results": page["results"]}


def present_sessions(page: dict, arguments: dict) -> CallToolResult:
    body = paged(page, arguments["offset"])
    return result(render_sessions(body, arguments["offset"]), body)


def present_memories(page: dict, arguments: dict) -> CallToolResult:
    body = paged(page, arguments["offset"])
    return result(render_memories(body, arguments["memory_type"], arguments["offset"]), body)


def present_entities(page: dict, arguments: dict) -> CallToolResult:
    body = paged(page, arguments["offset"])
    return result(render_entities(body, arguments["offset"]), body)


def present_deletion(_body: None, arguments: dict) -> CallToolResult:
    body = {"deleted": True, "memory_type": arguments["memory_type"], "id": arguments["memory_id"]}
    return result(f"Deleted {arguments['memory_type']} {arguments['memory_id']}.", body)


def present_context(body: dict, arguments: dict) -> CallToolResult:
    return result(body["text"] or f"Memory holds nothing yet about user {arguments['user_id']} for this.", body)


PRESENTERS: dict[str, Callable[[Any, dict], CallToolResult]] = {
    "add_memory": lambda body, _: result(render_add(body), body),
    "search_memory": lambda body, _: result(render_search(body), body),
    "retrieve_skills": lambda body, _: result(render_skills(body), body),
    "apply_skill": lambda body, _: result(
        f"Marked {body['applied']} use(s) of skill {body['skill_id']} in session {body['session_id']} "
        f"as applied (since {when(body['applied_at'])}).",
        body,
    ),
    "skill_feedback": lambda body, _: result(
        f"Recorded '{body['verdict']}' on skill {body['skill_id']} v{body['version']} for session "
        f"{body['session_id']}, by {body['actor']}.",
        body,
    ),
    "list_sessions": present_sessions,
    "get_session": lambda body, arguments: result(render_session(body, arguments["offset"]), body),
    "delete_memory": present_deletion,
    "erase_user": lambda body, arguments: result(
        f"Erasure of user {arguments['user_id']} accepted: erasure {body['erasure_id']}, status {body['status']}. "
        "Everything stored about this user is being deleted.",
        body,
    ),
    "get_context": present_context,
    "list_memories": present_memories,
    "get_memory": lambda body, _: result(_memory_text(body), body),
    "update_memory": lambda body, _: result("Updated. " + _memory_text(body), body),
    "memory_history": lambda body, _: result(render_history(body), body),
    "get_profile": lambda body, _: result(
        f"Profile of {body['name']} (revision {body['revision']}, {body['status']}):\n{body['markdown']}", body
    ),
    "list_entities": present_entities,
    "delete_session": lambda body, _: result(
        f"Deletion of session {body['session_id']} accepted: task {body['task_id']}, status {body['status']}.", body
    ),
    "consolidate_memories": lambda body, _: result(
        f"{'Dry run' if body['dry_run'] else 'Consolidation'} accepted: task {body['task_id']}, "
        f"status {body['status']}.",
        body,
    ),
}

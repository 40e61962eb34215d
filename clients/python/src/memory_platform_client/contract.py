"""The agent tools, declared once. Each `Tool` is one REST endpoint offered to agents as a tool: its
name, its REST call (method, path under /api/v1/, OpenAPI operation id), its arguments and its
result. Both MCP servers (the platform's /mcp and `memory-platform-mcp` over stdio) build their tool
schemas from this table (mcp_server.tools); the stdio server calls the SDK method a tool names; the
platform's /mcp calls the operation its REST endpoint calls (apps.mcp_server.backend).
tests/mcp_server/test_contract.py holds the table against the platform's OpenAPI schema, the SDK's method
signatures and what each SDK method sends, and both servers' tool lists.

Plain data: importable without the `mcp` extra and without the platform.
`python -m memory_platform_client.contract` prints the table as docs/api.md shows it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

ArgType = Literal["string", "datetime", "integer", "boolean", "object", "messages"]
Where = Literal["path", "query", "body", "header"]
Effect = Literal["read", "write", "edit", "destructive"]


@dataclass(frozen=True)
class Arg:
    """One argument of a tool, as REST, the SDK and MCP all name it.

    `default` is what the platform does without it (the OpenAPI default); `tool_default` is the page
    size an MCP tool asks for when the model does not say (a model reads pages, a program walks them).
    `minimum`/`maximum` bound an integer's value or a list's length on every side; a maximum the
    platform takes from a setting is left to the platform. `rest_name` is the name in the path, query
    or header when REST spells it differently. `only_for`: the values of the tool's path selector
    (`memory_type`) whose endpoint takes it. `tool=False`: the SDK's and REST's only, not offered to
    a model (tags and idempotency keys are the application's bookkeeping)."""

    name: str
    type: ArgType
    description: str
    required: bool = False
    where: Where = "body"
    enum: tuple[str, ...] = ()
    many: bool = False
    minimum: int | None = None
    maximum: int | None = None
    default: Any = None
    tool_default: Any = None
    rest_name: str = ""
    only_for: tuple[str, ...] = ()
    tool: bool = True

    @property
    def wire_name(self) -> str:
        return self.rest_name or self.name

    @property
    def default_for_tool(self) -> Any:
        return self.default if self.tool_default is None else self.tool_default


@dataclass(frozen=True)
class Endpoint:
    """One REST endpoint of a tool: a tool whose path names a `memory_type` has one per type."""

    method: str
    path: str
    operation_id: str
    result: str | None
    selected: dict[str, str]


@dataclass(frozen=True)
class Tool:
    """One agent tool. `path` is under /api/v1/, with `{name}` for path arguments (REST's names);
    `operation_id` and `result` (the OpenAPI component answered with `status`; None: no body) may
    name the selector too, `{memory_type}` (`{MemoryType}` capitalised in `result`). `sdk` is the
    `MemoryClient` method, dotted for a sub-client (`memories.page`)."""

    name: str
    title: str
    description: str
    effect: Effect
    method: str
    path: str
    operation_id: str
    status: int
    result: str | None
    sdk: str
    args: tuple[Arg, ...]

    @property
    def tool_args(self) -> tuple[Arg, ...]:
        return tuple(arg for arg in self.args if arg.tool)

    @property
    def selector(self) -> Arg | None:
        """The path argument that picks one of several endpoints (`memory_type`), if any."""
        return next((arg for arg in self.args if arg.where == "path" and arg.enum), None)

    def arg(self, name: str) -> Arg:
        return next(arg for arg in self.args if arg.name == name)

    def endpoints(self) -> list[Endpoint]:
        selector = self.selector
        if selector is None:
            return [Endpoint(self.method, self.path, self.operation_id, self.result, {})]
        name = selector.name
        return [
            Endpoint(
                self.method,
                self.path.replace(f"{{{name}}}", value),
                self.operation_id.replace(f"{{{name}}}", value),
                self.result.replace("{MemoryType}", value.capitalize()) if self.result else None,
                {name: value},
            )
            for value in selector.enum
        ]


def sdk_method(client: Any, tool: Tool):
    """The bound method of a `MemoryClient` or `AsyncMemoryClient` that makes the tool's REST call."""
    method = client
    for part in tool.sdk.split("."):
        method = getattr(method, part)
    return method


# Arguments several tools share --------------------------------------------------------------------

SESSION_TAGS = ("conversation", "task")
SEARCH_TYPES = ("message", "episodic", "semantic", "procedural", "experience", "profile", "topic")
CONTEXT_TYPES = ("profile", "semantic", "episodic", "message", "procedural")
DELETABLE_TYPES = ("message", "episodic", "semantic", "procedural")
MANAGED_TYPES = ("episodic", "semantic")
SAME_ID_SCOPES = "Only when the same session id exists in several scopes you read."


def user_id(where: Where = "body", **options) -> Arg:
    return Arg(
        "user_id",
        "string",
        "Your application's id of the person (end user) the memory is about.",
        required=True,
        where=where,
        **options,
    )


def session_id(description: str = "The conversation or task id: 1-64 letters, digits, '_' or '-'.", **options) -> Arg:
    return Arg("session_id", "string", description, **{"required": True, **options})


def page_args(*, maximum: int = 100) -> tuple[Arg, ...]:
    return (
        Arg("limit", "integer", "Items per page.", where="query", minimum=1, maximum=maximum, tool_default=20),
        Arg("offset", "integer", "Items to skip.", where="query", minimum=0, tool_default=0),
    )


def managed_type(description: str = "semantic = facts, episodic = dated events.") -> Arg:
    return Arg("memory_type", "string", description, required=True, where="path", enum=MANAGED_TYPES)


MEMORY_ID = Arg("memory_id", "string", "The memory's id.", required=True, where="path", rest_name="item_id")
SKILL_ID = Arg("skill_id", "string", "The skill's id, as retrieve_skills shows it.", required=True, where="path")
TASK_SESSION = session_id("The task session that retrieved the skill (the session_id given to retrieve_skills).")
FILTER_TAGS = Arg("filter_tags", "object", "Tags of the session (a flat JSON object).", tool=False)


TOOLS: tuple[Tool, ...] = (
    Tool(
        name="add_memory",
        title="Add to memory",
        description="Store turns of a conversation or task session in long-term memory. Later turns of the same "
        "session_id are appended; the platform extracts facts and events, or skills, in the background.",
        effect="write",
        method="POST",
        path="memory/add",
        operation_id="v1_memory_add_create",
        status=202,
        result="MemoryAddOutput",
        sdk="add",
        args=(
            user_id(),
            session_id(),
            Arg("messages", "messages", "The turns to store, oldest first.", required=True, minimum=1),
            Arg(
                "session_tag",
                "string",
                "'conversation' (with a person; default) or 'task' (tool work, distilled into skills).",
                enum=SESSION_TAGS,
            ),
            Arg("seal", "boolean", "Close the session after these turns.", default=False),
            Arg("outcome", "string", "How a task session ended.", enum=("success", "failure", "unknown")),
            Arg("occurred_at", "datetime", "When the turns happened, for those that carry no date (ISO 8601)."),
            FILTER_TAGS,
            Arg(
                "idempotency_key",
                "string",
                "Makes a retried add store its turns once (the SDK sends a fresh one per call).",
                where="header",
                rest_name="Idempotency-Key",
                tool=False,
            ),
        ),
    ),
    Tool(
        name="search_memory",
        title="Search memory",
        description="Search one user's memories (facts, events, transcript turns, skills, lessons, profiles, "
        "topic pages) by meaning and keywords.",
        effect="read",
        method="POST",
        path="memory/search",
        operation_id="v1_memory_search_create",
        status=200,
        result="SearchOutput",
        sdk="search",
        args=(
            user_id(),
            Arg("query", "string", "What to look for; empty lists the most recent items.", default=""),
            Arg(
                "memory_types",
                "string",
                "Default: every type. message = transcript turns, episodic = dated events, semantic = facts, "
                "procedural = skills, experience = distilled lessons, profile = compiled pages about people, "
                "topic = compiled pages about topics.",
                enum=SEARCH_TYPES,
                many=True,
                minimum=1,
            ),
            Arg(
                "search_method",
                "string",
                "Default: the best for each type.",
                enum=("bm25", "embedding", "hybrid", "fuzzy"),
            ),
            Arg("limit", "integer", "How many results.", minimum=1, maximum=100, default=10),
            Arg("session_id", "string", "Only this session's items."),
            Arg("session_tag", "string", "Only items of conversation or of task sessions.", enum=SESSION_TAGS),
            Arg("start", "datetime", "Only items from this time (ISO 8601)."),
            Arg("end", "datetime", "Only items until this time (ISO 8601)."),
            Arg(
                "time_window",
                "string",
                "What a time named in the query ('last May') does: filter to those days, boost them, or "
                "off. Default: the platform's SEARCH_TIME_WINDOW.",
                enum=("filter", "boost", "off"),
            ),
            FILTER_TAGS,
        ),
    ),
    Tool(
        name="retrieve_skills",
        title="Retrieve skills",
        description="The learned procedures (skills) most relevant to a task, with their instructions: call it "
        "before acting.",
        effect="read",
        method="POST",
        path="skills/retrieve",
        operation_id="v1_skills_retrieve_create",
        status=200,
        result="SkillRetrieveOutput",
        sdk="retrieve_skills",
        args=(
            Arg("task", "string", "The task at hand, in a sentence or two.", required=True),
            Arg("k", "integer", "How many skills.", minimum=1, maximum=50, default=5),
            Arg(
                "user_id",
                "string",
                "The end user the agent acts for: also the skills this user taught. Without it, only the skills "
                "shared by the whole scope.",
            ),
            session_id(
                "The task session the skills serve (with user_id): its outcome, once sealed, counts for or against "
                "each skill returned.",
                required=False,
            ),
        ),
    ),
    Tool(
        name="apply_skill",
        title="Mark a skill applied",
        description="Report that you followed a skill that retrieve_skills returned for this task session: the "
        "session's outcome then counts for the skill as applied, not only as retrieved (also when it was not "
        "among the top few results, which count anyway). Marking it again changes nothing.",
        effect="edit",
        method="POST",
        path="skills/{skill_id}/uses",
        operation_id="v1_skills_uses_create",
        status=200,
        result="SkillUseOutput",
        sdk="apply_skill",
        args=(SKILL_ID, user_id(), TASK_SESSION),
    ),
    Tool(
        name="skill_feedback",
        title="Give feedback on a skill",
        description="Say whether a skill helped, hurt or was irrelevant to a task session, and why. The session "
        "must be one of this user's sessions you can read (add it first). Each call records one verdict, with "
        "you as its actor; the skill's effectiveness shows it.",
        effect="write",
        method="POST",
        path="skills/{skill_id}/feedback",
        operation_id="v1_skills_feedback_create",
        status=201,
        result="SkillFeedbackOutput",
        sdk="skill_feedback",
        args=(
            SKILL_ID,
            user_id(),
            TASK_SESSION,
            Arg(
                "verdict",
                "string",
                "What the skill did for this task.",
                required=True,
                enum=("helped", "hurt", "irrelevant"),
            ),
            Arg("reason", "string", "Why, in a sentence (at most 2000 characters).", default=""),
        ),
    ),
    Tool(
        name="list_sessions",
        title="List sessions",
        description="Stored sessions, most recent first, one page at a time.",
        effect="read",
        method="GET",
        path="sessions/",
        operation_id="v1_sessions_list",
        status=200,
        result="PaginatedSessionOutputList",
        sdk="sessions.page",
        args=(
            Arg("user_id", "string", "Only this user's sessions.", where="query"),
            Arg("session_tag", "string", "Only conversation or only task sessions.", where="query", enum=SESSION_TAGS),
            Arg("status", "string", "Only open or only sealed sessions.", where="query", enum=("open", "sealed")),
            Arg("start", "datetime", "Only sessions active since this time (ISO 8601).", where="query"),
            Arg("end", "datetime", "Only sessions active until this time (ISO 8601).", where="query"),
            *page_args(),
        ),
    ),
    Tool(
        name="get_session",
        title="Read a session",
        description="One session with its transcript (turns in order, with ids).",
        effect="read",
        method="GET",
        path="sessions/{session_id}/",
        operation_id="v1_sessions_retrieve",
        status=200,
        result="SessionDetailOutput",
        sdk="sessions.get",
        args=(
            session_id(where="path"),
            user_id(where="query"),
            Arg(
                "limit",
                "integer",
                "Turns to return.",
                where="query",
                minimum=1,
                maximum=1000,
                default=200,
                tool_default=100,
            ),
            Arg("offset", "integer", "Turns to skip from the start.", where="query", minimum=0, default=0),
            Arg("scope", "string", SAME_ID_SCOPES, where="query"),
        ),
    ),
    Tool(
        name="delete_memory",
        title="Delete a memory",
        description="Delete one stored item for good: a transcript turn, an episodic or semantic memory, or a skill.",
        effect="destructive",
        method="DELETE",
        path="memory/{memory_type}/{item_id}",
        operation_id="v1_memory_{memory_type}_destroy",
        status=204,
        result=None,
        sdk="delete_memory",
        args=(
            Arg(
                "memory_type",
                "string",
                "message = a transcript turn, episodic = an event, semantic = a fact, procedural = a skill.",
                required=True,
                where="path",
                enum=DELETABLE_TYPES,
            ),
            Arg(
                "memory_id",
                "string",
                "The item's id, as search_memory or get_session show it.",
                required=True,
                where="path",
                rest_name="item_id",
            ),
        ),
    ),
    Tool(
        name="erase_user",
        title="Erase a user",
        description="Erase everything stored about one person in the organisation (right to erasure). "
        "Irreversible; it runs in the background. Needs a key with the can_erase permission.",
        effect="destructive",
        method="DELETE",
        path="users/{user_id}/memories",
        operation_id="v1_users_memories_destroy",
        status=202,
        result="ErasureAcceptedOutput",
        sdk="erase_user",
        args=(user_id(where="path"),),
    ),
    Tool(
        name="get_context",
        title="Get context",
        description="What long-term memory knows that bears on the latest message, as a block ready for the prompt "
        "(who the user is, relevant facts, dated events, earlier turns, skills for a task), within a token "
        "budget. Each line is marked [n]; the structured result gives each item's id and type to cite.",
        effect="read",
        method="POST",
        path="memory/context",
        operation_id="v1_memory_context_create",
        status=200,
        result="ContextOutput",
        sdk="context",
        args=(
            user_id(),
            Arg(
                "messages",
                "messages",
                "The latest turns, oldest first; the context is for the last one with text.",
                minimum=1,
            ),
            Arg("query", "string", "Instead of messages: what the context is for; empty: the most recent items."),
            session_id("The current session; a task session adds its top skills.", required=False),
            Arg("scope", "string", "The session's scope: " + SAME_ID_SCOPES.lower()),
            Arg("max_tokens", "integer", "Token budget of the block (estimated).", minimum=64, default=1500),
            Arg(
                "memory_types",
                "string",
                "Use only these types (default all).",
                enum=CONTEXT_TYPES,
                many=True,
                minimum=1,
            ),
        ),
    ),
    Tool(
        name="list_memories",
        title="List memories",
        description="One user's learned facts (semantic) or dated events (episodic), newest first, one page at a time.",
        effect="read",
        method="GET",
        path="memory/{memory_type}/",
        operation_id="v1_memory_{memory_type}_list",
        status=200,
        result="Paginated{MemoryType}MemoryOutputList",
        sdk="memories.page",
        args=(
            managed_type(),
            user_id(where="query"),
            Arg("subject", "string", "A fact's subject or an event's actor.", where="query"),
            Arg("start", "datetime", "From this time (ISO 8601).", where="query"),
            Arg("end", "datetime", "Until this time (ISO 8601).", where="query"),
            Arg("q", "string", "Text the memory contains.", where="query"),
            *page_args(),
        ),
    ),
    Tool(
        name="get_memory",
        title="Read a memory",
        description="One episodic or semantic memory with every field.",
        effect="read",
        method="GET",
        path="memory/{memory_type}/{item_id}",
        operation_id="v1_memory_{memory_type}_retrieve",
        status=200,
        result="{MemoryType}MemoryOutput",
        sdk="memories.get",
        args=(managed_type(), MEMORY_ID),
    ),
    Tool(
        name="update_memory",
        title="Correct a memory",
        description="Correct a learned fact or event. The change is kept in the memory's history, and what was "
        "derived from it (profile pages, entity links) is updated.",
        effect="edit",
        method="PATCH",
        path="memory/{memory_type}/{item_id}",
        operation_id="v1_memory_{memory_type}_partial_update",
        status=200,
        result="{MemoryType}MemoryOutput",
        sdk="memories.update",
        args=(
            managed_type(),
            MEMORY_ID,
            Arg("name", "string", "semantic: the subject.", only_for=("semantic",)),
            Arg("summary", "string", "The statement itself."),
            Arg("details", "string", "More about it."),
            Arg("occurred_at", "datetime", "episodic: when it happened (ISO 8601).", only_for=("episodic",)),
            Arg(
                "time_granularity",
                "string",
                "episodic: how precise occurred_at is.",
                enum=("exact", "day", "week", "month", "year"),
                only_for=("episodic",),
            ),
            Arg("reason", "string", "Why, for the memory's history."),
        ),
    ),
    Tool(
        name="memory_history",
        title="Memory history",
        description="Every change of a memory: who made it, when, and its value before and after.",
        effect="read",
        method="GET",
        path="memory/{memory_type}/{item_id}/history",
        operation_id="v1_memory_{memory_type}_history_retrieve",
        status=200,
        result="MemoryHistoryOutput",
        sdk="memories.history",
        args=(managed_type(), MEMORY_ID),
    ),
    Tool(
        name="get_profile",
        title="Read a profile",
        description="The compiled page about one person in a user's memory, with its sources and revisions.",
        effect="read",
        method="GET",
        path="profiles/{profile_id}/",
        operation_id="v1_profiles_retrieve",
        status=200,
        result="ProfileDetailOutput",
        sdk="profiles.get",
        args=(
            Arg(
                "profile_id",
                "string",
                "The profile's id, as get_context or search_memory show it.",
                required=True,
                where="path",
            ),
        ),
    ),
    Tool(
        name="list_entities",
        title="List entities",
        description="The people, places and organisations one user's memory names, most mentioned first, with "
        "who appears with whom.",
        effect="read",
        method="GET",
        path="entities/",
        operation_id="v1_entities_list",
        status=200,
        result="PaginatedEntityOutputList",
        sdk="entities.page",
        args=(
            user_id(where="query"),
            Arg("kind", "string", "Only this kind.", where="query", enum=("person", "place", "organization")),
            *page_args(),
        ),
    ),
    Tool(
        name="delete_session",
        title="Delete a session",
        description="Delete a whole session for good: its turns and everything learned only from it (facts, "
        "events, lessons; skills and profile pages built on them are updated). Irreversible; it runs in the "
        "background.",
        effect="destructive",
        method="DELETE",
        path="sessions/{session_id}/",
        operation_id="v1_sessions_destroy",
        status=202,
        result="SessionDeleteOutput",
        sdk="sessions.delete",
        args=(
            session_id(where="path"),
            user_id(where="query"),
            Arg("scope", "string", SAME_ID_SCOPES, where="query"),
        ),
    ),
    Tool(
        name="consolidate_memories",
        title="Consolidate memories",
        description="Merge duplicate and paraphrased facts and events into one, and resolve contradicting facts "
        "(the outdated one is retired; without a model they are flagged for review). Merged and retired "
        "memories are hidden from search but kept with their history. Runs in the background: the task's "
        "result lists what changed; try dry_run first.",
        effect="destructive",
        method="POST",
        path="memory/consolidate",
        operation_id="v1_memory_consolidate_create",
        status=202,
        result="ConsolidateOutput",
        sdk="memories.consolidate",
        args=(
            Arg(
                "user_id",
                "string",
                "The person whose memories to consolidate; omit for every user of your scope.",
            ),
            Arg("dry_run", "boolean", "Only report what would change.", default=False),
        ),
    ),
)

TOOLS_BY_NAME = {tool.name: tool for tool in TOOLS}


# The table as docs/api.md shows it ----------------------------------------------------------------

EFFECTS = {"read": "read-only", "write": "write", "edit": "write, idempotent", "destructive": "destructive"}


def _argument_text(arg: Arg) -> str:
    default = arg.default_for_tool
    text = (
        f"`{arg.name}`"
        if arg.required
        else f"`{arg.name}?`"
        if default is None
        else f"`{arg.name}={json.dumps(default)}`"
    )
    if arg.maximum is not None and not arg.many:
        text += f" (≤ {arg.maximum})"
    if arg.enum:
        text += " (" + ", ".join(f"`{value}`" for value in arg.enum) + (", several" if arg.many else "") + ")"
    if arg.only_for:
        text += f" ({', '.join(arg.only_for)})"
    return text


def markdown() -> str:
    lines = [
        "| tool | REST (`/api/v1/`) | arguments (`?` optional, `=` default) | SDK | effect |",
        "|---|---|---|---|---|",
    ]
    for tool in TOOLS:
        arguments = ", ".join(_argument_text(arg) for arg in tool.tool_args)
        sdk_only = [f"`{arg.name}`" for arg in tool.args if not arg.tool]
        if sdk_only:
            arguments += "; SDK and REST only: " + ", ".join(sdk_only)
        lines.append(
            f"| `{tool.name}` | `{tool.method} {tool.path}` | {arguments} | `{tool.sdk}` | {EFFECTS[tool.effect]} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(markdown(), end="")

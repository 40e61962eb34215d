"""The agent's API, one function per operation: each takes the caller and the raw input, validates it
with the operation's serializer, checks the caller's rights, calls one service or selector and
returns the JSON answer. The REST views (apps.agent.views) and the MCP tools
(apps.mcp_server.backend) are adapters around these, so both transports validate, refuse and
answer alike. Errors are apps.core.errors' family, which each transport maps once.

Rights: reads need the item in a scope the client reads; writes need a write scope (read-only
clients are refused before any lookup) and the item in that scope. A foreign id, a malformed id
and a missing one are the same 404.
"""

from contextlib import ExitStack

from django.conf import settings
from django.contrib.postgres.expressions import ArraySubquery
from django.db import transaction
from django.utils import timezone

from apps.agent.consolidate import consolidation_request
from apps.agent.context import context_build
from apps.agent.serializers import (
    ConsolidateInputSerializer,
    ConsolidateOutputSerializer,
    ContextInputSerializer,
    ContextOutputSerializer,
    EpisodicMemoryCreateInputSerializer,
    EpisodicMemoryPatchInputSerializer,
    LintFindingOutputSerializer,
    MemoryHistoryOutputSerializer,
    MemoryListFilterSerializer,
    ProfileFindingsOutputSerializer,
    SemanticMemoryCreateInputSerializer,
    SemanticMemoryPatchInputSerializer,
    SessionDeleteOutputSerializer,
)
from apps.conversations.models import Message, Session, SessionTag
from apps.conversations.operations import session_named
from apps.conversations.selectors import AmbiguousSession, session_get
from apps.conversations.serializers import OwnerQuerySerializer, SessionOutputSerializer, SessionPatchInputSerializer
from apps.conversations.services import session_retag, session_set_outcome
from apps.conversations.turns import normalise_messages
from apps.core.errors import ConflictError, InvalidInput, NotFound
from apps.core.operations import (
    Access,
    check_ids,
    get_or_404,
    object_body,
    operation,
    require_write_access,
    validated,
)
from apps.core.pagination import Page, paginate
from apps.core.replicas import read_on_replica
from apps.memories import selectors as memory_selectors
from apps.memories.serializers import EpisodicMemoryOutputSerializer, SemanticMemoryOutputSerializer
from apps.memories.services import memories as memory_services
from apps.pipeline.locks import LockNotAvailable, WorkOf, advisory_lock, work_lock_keys
from apps.privacy.services import cascade
from apps.profiles.models import LintFinding, Mention
from apps.profiles.selectors import entity_list, profile_detail_queryset
from apps.skills.models import SkillExperience
from apps.tenancy.services import end_user_get_or_create

MEMORY_TYPES = ("episodic", "semantic")
MEMORY_SHAPES = {
    "episodic": (
        EpisodicMemoryOutputSerializer,
        EpisodicMemoryCreateInputSerializer,
        EpisodicMemoryPatchInputSerializer,
    ),
    "semantic": (
        SemanticMemoryOutputSerializer,
        SemanticMemoryCreateInputSerializer,
        SemanticMemoryPatchInputSerializer,
    ),
}
MEMORY_READS = {"episodic": memory_selectors.episodic_memory_list, "semantic": memory_selectors.semantic_memory_list}


# Shared steps ------------------------------------------------------------------------------------


_BUSY = "Learning from this user's sessions is running right now; try again shortly."


def memory_type_checked(memory_type: str) -> str:
    if memory_type not in MEMORY_TYPES:
        raise NotFound()
    return memory_type


def actor_of(client) -> str:
    return f"client:{client.pk}"


def owned_session(*, client, session_id: str, user_id: str, scope: str | None) -> Session:
    try:
        return session_get(client=client, user_id=user_id, session_id=session_id, scope=scope)
    except Session.DoesNotExist:
        raise NotFound() from None
    except AmbiguousSession as exc:
        raise InvalidInput({"scope": [str(exc)]}) from None


# Context -----------------------------------------------------------------------------------------


def _latest_text(raw_messages: list) -> str:
    turns = normalise_messages(raw_messages, max_chars=settings.MESSAGE_MAX_CHARS, default_occurred_at=timezone.now())
    return next((turn.content for turn in reversed(turns) if turn.content.strip()), "")


@operation(access=Access.READ)
def context_get(*, client, data: dict, from_query: bool = False) -> dict:
    """Prompt-ready context for a user within a token budget.

    Who the user is (their profile page, trimmed), the facts, dated events and earlier turns that bear on
    the latest messages (or `query`), and for a task session its top skills: a `text` block and the same
    items as JSON, each with its id and type. The budget (`max_tokens`) is never exceeded."""
    params = validated(ContextInputSerializer, data, from_query=from_query)
    session = None
    if params.get("session_id"):
        session = owned_session(
            client=client, session_id=params["session_id"], user_id=params["user_id"], scope=params.get("scope")
        )
    query = params["query"] if "query" in params else _latest_text(params.get("messages") or [])

    def built(reader) -> tuple:
        context = context_build(
            reader=reader,
            user_id=params["user_id"],
            query=query,
            max_tokens=params["max_tokens"],
            memory_types=params.get("memory_types"),
            task_session=session is not None and session.session_tag == SessionTag.TASK,
        )
        items = [  # on the same copy as the context: an item's session may be read here
            {
                "ref": ref,
                "section": item.section,
                "memory_type": item.memory_type,
                "id": item.instance.pk,
                "text": item.body,
                "tokens": item.tokens,
                "score": item.score,
                "occurred_at": getattr(item.instance, "occurred_at", None)
                if item.memory_type in ("message", "episodic")
                else None,
                "session_id": item.instance.session.session_id if item.memory_type == "message" else None,
                "seq": item.instance.seq if item.memory_type == "message" else None,
            }
            for ref, item in enumerate(context.items, start=1)
        ]
        return context, items

    context, items = read_on_replica(client, built)
    return ContextOutputSerializer(
        {
            "user_id": params["user_id"],
            "session_id": session.session_id if session else None,
            "query": query,
            "max_tokens": params["max_tokens"],
            "tokens": context.tokens,
            "text": context.text,
            "items": items,
            "time_window": context.time_window,
        }
    ).data


# Memories ----------------------------------------------------------------------------------------


def _memory(client, memory_type: str, memory_id: str):
    check_ids(item_id=memory_id)  # named as in the REST path
    return get_or_404(MEMORY_READS[memory_type_checked(memory_type)](reader=client.reader), pk=memory_id)


def _render_memory(memory_type: str, memory) -> dict:
    return MEMORY_SHAPES[memory_type][0](memory).data


@operation(access=Access.READ)
def memory_list(*, client, memory_type: str, data: dict) -> Page:
    """List one user's memories of a type, a page at a time.

    Filters: subject (`name`), a time window and text."""
    memory_type_checked(memory_type)
    filters = validated(MemoryListFilterSerializer, data)
    return read_on_replica(
        client,
        lambda reader: paginate(
            memory_selectors.memory_list(reader=reader, memory_type=memory_type, filters=filters),
            filters=filters,
            serializer_class=MEMORY_SHAPES[memory_type][0],
        ),
    )


@operation(access=Access.READ)
def memory_get(*, client, memory_type: str, memory_id: str) -> dict:
    """Read one memory."""
    return _render_memory(memory_type, _memory(client, memory_type, memory_id))


@operation(access=Access.WRITE)
def memory_create(*, client, memory_type: str, data: dict) -> dict:
    """Store a memory directly, with no model involved.

    A fact or an event the agent or the person states (mem0's infer=False), in the client's write scope."""
    memory_type_checked(memory_type)
    fields = dict(validated(MEMORY_SHAPES[memory_type][1], data))
    user_id, reason = fields.pop("user_id"), fields.pop("reason", "")
    end_user = end_user_get_or_create(organization=client.organization, user_id=user_id)
    memory = memory_services.memory_store(
        memory_type=memory_type,
        client=client,
        end_user=end_user,
        fields=fields,
        actor=actor_of(client),
        reason=reason,
    )
    return _render_memory(memory_type, memory)


@operation(access=Access.WRITE)
def memory_update(*, client, memory_type: str, memory_id: str, data: dict) -> dict:
    """Edit a memory's own fields.

    Re-embedded, and recorded in its history with the client as actor; the pages quoting it are recompiled."""
    memory_type_checked(memory_type)
    memory = _memory(client, memory_type, memory_id)
    require_write_access(client, memory)
    fields = dict(validated(MEMORY_SHAPES[memory_type][2], data))
    reason = fields.pop("reason", "")
    if memory.is_deleted:
        raise ConflictError("This memory was retired by extraction; it can be deleted, not edited.")
    if not fields:
        return _render_memory(memory_type, memory)
    memory = memory_services.memory_edit(memory=memory, fields=fields, actor=actor_of(client), reason=reason)
    cascade.memory_edited(memory=memory, memory_type=memory_type)
    return _render_memory(memory_type, memory)


@operation(access=Access.WRITE)
def memory_delete(*, client, memory_type: str, memory_id: str) -> None:
    """Delete a memory and its history for good.

    The memories consolidation merged with it go too (they were judged one memory); what compiled pages
    quoted of them goes (revisions, sources, mentions) and the pages are recompiled. 409 while learning
    from the user's sessions holds their memories for longer than a few seconds: try again."""
    memory = _memory(client, memory_type, memory_id)
    require_write_access(client, memory)
    owner = memory.end_user.user_id
    try:
        cascade.memory_delete(memory=memory, actor=actor_of(client))
    except LockNotAvailable:
        raise ConflictError(_BUSY) from None
    cascade.copies_forget(organization=client.organization, user_id=owner, scope=memory.scope)


@operation(access=Access.READ)
def memory_history(*, client, memory_type: str, memory_id: str) -> dict:
    """Every change of a memory, with actor and before/after."""
    memory = _memory(client, memory_type, memory_id)
    return MemoryHistoryOutputSerializer(
        {"id": memory.pk, "memory_type": memory_type, "changes": memory_selectors.memory_history(memory=memory)}
    ).data


@operation(access=Access.WRITE)
def memory_consolidate(*, client, data: dict) -> dict:
    """Merge duplicate memories and resolve contradicting ones, for a user or the whole scope.

    Runs in the background in the client's write scope (202 with the task's id; its result lists what
    was merged, retired and flagged). Near-duplicates and paraphrases of one user's episodic and
    semantic memories merge into one survivor that keeps their sources and history; contradicting
    facts are resolved by the LLM when one is configured (the superseded one retired), otherwise
    flagged for review. Nothing is deleted: merged and retired memories are soft-deleted with a history
    row naming why. `dry_run` only reports what would happen."""
    params = validated(ConsolidateInputSerializer, object_body(data))
    end_user = None
    if params.get("user_id"):
        # Known only where the caller writes: a user of another scope is as missing as one never seen.
        owners = memory_selectors.memory_owners(organization_id=client.organization_id, scope=client.write_scope)
        end_user = get_or_404(owners, user_id=params["user_id"])
    task = consolidation_request(
        organization=client.organization,
        scope=client.write_scope,
        end_user=end_user,
        dry_run=params["dry_run"],
        client=client,
    )
    return ConsolidateOutputSerializer(
        {
            "user_id": params.get("user_id"),
            "scope": client.write_scope,
            "dry_run": params["dry_run"],
            "task_id": task.pk,
            "status": task.status,
        }
    ).data


# Sessions, experiences, profiles, entities -------------------------------------------------------


def _derived_from(session: Session) -> str:
    """What other apps learned from the session's turns, named for a 409 ("" if nothing)."""
    turns = ArraySubquery(Message.objects.filter(session_id=session.pk).values("pk"))
    if SkillExperience.objects.filter(session_id=session.pk).exists():
        return "skill experiences were distilled from it"
    for memory_type, model in memory_services.MODELS.items():
        if model.objects.filter(end_user_id=session.end_user_id, source_message_ids__overlap=turns).exists():
            return f"{memory_type} memories were learned from it"
    if Mention.objects.filter(session_id=session.pk).exists():
        return "entities were projected from it"
    return ""


def _retag(*, client, session: Session, session_tag: str) -> Session:
    """Under the owner's work locks (those erasure takes), so no learning runs while the tag changes."""
    keys = work_lock_keys(
        WorkOf(organization_id=session.organization_id, end_user_ids=(session.end_user_id,), scopes=(session.scope,))
    )
    try:
        with ExitStack() as locks:
            for key in keys:
                locks.enter_context(advisory_lock(key, wait=False))
            why = _derived_from(session) if session.session_tag != session_tag else ""
            if why:
                raise ConflictError(f"The session's tag can no longer change: {why}.")
            return session_retag(session=session, session_tag=session_tag, client=client)
    except LockNotAvailable:
        raise ConflictError(_BUSY) from None


@operation(access=Access.WRITE)
def update_session(*, client, session_id: str, query, data) -> dict:
    """Set a session's outcome, or re-tag it.

    `outcome`: `success`, `failure`, `unknown`. `session_tag` (`task` | `conversation`) may change until
    anything has been learned from the session (409 naming what, after); the work routed by the old tag
    that has not run is cancelled and the new tag's is queued (a sealed task session is distilled)."""
    session, _ = session_named(client=client, session_id=session_id, query=query)
    require_write_access(client, session)
    patch = validated(SessionPatchInputSerializer, data)
    with transaction.atomic():
        if "session_tag" in patch:
            session = _retag(client=client, session=session, session_tag=patch["session_tag"])
        if "outcome" in patch:
            session = session_set_outcome(session=session, outcome=patch["outcome"])
    return SessionOutputSerializer(session).data


@operation(access=Access.WRITE)
def session_delete(*, client, session_id: str, data: dict) -> dict:
    """Delete a whole session and what was derived from its turns.

    Runs in the background (202 with the task's id): the provenance cascade of erasure, for one session."""
    check_ids(session_id=session_id)
    owner = validated(OwnerQuerySerializer, data)
    session = owned_session(client=client, session_id=session_id, user_id=owner["user_id"], scope=owner.get("scope"))
    require_write_access(client, session)
    task = cascade.session_delete_request(session=session, client=client)
    return SessionDeleteOutputSerializer(
        {
            "session_id": session.session_id,
            "user_id": session.end_user.user_id,
            "scope": session.scope,
            "task_id": task.pk,
            "status": task.status,
        }
    ).data


@operation(access=Access.WRITE)
def experience_delete(*, client, experience_id: str) -> None:
    """Delete a skill experience.

    A skill evolved from it alone goes too; one with other sources is scrubbed and returned to review."""
    check_ids(experience_id=experience_id)
    experience = get_or_404(client.reader.rows(SkillExperience).select_related("organization"), pk=experience_id)
    require_write_access(client, experience)
    cascade.experience_delete(experience=experience)


def _profile(client, profile_id: str):
    check_ids(profile_id=profile_id)
    return get_or_404(profile_detail_queryset(reader=client.reader), pk=profile_id)


@operation(access=Access.WRITE)
def profile_delete(*, client, profile_id: str) -> None:
    """Delete a compiled profile page with its revisions and sources.

    Its entity stays: new mentions compile a new page."""
    profile = _profile(client, profile_id)
    require_write_access(client, profile)
    cascade.profile_delete(profile=profile)


@operation(access=Access.READ)
def profile_findings(*, client, profile_id: str) -> dict:
    """What lint found about a profile page (stale, orphan, contradiction)."""
    profile = _profile(client, profile_id)
    findings = LintFinding.objects.filter(profile=profile).order_by("status", "-created_at", "id")
    return ProfileFindingsOutputSerializer(
        {
            "profile_id": profile.pk,
            "findings": LintFindingOutputSerializer(findings, many=True).data,
        }
    ).data


@operation(access=Access.WRITE)
def entity_delete(*, client, entity_id: str) -> None:
    """Delete an entity with its mentions, edges and page."""
    check_ids(entity_id=entity_id)
    entity = get_or_404(entity_list(reader=client.reader), pk=entity_id)
    require_write_access(client, entity)
    cascade.entity_delete(entity=entity)

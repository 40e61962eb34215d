"""The memory endpoints' operations (REST: apps.memories.views; MCP: apps.mcp_server). Writes need a write
scope (read-only clients are refused before any lookup); a foreign, malformed or missing id is the same 404."""

import functools

from apps.conversations.services.learning import LEARNING_BUSY
from apps.core.errors import ConflictError, NotFound
from apps.core.operations import Access, check_ids, get_or_404, object_body, operation, require_write_access, validated
from apps.core.pagination import Page, paginated_read
from apps.memories import changes, selectors, serializers
from apps.memories.services.consolidate import consolidation_request
from apps.memories.services.memories import memory_edit, memory_store
from apps.pipeline.locks import LockNotAvailable
from apps.tenancy.services import end_user_get_or_create

MEMORY_SHAPES = {
    "episodic": (
        serializers.EpisodicMemoryOutputSerializer,
        serializers.EpisodicMemoryCreateInputSerializer,
        serializers.EpisodicMemoryPatchInputSerializer,
    ),
    "semantic": (
        serializers.SemanticMemoryOutputSerializer,
        serializers.SemanticMemoryCreateInputSerializer,
        serializers.SemanticMemoryPatchInputSerializer,
    ),
}
MEMORY_READS = {"episodic": selectors.episodic_memory_list, "semantic": selectors.semantic_memory_list}


def _checked_type(memory_type: str) -> str:
    if memory_type not in MEMORY_SHAPES:
        raise NotFound()
    return memory_type


def _actor(client) -> str:
    return f"client:{client.pk}"


def _memory(client, memory_type: str, memory_id: str):
    check_ids(item_id=memory_id)  # named as in the REST path
    return get_or_404(MEMORY_READS[_checked_type(memory_type)](reader=client.reader), pk=memory_id)


def _render(memory_type: str, memory) -> dict:
    return MEMORY_SHAPES[memory_type][0](memory).data


@operation(access=Access.READ)
def list_memories(*, client, memory_type: str, data: dict) -> Page:
    """List one user's memories of a type, a page at a time.

    Filters: subject (`name`), a time window and text."""
    _checked_type(memory_type)
    return paginated_read(
        client,
        data,
        filters=serializers.MemoryListFilterSerializer,
        select=functools.partial(selectors.memory_list, memory_type=memory_type),
        output=MEMORY_SHAPES[memory_type][0],
    )


@operation(access=Access.READ)
def get_memory(*, client, memory_type: str, memory_id: str) -> dict:
    """Read one memory."""
    return _render(memory_type, _memory(client, memory_type, memory_id))


@operation(access=Access.WRITE)
def create_memory(*, client, memory_type: str, data: dict) -> dict:
    """Store a memory directly, with no model involved.

    A fact or an event the agent or the person states (mem0's infer=False), in the client's write scope."""
    _checked_type(memory_type)
    fields = dict(validated(MEMORY_SHAPES[memory_type][1], data))
    user_id, reason = fields.pop("user_id"), fields.pop("reason", "")
    end_user = end_user_get_or_create(organization=client.organization, user_id=user_id)
    memory = memory_store(
        memory_type=memory_type, client=client, end_user=end_user, fields=fields, actor=_actor(client), reason=reason
    )
    return _render(memory_type, memory)


@operation(access=Access.WRITE)
def update_memory(*, client, memory_type: str, memory_id: str, data: dict) -> dict:
    """Edit a memory's own fields.

    Re-embedded, and recorded in its history with the client as actor; the pages quoting it are recompiled."""
    _checked_type(memory_type)
    memory = _memory(client, memory_type, memory_id)
    require_write_access(client, memory)
    fields = dict(validated(MEMORY_SHAPES[memory_type][2], data))
    reason = fields.pop("reason", "")
    if memory.is_deleted:
        raise ConflictError("This memory was retired by extraction; it can be deleted, not edited.")
    if not fields:
        return _render(memory_type, memory)
    memory = memory_edit(memory=memory, fields=fields, actor=_actor(client), reason=reason)
    changes.cascade_edit(memory=memory, memory_type=memory_type)
    return _render(memory_type, memory)


@operation(access=Access.WRITE)
def delete_memory(*, client, memory_type: str, memory_id: str) -> None:
    """Delete a memory and its history for good.

    The memories consolidation merged with it go too (they were judged one memory); what compiled pages
    quoted of them goes (revisions, sources, mentions) and the pages are recompiled. 409 while learning
    from the user's sessions holds their memories for longer than a few seconds: try again."""
    memory = _memory(client, memory_type, memory_id)
    require_write_access(client, memory)
    try:
        changes.cascade_delete(memory=memory, actor=_actor(client))
    except LockNotAvailable:
        raise ConflictError(LEARNING_BUSY) from None


@operation(access=Access.READ)
def get_memory_history(*, client, memory_type: str, memory_id: str) -> dict:
    """Every change of a memory, with actor and before/after."""
    memory = _memory(client, memory_type, memory_id)
    return serializers.MemoryHistoryOutputSerializer(
        {"id": memory.pk, "memory_type": memory_type, "changes": selectors.memory_history(memory=memory)}
    ).data


@operation(access=Access.WRITE)
def consolidate_memories(*, client, data: dict) -> dict:
    """Merge duplicate memories and resolve contradicting ones, for a user or the whole scope.

    Runs in the background in the client's write scope (202 with the task's id; its result lists what
    was merged, retired and flagged). Near-duplicates and paraphrases of one user's episodic and
    semantic memories merge into one survivor that keeps their sources and history; contradicting
    facts are resolved by the LLM when one is configured (the superseded one retired), otherwise
    flagged for review. Nothing is deleted: merged and retired memories are soft-deleted with a history
    row naming why. `dry_run` only reports what would happen."""
    params = validated(serializers.ConsolidateInputSerializer, object_body(data))
    end_user = None
    if params.get("user_id"):
        # Known only where the caller writes: a user of another scope is as missing as one never seen. A
        # known user with nothing to merge is not missing (the run finds nothing).
        known = selectors.scope_users(organization_id=client.organization_id, scope=client.write_scope)
        end_user = get_or_404(known, user_id=params["user_id"])
    task = consolidation_request(
        organization=client.organization,
        scope=client.write_scope,
        end_user=end_user,
        dry_run=params["dry_run"],
        client=client,
    )
    return serializers.ConsolidateOutputSerializer(
        {
            "user_id": params.get("user_id"),
            "scope": client.write_scope,
            "dry_run": params["dry_run"],
            "task_id": task.pk,
            "status": task.status,
        }
    ).data

"""Writes of episodic and semantic memories. Every change by extraction is a history row with the
value before and after it; the API's delete is a hard delete of the memory and its history."""

from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from apps.conversations.models import Message
from apps.conversations.services import date_range
from apps.core.temporal import find_dates, span_of
from apps.memories.models import EpisodicMemory, EpisodicMemoryChange, SemanticMemory, SemanticMemoryChange
from apps.providers.embeddings import embed_texts, embedding_model_name

EPISODIC, SEMANTIC = "episodic", "semantic"
MODELS = {EPISODIC: EpisodicMemory, SEMANTIC: SemanticMemory}
CHANGE_MODELS = {EPISODIC: EpisodicMemoryChange, SEMANTIC: SemanticMemoryChange}
# The fields extraction may set; everything else (tenant, scope, owner) comes from the session.
EDITABLE_FIELDS = {
    EPISODIC: ("occurred_at", "time_granularity", "actor", "event_type", "summary", "details"),
    SEMANTIC: ("name", "summary", "details", "source"),
}


def memory_type_of(memory) -> str:
    return EPISODIC if isinstance(memory, EpisodicMemory) else SEMANTIC


def memory_snapshot(memory) -> dict:
    """The JSON value of a memory as history records it."""
    snapshot = {name: getattr(memory, name) for name in EDITABLE_FIELDS[memory_type_of(memory)]}
    if "occurred_at" in snapshot:
        snapshot["occurred_at"] = snapshot["occurred_at"].isoformat()
    snapshot["source_message_ids"] = [str(message_id) for message_id in memory.source_message_ids]
    return snapshot


def embedding_text(memory_type: str, fields: dict) -> str:
    """What a memory's vector encodes: the subject or the actor with the statement itself."""
    if memory_type == EPISODIC:
        head = " ".join(part for part in (fields.get("actor"), fields.get("event_type")) if part)
        return f"{head}: {fields['summary']}\n{fields.get('details', '')}".strip(": \n")
    return f"{fields['name']}: {fields['summary']}\n{fields.get('details', '')}".strip()


def memory_date_span(memory, *, said_at=None):
    """The days a memory's words name ("last May", "in 2022"), read as of `said_at` (when its source
    turns were said; looked up when not given, falling back to when the memory was written)."""
    text = f"{memory.summary}\n{memory.details}"
    if said_at is None and memory.source_message_ids:
        said_at = (
            Message.objects.filter(pk__in=memory.source_message_ids)
            .order_by("-occurred_at")
            .values_list("occurred_at", flat=True)
            .first()
        )
    return date_range(span_of(find_dates(text, said_at or memory.created_at or timezone.now())))


def memories_normalize_dates(*, memory_type: str, memory_ids: list) -> list:
    """Re-dates the memories from their words (memory_date_span), under lock, writing only those that
    changed; returns their ids. Their text and history are untouched: the span is derived."""
    with transaction.atomic():
        memories = list(
            MODELS[memory_type]
            .objects.select_for_update()
            .filter(pk__in=list(memory_ids))
            .order_by("pk")
            .only("id", "summary", "details", "source_message_ids", "created_at", "date_span")
        )
        sources = {message_id for memory in memories for message_id in memory.source_message_ids}
        said = dict(Message.objects.filter(pk__in=list(sources)).values_list("pk", "occurred_at"))
        changed = []
        for memory in memories:
            times = [said[message_id] for message_id in memory.source_message_ids if message_id in said]
            span = memory_date_span(memory, said_at=max(times) if times else memory.created_at)
            if span != memory.date_span:
                memory.date_span = span
                changed.append(memory)
        MODELS[memory_type].objects.bulk_update(changed, ["date_span"])
    return [memory.pk for memory in changed]


def _record(memory, *, operation: str, previous, actor: str, reason: str, task_id=None) -> None:
    new_value = None if operation == "delete" else memory_snapshot(memory)
    CHANGE_MODELS[memory_type_of(memory)].objects.create(
        memory=memory,
        operation=operation,
        previous_value=previous,
        new_value=new_value,
        actor=actor,
        reason=reason,
        task_id=task_id,
    )


@transaction.atomic
def memory_create(
    *,
    memory_type: str,
    session,
    fields: dict,
    source_message_ids: list,
    embedding: list[float] | None,
    actor: str,
    reason: str = "",
    task_id=None,
):
    """A new memory of the session's user, in the session's scope, with its first history row."""
    return _memory_insert(
        memory_type=memory_type,
        organization_id=session.organization_id,
        scope=session.scope,
        end_user_id=session.end_user_id,
        created_by_id=session.client_id,
        fields=fields,
        source_message_ids=source_message_ids,
        embedding=embedding,
        actor=actor,
        reason=reason,
        task_id=task_id,
    )


def memory_store(*, memory_type: str, client, end_user, fields: dict, actor: str, reason: str = ""):
    """A memory stated directly (by an agent or the person), with no model involved: stored in the
    client's write scope, embedded now, with its first history row naming `actor`."""
    (embedding,) = memory_embed(memory_type, [fields])
    with transaction.atomic():
        return _memory_insert(
            memory_type=memory_type,
            organization_id=client.organization_id,
            scope=client.write_scope,
            end_user_id=end_user.pk,
            created_by_id=client.pk,
            fields=fields,
            source_message_ids=[],
            embedding=embedding,
            actor=actor,
            reason=reason,
        )


def memory_edit(*, memory, fields: dict, actor: str, reason: str = ""):
    """Changes a memory's own fields at a caller's request: re-embedded from its new text, recorded
    as an update by `actor`. Its sources stay what they were."""
    memory_type = memory_type_of(memory)
    (embedding,) = memory_embed(memory_type, [{**memory_snapshot(memory), **fields}])
    return memory_update(
        memory=memory, fields=fields, source_message_ids=[], embedding=embedding, actor=actor, reason=reason
    )


def _memory_insert(
    *,
    memory_type: str,
    organization_id,
    scope: str,
    end_user_id,
    created_by_id,
    fields: dict,
    source_message_ids: list,
    embedding: list[float] | None,
    actor: str,
    reason: str,
    task_id=None,
):
    memory = MODELS[memory_type](
        organization_id=organization_id,
        scope=scope,
        end_user_id=end_user_id,
        created_by_id=created_by_id,
        source_message_ids=list(dict.fromkeys(source_message_ids)),
        embedding=embedding,
        embedding_model=embedding_model_name() if embedding is not None else "",
        **{name: value for name, value in fields.items() if name in EDITABLE_FIELDS[memory_type]},
    )
    memory.date_span = memory_date_span(memory)
    memory.save(force_insert=True)
    _record(memory, operation="add", previous=None, actor=actor, reason=reason, task_id=task_id)
    return memory


@transaction.atomic
def memory_update(
    *,
    memory,
    fields: dict,
    source_message_ids: list,
    embedding: list[float] | None,
    actor: str,
    reason: str = "",
    task_id=None,
):
    """Changes a memory's fields, adds the turns that caused the change to its sources, keeps history."""
    previous = memory_snapshot(memory)
    for name, value in fields.items():
        if name in EDITABLE_FIELDS[memory_type_of(memory)]:
            setattr(memory, name, value)
    memory.source_message_ids = list(dict.fromkeys([*memory.source_message_ids, *source_message_ids]))
    if embedding is not None:
        memory.embedding, memory.embedding_model = embedding, embedding_model_name()
    memory.date_span = memory_date_span(memory)
    memory.save()
    _record(memory, operation="update", previous=previous, actor=actor, reason=reason, task_id=task_id)
    return memory


@transaction.atomic
def memory_soft_delete(*, memory, actor: str, reason: str = "", task_id=None):
    """Hides a memory from search; it stays, with its history, until the retention purge."""
    previous = memory_snapshot(memory)
    memory.deleted_at = timezone.now()
    memory.save(update_fields=["deleted_at", "updated_at"])
    _record(memory, operation="delete", previous=previous, actor=actor, reason=reason, task_id=task_id)
    return memory


@transaction.atomic
def memory_delete(*, memory) -> None:
    """What a user asks for through the API: the memory and its history are gone for good."""
    memory.delete()


def memory_embed(memory_type: str, fields_list: list[dict]) -> list[list[float]]:
    return embed_texts([embedding_text(memory_type, fields) for fields in fields_list])


def memories_purge_deleted() -> dict:
    """Hard-deletes memories soft-deleted more than DELETED_MEMORY_RETENTION_DAYS ago (0 keeps them)."""
    days = settings.DELETED_MEMORY_RETENTION_DAYS
    if days <= 0:
        return {EPISODIC: 0, SEMANTIC: 0}
    cutoff = timezone.now() - timedelta(days=days)
    purged = {}
    for memory_type, model in MODELS.items():
        _, deleted = model.objects.filter(deleted_at__lt=cutoff).delete()
        purged[memory_type] = deleted.get(model._meta.label, 0)
    return purged

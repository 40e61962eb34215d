"""Writes of episodic and semantic memories, each change a history row with the value before and after it.
The API's delete is apps.privacy.services.provenance.memory_forget, which finds what consolidation merged here."""

import re
from collections.abc import Iterable
from datetime import timedelta
from typing import NamedTuple

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from apps.conversations.models import Message
from apps.conversations.services.dates import date_range
from apps.conversations.writers import SourcesChanged, turns_held
from apps.core.temporal import find_dates, span_of
from apps.memories.models import EpisodicMemory, EpisodicMemoryChange, SemanticMemory, SemanticMemoryChange
from apps.providers.embeddings import embed_texts, embedding_model_name

EPISODIC, SEMANTIC = "episodic", "semantic"
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
MODELS = {EPISODIC: EpisodicMemory, SEMANTIC: SemanticMemory}
CHANGE_MODELS = {EPISODIC: EpisodicMemoryChange, SEMANTIC: SemanticMemoryChange}
# The fields extraction may set; everything else (tenant, scope, owner) comes from the session.
EDITABLE_FIELDS = {
    EPISODIC: ("occurred_at", "time_granularity", "actor", "event_type", "summary", "details"),
    SEMANTIC: ("name", "summary", "details", "source"),
}


def memory_type_of(memory) -> str:
    return EPISODIC if isinstance(memory, EpisodicMemory) else SEMANTIC


MERGED_INTO = "consolidation merged this memory into"


def merged_into_reason(survivor_pk) -> str:
    """The history reason by which memory_merge_group finds a survivor's merged duplicates again."""
    return f"{MERGED_INTO} {survivor_pk}"


def memory_merge_group(memory) -> list:
    """The memory first, then all it was merged with, transitively and soft-deleted included: consolidation judged
    them one memory (a survivor's details hold its duplicates'), so they are deleted together."""
    model, changes = type(memory), CHANGE_MODELS[memory_type_of(memory)]
    group, frontier = {str(memory.pk): memory}, [memory.pk]
    while frontier:
        # Down: what was merged into the frontier; up: what the frontier was merged into.
        linked = {
            str(pk)
            for pk in changes.objects.filter(
                operation="delete", reason__in=[merged_into_reason(pk) for pk in frontier]
            ).values_list("memory_id", flat=True)
        }
        for reason in changes.objects.filter(
            memory_id__in=frontier, operation="delete", reason__startswith=MERGED_INTO
        ).values_list("reason", flat=True):
            survivor = reason.removeprefix(MERGED_INTO).strip()
            if _UUID.fullmatch(survivor):
                linked.add(survivor)
        found = model.objects.filter(
            pk__in=sorted(linked - set(group)), organization_id=memory.organization_id, end_user_id=memory.end_user_id
        )
        group.update({str(member.pk): member for member in found})
        frontier = [member.pk for member in found]
    return list(group.values())


def memories_held(*, organization_id, memories: Iterable = (), turn_ids: Iterable = ()) -> None:
    """turns_held for work that also read memories (their creators and cited turns' writers are held too);
    raises SourcesChanged when one is gone. Call it in the transaction that stores what was derived."""
    by_type: dict[str, set] = {}
    cited, creators = set(), set()
    for memory in memories:
        by_type.setdefault(memory_type_of(memory), set()).add(memory.pk)
        cited.update(memory.source_message_ids)
        creators.add(memory.created_by_id)
    turns_held(organization_id=organization_id, turn_ids=turn_ids, client_ids=creators, cited_ids=cited)
    for memory_type, ids in by_type.items():
        if MODELS[memory_type].objects.filter(pk__in=list(ids)).count() != len(ids):
            raise SourcesChanged("A memory this work read was deleted meanwhile; it runs again on what is left.")


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
    """The days a memory's words name ("last May"), as of `said_at` (its source turns' time by default)."""
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
    """Re-dates the memories from their words under lock; returns the ids changed. History is untouched (derived)."""
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
        memory_type,
        owner=MemoryOwner(
            organization_id=session.organization_id,
            scope=session.scope,
            end_user_id=session.end_user_id,
            created_by_id=session.client_id,
        ),
        fields=fields,
        source_message_ids=source_message_ids,
        embedding=embedding,
        actor=actor,
        reason=reason,
        task_id=task_id,
    )


def memory_store(*, memory_type: str, client, end_user, fields: dict, actor: str, reason: str = ""):
    """A memory stated directly (no model involved), in the client's write scope, with its first history row."""
    (embedding,) = memory_embed(memory_type, [fields])
    owner = MemoryOwner.written_by(client, end_user)
    with transaction.atomic():
        return _memory_insert(
            memory_type,
            owner=owner,
            fields=fields,
            source_message_ids=[],
            embedding=embedding,
            actor=actor,
            reason=reason,
        )


def semantic_memory_upsert(*, client, end_user, key: str, fields: dict, actor: str, reason: str = ""):
    """The semantic memory the client keeps under `key` for the user, in its write scope: stored, or its
    fields replaced (recorded in its history) when the key is there. One row however many stores of the
    key race: the key is unique per user and scope, and the loser of an insert race updates instead."""
    (embedding,) = memory_embed(SEMANTIC, [fields])
    owner = MemoryOwner.written_by(client, end_user)
    keyed = SemanticMemory.objects.select_for_update().filter(
        organization_id=client.organization_id, scope=client.write_scope, end_user=end_user, key=key
    )
    with transaction.atomic():
        memory = keyed.first()
        if memory is None:
            try:
                with transaction.atomic():
                    return _memory_insert(
                        SEMANTIC,
                        owner=owner,
                        fields=fields,
                        source_message_ids=[],
                        embedding=embedding,
                        actor=actor,
                        reason=reason,
                        key=key,
                    )
            except IntegrityError:
                memory = keyed.get()  # stored meanwhile by a concurrent store, now committed
        memory.deleted_at = None  # a keyed memory retired meanwhile is the caller's again
        return memory_update(
            memory=memory, fields=fields, source_message_ids=[], embedding=embedding, actor=actor, reason=reason
        )


def memory_edit(*, memory, fields: dict, actor: str, reason: str = ""):
    """Changes a memory's fields at a caller's request, re-embedded and recorded; its sources stay the same."""
    memory_type = memory_type_of(memory)
    (embedding,) = memory_embed(memory_type, [{**memory_snapshot(memory), **fields}])
    return memory_update(
        memory=memory, fields=fields, source_message_ids=[], embedding=embedding, actor=actor, reason=reason
    )


class MemoryOwner(NamedTuple):
    """Whose a new memory is: organisation, scope and end user, and the client whose write made it."""

    organization_id: object
    scope: str
    end_user_id: object
    created_by_id: object

    @classmethod
    def written_by(cls, client, end_user) -> "MemoryOwner":
        """The owner of what `client` stores for `end_user`: its organisation and write scope."""
        return cls(
            organization_id=client.organization_id,
            scope=client.write_scope,
            end_user_id=end_user.pk,
            created_by_id=client.pk,
        )


def _memory_insert(
    memory_type: str,
    *,
    owner: MemoryOwner,
    fields: dict,
    source_message_ids: list,
    embedding,
    actor: str,
    reason: str,
    task_id=None,
    **identity,
):
    memory = MODELS[memory_type](
        **identity,
        **owner._asdict(),
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


def items_held(*, organization_id, items: Iterable[tuple[str, object]]) -> None:
    """memories_held for work that read items by (type, id), like compiled pages' evidence."""
    turn_ids, memory_ids = set(), {}
    for item_type, item_id in items:
        if item_type in MODELS:
            memory_ids.setdefault(item_type, set()).add(str(item_id))
        else:
            turn_ids.add(str(item_id))
    memories = []
    for memory_type, ids in memory_ids.items():
        found = list(
            MODELS[memory_type].objects.filter(pk__in=list(ids)).only("pk", "created_by", "source_message_ids")
        )
        if len(found) != len(ids):
            raise SourcesChanged("A memory this work read was deleted meanwhile; it runs again on what is left.")
        memories += found
    memories_held(organization_id=organization_id, memories=memories, turn_ids=turn_ids)

"""Reads of episodic and semantic memories, always within the caller's organisation and read scopes."""

from django.contrib.postgres.expressions import ArraySubquery
from django.db.models import Exists, OuterRef, Q

from apps.conversations.models import Message, Session
from apps.conversations.selectors import cites_turns_being_deleted
from apps.memories.models import EpisodicMemory, SemanticMemory
from apps.tenancy.models import EndUser
from apps.tenancy.readers import Reader


def memory_readable(reader: Reader) -> Q:
    """Readable by id, soft-deleted included (a caller may still erase one), but not from a session being deleted."""
    return reader.condition() & ~cites_turns_being_deleted(organization_id=reader.organization_id)


def memory_live(reader: Reader, user_id: str | None = None) -> Q:
    """The search visibility of memories (`user_id` is not part of it): readable and not soft-deleted."""
    return memory_readable(reader) & Q(deleted_at__isnull=True)


def episodic_memory_list(*, reader: Reader):
    """Including soft-deleted rows: a caller may still erase one for good."""
    return EpisodicMemory.objects.filter(memory_readable(reader)).select_related("end_user")


def semantic_memory_list(*, reader: Reader):
    """Including soft-deleted rows: a caller may still erase one for good."""
    return SemanticMemory.objects.filter(memory_readable(reader)).select_related("end_user")


def memory_history(*, memory):
    """Every change of one memory, oldest first."""
    return memory.history.order_by("created_at", "id")


def memory_list(*, reader: Reader, memory_type: str, filters: dict):
    """One user's live memories of a type, newest first, filtered by subject, time window and text."""
    episodic = memory_type == "episodic"
    queryset = (
        reader.objects(EpisodicMemory if episodic else SemanticMemory)
        .filter(memory_live(reader), end_user__user_id=filters["user_id"])
        .select_related("end_user")
        .defer("embedding", "search_vector")
    )
    time_field, subject = ("occurred_at", "actor") if episodic else ("updated_at", "name")
    lookups = {"subject": f"{subject}__iexact", "start": f"{time_field}__gte", "end": f"{time_field}__lte"}
    queryset = queryset.filter(**{lookup: filters[name] for name, lookup in lookups.items() if filters.get(name)})
    if filters.get("q"):
        text = Q(summary__icontains=filters["q"]) | Q(details__icontains=filters["q"])
        if not episodic:
            text |= Q(name__icontains=filters["q"])
        queryset = queryset.filter(text)
    return queryset.order_by(f"-{time_field}", "-id")


def scope_users(*, organization_id, scope: str):
    """The organisation's end users known in `scope`: with a session there, or memories (stored directly)."""
    mine = {"organization_id": organization_id, "scope": scope, "end_user_id": OuterRef("pk")}
    return EndUser.objects.filter(organization_id=organization_id).filter(
        Exists(Session.objects.filter(**mine))
        | Exists(EpisodicMemory.objects.filter(**mine))
        | Exists(SemanticMemory.objects.filter(**mine))
    )


def session_extracted_into(session) -> str:
    """A learned-from check of apps.conversations: why the session counts as learned from ("" if not)."""
    turns = ArraySubquery(Message.objects.filter(session_id=session.pk).values("pk"))
    for memory_type, model in (("episodic", EpisodicMemory), ("semantic", SemanticMemory)):
        if model.objects.filter(end_user_id=session.end_user_id, source_message_ids__overlap=turns).exists():
            return f"{memory_type} memories were learned from it"
    return ""

"""Reads of episodic and semantic memories, always within the caller's organisation and read scopes."""

from django.db.models import Exists, OuterRef, Q

from apps.memories.models import EpisodicMemory, SemanticMemory
from apps.tenancy.models import EndUser
from apps.tenancy.readers import Reader


def episodic_memory_list(*, reader: Reader):
    """Including soft-deleted rows: a caller may still erase one for good."""
    return reader.rows(EpisodicMemory).select_related("end_user")


def semantic_memory_list(*, reader: Reader):
    """Including soft-deleted rows: a caller may still erase one for good."""
    return reader.rows(SemanticMemory).select_related("end_user")


def memory_history(*, memory):
    """Every change of one memory, oldest first."""
    return memory.history.order_by("created_at", "id")


def memory_list(*, reader: Reader, memory_type: str, filters: dict):
    """One user's live memories of a type, newest first (events by when they happened), filtered by
    subject (a fact's name or an event's actor, case-insensitive), time window and text."""
    episodic = memory_type == "episodic"
    queryset = (episodic_memory_list if episodic else semantic_memory_list)(reader=reader)
    queryset = queryset.filter(end_user__user_id=filters["user_id"], deleted_at__isnull=True).defer(
        "embedding", "search_vector"
    )
    time_field = "occurred_at" if episodic else "updated_at"
    if filters.get("subject"):
        queryset = queryset.filter(**{("actor" if episodic else "name") + "__iexact": filters["subject"]})
    if filters.get("start"):
        queryset = queryset.filter(**{f"{time_field}__gte": filters["start"]})
    if filters.get("end"):
        queryset = queryset.filter(**{f"{time_field}__lte": filters["end"]})
    if filters.get("q"):
        text = Q(summary__icontains=filters["q"]) | Q(details__icontains=filters["q"])
        if not episodic:
            text |= Q(name__icontains=filters["q"])
        queryset = queryset.filter(text)
    return queryset.order_by(f"-{time_field}", "-id")


def memory_owners(*, organization_id, scope: str):
    """The organisation's end users who hold live memories in `scope`."""
    live = {
        "organization_id": organization_id,
        "scope": scope,
        "end_user_id": OuterRef("pk"),
        "deleted_at__isnull": True,
    }
    return EndUser.objects.filter(organization_id=organization_id).filter(
        Exists(EpisodicMemory.objects.filter(**live)) | Exists(SemanticMemory.objects.filter(**live))
    )

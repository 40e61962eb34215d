"""Reads of sessions and messages, always within the caller's organisation and read scopes."""

from django.contrib.postgres.expressions import ArraySubquery
from django.db.models import Min, OuterRef, Q, UUIDField
from django.db.models.functions import Cast, JSONObject, Substr

from apps.conversations.models import Checkpoint, CheckpointWrite, Message, Session
from apps.conversations.routing import DELETE_SESSION, session_delete_key
from apps.core.errors import InvalidInput, NotFound
from apps.core.expressions import CitesAny
from apps.pipeline.models import MemoryTask
from apps.providers.embeddings import embedding_model_name
from apps.tenancy.readers import Reader

# Visibility rules: Qs the selectors filter by and the search engine compiles (SearchSource.visible),
# so the two cannot differ. A session accepted for deletion is gone from its 202 on, with its turns
# and what they are cited by, though the rows wait for the purge.


def sessions_being_deleted(*, organization_id):
    """The ids of the organisation's sessions whose purge task is active (the tail of its key)."""
    return MemoryTask.objects.filter(
        organization_id=organization_id, task_type=DELETE_SESSION, status__in=MemoryTask.ACTIVE_STATUSES
    ).values(deleted_session=Cast(Substr("idempotency_key", len(session_delete_key("")) + 1), UUIDField()))


def turns_being_deleted(*, organization_id):
    """The ids of the turns of the sessions being deleted."""
    return Message.objects.filter(session__in=sessions_being_deleted(organization_id=organization_id)).values("pk")


def cites_turns_being_deleted(*, organization_id, field: str = "source_message_ids") -> Q:
    """Rows whose `field` (turn ids) cites a turn of a session being deleted: gone with its purge."""
    return Q(CitesAny(field, turns_being_deleted(organization_id=organization_id)))


def session_visible(reader: Reader) -> Q:
    return reader.condition() & ~Q(pk__in=sessions_being_deleted(organization_id=reader.organization_id))


def message_visible(reader: Reader, user_id: str | None = None) -> Q:
    """The turns the reader sees (the message type's search visibility; `user_id` is not part of it)."""
    return reader.condition() & ~Q(session__in=sessions_being_deleted(organization_id=reader.organization_id))


def session_list(*, reader: Reader, filters: dict | None = None):
    """The sessions the reader sees, newest first; a session accepted for deletion is not among them."""
    filters = filters or {}
    lookups = {"user_id": "end_user__user_id", "start": "last_message_at__gte", "end": "last_message_at__lte"}
    wanted = {
        lookups.get(name, name): filters[name] for name in (*lookups, "session_tag", "status") if filters.get(name)
    }
    queryset = reader.objects(Session).filter(session_visible(reader), **wanted).select_related("end_user")
    return queryset.order_by("-last_message_at", "-created_at")


def session_get(*, client, user_id: str, session_id: str, scope: str | None = None) -> Session:
    """One user's session by its id among those the client reads: the one in `scope`, else the write
    scope's, else the only one; NotFound, or a 400 asking for `scope` (naming readable scopes leaks nothing)."""
    queryset = (
        session_list(reader=client.reader)
        .select_related("organization")
        .filter(end_user__user_id=user_id, session_id=session_id)
    )
    if scope is not None:
        queryset = queryset.filter(scope=scope)
    sessions = list(queryset)
    own = [session for session in sessions if session.scope == client.write_scope]  # at most one
    if own or len(sessions) == 1:
        return (own or sessions)[0]
    if not sessions:
        raise NotFound()
    scopes = ", ".join(sorted(session.scope for session in sessions))
    message = f"Session {session_id!r} exists in several scopes this client reads ({scopes}); name one with ?scope=."
    raise InvalidInput({"scope": [message]})


def session_indexed_through(*, session: Session) -> int:
    """The turn number up to which every turn is indexed (neighbour context, vector by the configured
    model), so searchable by every method; 0 before any turn is."""
    pending = (
        Message.objects.filter(session=session)
        .exclude(embedding_model=embedding_model_name())
        .aggregate(first=Min("seq"))["first"]
    )
    return session.last_seq if pending is None else pending - 1


def session_messages(*, session: Session):
    return Message.objects.filter(session=session).defer("embedding", "search_vector").order_by("seq")


def messages_not_learned(*, session: Session):
    return session_messages(session=session).filter(learned_at__isnull=True)


def message_list(*, reader: Reader):
    return Message.objects.filter(message_visible(reader))


def checkpoint_list(*, reader: Reader, filters: dict):
    """One user's LangGraph checkpoints the reader sees, newest first (ids sort by time: uuid6)."""
    writes = (
        CheckpointWrite.objects.using(reader.database)
        .filter(
            organization_id=OuterRef("organization_id"),
            scope=OuterRef("scope"),
            end_user_id=OuterRef("end_user_id"),
            thread_id=OuterRef("thread_id"),
            checkpoint_ns=OuterRef("checkpoint_ns"),
            checkpoint_id=OuterRef("checkpoint_id"),
        )
        .order_by("task_id", "idx")
        .values(write=JSONObject(task_id="task_id", task_path="task_path", idx="idx", channel="channel", value="value"))
    )
    queryset = (
        reader.rows(Checkpoint)
        .filter(end_user__user_id=filters["user_id"])
        .select_related("end_user")
        .annotate(writes=ArraySubquery(writes))
    )
    for name in ("thread_id", "checkpoint_ns", "checkpoint_id"):
        if name in filters:
            queryset = queryset.filter(**{name: filters[name]})
    if "before" in filters:
        queryset = queryset.filter(checkpoint_id__lt=filters["before"])
    if filters.get("metadata"):
        queryset = queryset.filter(metadata__contains=filters["metadata"])
    return queryset.order_by("-checkpoint_id", "thread_id", "checkpoint_ns")

"""The writer locks: one key per client (`writer:<organisation>:<client>`), held exclusively by its
erasure, so no background work derives anything from the turns being deleted.

A client writes into many users' sessions, so per-user locks cannot cover its erasure. Work storing
something derived from turns takes, shared, the key of each client that wrote them (`turns_held`):
either it commits first (the erasure then finds it by provenance), or it meets the erasure's lock or
a turn gone (LockNotAvailable: the task runs again on what is left).
"""

from collections.abc import Iterable

from apps.conversations.models import Message
from apps.pipeline.locks import LockNotAvailable, advisory_xact_lock_shared


class SourcesChanged(LockNotAvailable):
    """A turn or memory the work read was deleted before the work could store what it derived."""


def writer_lock_key(*, organization_id, client_id) -> str:
    return f"writer:{organization_id}:{client_id}"


def writer_locks(work) -> list[str]:
    """The writer locks of a pipeline.locks.WorkOf (registered in ConversationsConfig.ready)."""
    return [writer_lock_key(organization_id=work.organization_id, client_id=client) for client in work.client_ids]


def turns_held(*, organization_id, turn_ids: Iterable = (), client_ids: Iterable = (), cited_ids: Iterable = ()):
    """In the transaction storing what was derived from `turn_ids`: holds the writer locks of their
    writers, of `cited_ids`' (turns memories it read name) and of `client_ids`; SourcesChanged when a
    turn read is gone."""
    turn_ids = set(turn_ids)
    writers = set(client_ids)
    wrote = turn_ids | set(cited_ids)
    if wrote:
        writers |= set(
            Message.objects.filter(organization_id=organization_id, pk__in=list(wrote))
            .order_by()
            .values_list("created_by_id", flat=True)
            .distinct()
        )
    for key in sorted(writer_lock_key(organization_id=organization_id, client_id=c) for c in writers if c):
        advisory_xact_lock_shared(key)
    if turn_ids and Message.objects.filter(pk__in=list(turn_ids)).count() != len(turn_ids):
        raise SourcesChanged("A turn this work read was deleted meanwhile; it runs again on what is left.")

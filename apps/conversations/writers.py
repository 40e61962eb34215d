"""The writer locks: what a client erasure takes so that no background work derives anything from
the turns it is deleting.

A client writes turns into sessions of many users (its own sessions and those other clients opened),
so the per-user locks of the work that learns from them cannot cover its erasure: it would have to
take three locks for every user it ever wrote for. Instead each client has one key,
`writer:<organisation>:<client>`, registered with pipeline.locks for a WorkOf's `client_ids`. An
erasure of the client holds it exclusively from its first step to its last; work that stores
something derived from turns calls `turns_held` in the transaction that stores it, which takes the
key of every client that wrote one of the turns (shared, so such work never waits for other such
work) until that transaction ends, and checks that the turns it read are all still there.

Either the work commits first (and the erasure, waiting for the key, then finds what it derived
by provenance), or the erasure holds the key (the work raises LockNotAvailable: a task waits in the
queue and runs again), or the erasure has finished (a turn read is gone: SourcesChanged, a
LockNotAvailable, and the next run reads what is left).
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
    """Inside the transaction that stores what was derived from `turn_ids` (the turns the work read):
    holds, until that transaction ends, the writer lock of every client that wrote one of them or of
    `cited_ids` (turns named by memories the work read, which may be gone) and of `client_ids`, and
    raises SourcesChanged when one of the turns read is gone."""
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

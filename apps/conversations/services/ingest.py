"""Ingest: storing a request's turns in their session, at most once per idempotency key, and queueing their work."""

import hashlib
import json
import re
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import CharField, Exists, OuterRef, Value
from django.db.models.functions import Cast, Concat
from django.utils import timezone

from apps.conversations.models import SESSION_ID_PATTERN, IngestRequest, Message, Session, SessionTag
from apps.conversations.routing import DELETE_SESSION, NewTurns, SessionEvent, session_delete_key, session_work
from apps.conversations.services.sessions import session_seal
from apps.conversations.turns import normalise_messages
from apps.core.bulk import copy_create, insert_unless_conflict
from apps.core.errors import ConflictError
from apps.core.validation import InputError, check_tags, check_text
from apps.pipeline.models import MemoryTask
from apps.tenancy.services import end_user_get_or_create


@dataclass(frozen=True)
class Ingested:
    """What one add did (apps.conversations.serializers.MemoryAddOutputSerializer renders it); kept with
    its idempotency key, so a replay answers the same."""

    session_id: str
    user_id: str
    session_tag: str
    status: str
    messages_stored: int
    messages_truncated: int
    first_seq: int | None  # of the turns stored; None when none was
    last_seq: int | None
    task_ids: list[str]  # the tasks queued or joined, each once


def request_fingerprint(body) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()


def _session_for_add(*, client, end_user, session_id: str, session_tag: str | None, filter_tags: dict):
    """Returns (session locked for update, created, tasks enqueued by sealing older sessions), all within
    the client's write scope (session ids are unique per user and scope)."""
    organization = client.organization
    lookup = {"organization": organization, "end_user": end_user, "scope": client.write_scope, "session_id": session_id}
    new = Session(
        **lookup, client=client, session_tag=session_tag or settings.DEFAULT_SESSION_TAG, filter_tags=filter_tags
    )
    # Inserted first, ON CONFLICT DO NOTHING: a new session costs one statement and no read back (no purge
    # can name its new key); an existing one, or a concurrent add's (waited for), is then read and locked.
    if insert_unless_conflict(new):
        return new, True, _seal_older_sessions(session=new, client=client)
    session = _session_locked(lookup)
    if session is None:  # the session ours conflicted with was deleted meanwhile: ours was never stored
        raise ConflictError(f"Session {session_id!r} was deleted while this request created it; send it again.")
    if session.status == Session.Status.SEALED:
        raise ConflictError(f"Session {session_id!r} is sealed; send new messages under a new session_id.")
    if session_tag and session.session_tag != session_tag:
        raise ConflictError(
            f"Session {session_id!r} is a {session.session_tag} session; it cannot receive {session_tag} messages."
        )
    return session, False, []


def _session_locked(lookup: dict) -> Session | None:
    """The session of `lookup`, locked, the organisation and end user in hand attached; one accepted for
    deletion is refused (its purge would take the new turns with it)."""
    purge = MemoryTask.objects.filter(
        task_type=DELETE_SESSION,
        idempotency_key=Concat(Value(session_delete_key("")), Cast(OuterRef("pk"), CharField())),
        status__in=MemoryTask.ACTIVE_STATUSES,
    )
    session = Session.objects.select_for_update(of=("self",)).filter(**lookup).annotate(deleting=Exists(purge)).first()
    if session is None:
        return None
    if session.deleting:
        raise ConflictError(
            f"Session {session.session_id!r} is being deleted; send new messages under a new session_id, "
            "or under this one once its deletion has finished."
        )
    session.organization, session.end_user = lookup["organization"], lookup["end_user"]
    return session


def _seal_older_sessions(*, session, client) -> list:
    """A newer session of the same user and tag closes the older open ones of the same scope."""
    older = (
        Session.objects.select_for_update()
        .filter(
            organization=session.organization_id,
            end_user=session.end_user_id,
            scope=session.scope,
            session_tag=session.session_tag,
            status=Session.Status.OPEN,
        )
        .exclude(pk=session.pk)
    )
    return [task for previous in older for task in session_seal(session=previous, client=client)]


def _check_add_arguments(user_id, session_id, session_tag, outcome, filter_tags, idempotency_key) -> None:
    """The API checked these at its edge; commands and tasks call this service directly."""
    try:
        if not isinstance(user_id, str) or not 1 <= len(user_id) <= 255:
            raise InputError("user_id", "Use a string of 1 to 255 characters.")
        check_text(user_id, field="user_id")
        if not isinstance(session_id, str) or not re.fullmatch(SESSION_ID_PATTERN, session_id):
            raise InputError("session_id", "Use 1-64 letters, digits, '_' or '-'.")
        if session_tag is not None and session_tag not in SessionTag.values:
            raise InputError("session_tag", f"Use one of {', '.join(SessionTag.values)}.")
        if outcome is not None and outcome not in Session.Outcome.values:
            raise InputError("outcome", f"Use one of {', '.join(Session.Outcome.values)}.")
        if filter_tags is not None:
            check_tags(filter_tags, field="filter_tags")
        if idempotency_key is not None:
            check_text(idempotency_key, field="Idempotency-Key")
    except InputError as exc:
        raise exc.as_validation_error() from None


@transaction.atomic
def messages_ingest(
    *,
    client,
    user_id: str,
    session_id: str,
    messages: list,
    occurred_at: datetime | None = None,
    session_tag: str | None = None,
    filter_tags: dict | None = None,
    seal: bool = False,
    outcome: str | None = None,
    idempotency_key: str | None = None,
    request_hash: str | None = None,
) -> Ingested:
    """Stores chat-format messages of one session as turns and enqueues their work in one transaction.
    Bad input raises (TurnError, ValidationError) before anything is stored; a replay under an
    idempotency key returns the first add's result, another body raises ConflictError."""
    turns = normalise_messages(
        messages, max_chars=settings.MESSAGE_MAX_CHARS, default_occurred_at=occurred_at or timezone.now()
    )
    _check_add_arguments(user_id, session_id, session_tag, outcome, filter_tags, idempotency_key)
    record = None
    if idempotency_key:
        record, first = _ingest_request_claim(client=client, key=idempotency_key, request_hash=request_hash)
        if record is None:
            return first

    filter_tags = {**(filter_tags or {}), "scope": client.write_scope}
    end_user = end_user_get_or_create(organization=client.organization, user_id=user_id)
    session, _, tasks = _session_for_add(
        client=client, end_user=end_user, session_id=session_id, session_tag=session_tag, filter_tags=filter_tags
    )
    first_seq = session.last_seq + 1
    stored = _turns_store(session=session, end_user=end_user, turns=turns, client=client, outcome=outcome, seal=seal)
    if stored or seal:
        tasks.extend(
            session_work(
                session,
                event=SessionEvent.SEAL if seal else SessionEvent.TURNS,
                client=client,
                new_turns=NewTurns(from_seq=first_seq, to_seq=session.last_seq) if stored else None,
            )
        )

    result = Ingested(
        session_id=session.session_id,
        user_id=user_id,
        session_tag=session.session_tag,
        status=session.status,
        messages_stored=stored,
        messages_truncated=sum(1 for turn in turns if turn.truncated),
        first_seq=first_seq if stored else None,
        last_seq=session.last_seq if stored else None,
        task_ids=list(dict.fromkeys(str(task.pk) for task in tasks if task is not None)),
    )
    if record is not None:
        record.response = asdict(result)
        record.save(update_fields=["response", "updated_at"])
    return result


def _ingest_request_claim(
    *, client, key: str, request_hash: str | None
) -> tuple[IngestRequest | None, Ingested | None]:
    """(new record, None) for a fresh key; (None, the first add's result) for a replay; ConflictError otherwise."""
    try:
        with transaction.atomic():
            return IngestRequest.objects.create(client=client, key=key, request_hash=request_hash), None
    except IntegrityError:
        previous = IngestRequest.objects.get(client=client, key=key)
        if previous.request_hash != request_hash:
            raise ConflictError("This Idempotency-Key was already used with a different request body.") from None
        return None, Ingested(**previous.response)


def _turns_store(*, session: Session, end_user, turns: list, client, outcome: str | None, seal: bool) -> int:
    """Appends the turns (COPY) and updates the session's counts, outcome and status in one statement."""
    now = timezone.now()
    first_seq = session.last_seq + 1
    stored = copy_create(
        Message,
        [
            {
                "organization_id": session.organization_id,
                "end_user_id": end_user.pk,
                "scope": session.scope,
                "session_id": session.pk,
                "seq": first_seq + offset,
                "created_by_id": client.pk,
                **vars(turn),  # normalise_messages dated every turn
            }
            for offset, turn in enumerate(turns)
        ],
    )
    session.message_count += stored
    session.last_seq += stored
    session.last_message_at = now
    if outcome:
        session.outcome = outcome
    if seal:  # in the same statement as the counts
        session.status = Session.Status.SEALED
        session.sealed_at = now
    session.save(
        update_fields=["message_count", "last_seq", "last_message_at", "outcome", "status", "sealed_at", "updated_at"]
    )
    return stored


def idempotency_records_prune() -> int:
    cutoff = timezone.now() - timedelta(hours=settings.IDEMPOTENCY_KEY_TTL_HOURS)
    return IngestRequest.objects.filter(created_at__lt=cutoff).delete()[0]

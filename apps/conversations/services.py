"""Writes of sessions and messages: ingest, sealing, outcome, deletion, and the routing of
background work by session_tag."""

import hashlib
import json
import logging
import re
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from apps.conversations.models import SESSION_ID_PATTERN, IngestRequest, Message, Session, SessionTag
from apps.conversations.turns import Turn
from apps.core.errors import ConflictError
from apps.core.validation import InputError, check_json, check_text
from apps.pipeline.models import MemoryTask
from apps.pipeline.registry import HANDLERS
from apps.pipeline.services import enqueue
from apps.tenancy.services import end_user_get_or_create

logger = logging.getLogger(__name__)

EMBED_MESSAGES = "embed_messages"
EXTRACT_MEMORIES = "extract_memories"
PROJECT_ENTITIES = "project_entities"
DISTILL_SESSION = "distill_session"


def request_fingerprint(body) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()


def _enqueue_if_handled(task_type: str, payload: dict, *, session: Session, client=None, **options) -> MemoryTask | None:
    """Routing points enqueue only work some app can do, so no row waits for a missing handler.

    The task carries the session's organisation and scope (who may see it) and the client whose
    request caused it, if any.
    """
    if task_type not in HANDLERS:
        logger.debug("no handler for %s yet; nothing enqueued", task_type)
        return None
    return enqueue(
        task_type, payload, organization=session.organization, scope=session.scope, client=client, **options
    )


def _enqueue_debounced(task_type: str, session: Session, *, key: str, delay: float, client=None) -> MemoryTask | None:
    """One pending task of this type per session, `delay` seconds out; while one runs, at most one
    follow-up waits."""
    run_after = timezone.now() + timedelta(seconds=delay)
    task = _enqueue_if_handled(
        task_type, {"session": str(session.pk)}, session=session, client=client, idempotency_key=key,
        run_after=run_after,
    )
    if task is not None and task.status == MemoryTask.Status.RUNNING:
        task = enqueue(
            task_type, {"session": str(session.pk)}, organization=session.organization, scope=session.scope,
            client=client, idempotency_key=f"{key}:after:{task.pk}", run_after=run_after,
        )
    return task


def _enqueue_extraction(session: Session, *, client=None) -> MemoryTask | None:
    return _enqueue_debounced(
        EXTRACT_MEMORIES, session, key=f"extract:{session.pk}", delay=settings.EXTRACTION_DEBOUNCE_SECONDS,
        client=client,
    )


def _enqueue_projection(session: Session, *, client=None) -> MemoryTask | None:
    """Entity projection reads the memories extraction learns, so it waits for extraction's debounce first."""
    return _enqueue_debounced(
        PROJECT_ENTITIES, session, key=f"project:{session.pk}", delay=2 * settings.EXTRACTION_DEBOUNCE_SECONDS,
        client=client,
    )


def session_seal(*, session: Session, client=None) -> list[MemoryTask]:
    """Seals a session; a sealed task session is queued for skill distillation."""
    if session.status == Session.Status.SEALED:
        return []
    session.status = Session.Status.SEALED
    session.sealed_at = timezone.now()
    session.save(update_fields=["status", "sealed_at", "updated_at"])
    tasks = []
    if session.session_tag == SessionTag.TASK:
        task = _enqueue_if_handled(
            DISTILL_SESSION, {"session": str(session.pk)}, session=session, client=client,
            idempotency_key=f"distill:{session.pk}",
        )
        tasks.append(task)
    return [task for task in tasks if task is not None]


def _session_for_add(*, client, end_user, session_id: str, session_tag: str | None, filter_tags: dict):
    """Returns (session locked for update, created, tasks enqueued by sealing older sessions).

    Everything here stays inside the client's write scope: session ids are unique per user and
    scope, so another scope's session of the same id is neither found nor changed, and a newer
    session seals only the older sessions of its own scope.
    """
    organization = client.organization
    lookup = {"organization": organization, "end_user": end_user, "scope": client.write_scope, "session_id": session_id}
    session = Session.objects.select_for_update().filter(**lookup).first()
    if session is not None:
        if session.status == Session.Status.SEALED:
            raise ConflictError(f"Session {session_id!r} is sealed; send new messages under a new session_id.")
        if session_tag and session.session_tag != session_tag:
            raise ConflictError(
                f"Session {session_id!r} is a {session.session_tag} session; it cannot receive {session_tag} messages."
            )
        return session, False, []
    try:
        with transaction.atomic():
            session = Session.objects.create(
                **lookup,
                client=client,
                session_tag=session_tag or settings.DEFAULT_SESSION_TAG,
                filter_tags=filter_tags,
            )
    except IntegrityError:  # a concurrent add created it first
        return _session_for_add(
            client=client, end_user=end_user, session_id=session_id, session_tag=session_tag, filter_tags=filter_tags
        )
    # A newer session of the same user and tag closes the older open ones of the same scope.
    tasks = []
    older = Session.objects.select_for_update().filter(
        organization=organization, end_user=end_user, scope=client.write_scope, session_tag=session.session_tag,
        status=Session.Status.OPEN,
    ).exclude(pk=session.pk)
    for previous in older:
        tasks.extend(session_seal(session=previous, client=client))
    return session, True, tasks


def _check_add_arguments(*, user_id, session_id, session_tag, outcome, filter_tags, idempotency_key) -> None:
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
            if not isinstance(filter_tags, dict):
                raise InputError("filter_tags", "Must be a JSON object.")
            check_json(filter_tags, field="filter_tags", depth=1)
        if idempotency_key is not None:
            check_text(idempotency_key, field="Idempotency-Key")
    except InputError as exc:
        raise exc.as_validation_error() from None


@transaction.atomic
def messages_add(
    *,
    client,
    user_id: str,
    session_id: str,
    turns: list[Turn],
    session_tag: str | None = None,
    filter_tags: dict | None = None,
    seal: bool = False,
    outcome: str | None = None,
    idempotency_key: str | None = None,
    request_hash: str | None = None,
) -> dict:
    """Stores a batch of turns and enqueues the background work, all in one transaction.

    Returns the response body. With an idempotency key, a replay of the same request
    returns the first response and stores nothing; a different request under the same
    key raises ConflictError.
    """
    _check_add_arguments(
        user_id=user_id, session_id=session_id, session_tag=session_tag, outcome=outcome, filter_tags=filter_tags,
        idempotency_key=idempotency_key,
    )
    record = None
    if idempotency_key:
        try:
            with transaction.atomic():
                record = IngestRequest.objects.create(client=client, key=idempotency_key, request_hash=request_hash)
        except IntegrityError:
            previous = IngestRequest.objects.get(client=client, key=idempotency_key)
            if previous.request_hash != request_hash:
                raise ConflictError(
                    "This Idempotency-Key was already used with a different request body."
                ) from None
            return previous.response

    filter_tags = dict(filter_tags or {})
    filter_tags["scope"] = client.write_scope
    end_user = end_user_get_or_create(organization=client.organization, user_id=user_id)
    session, _, tasks = _session_for_add(
        client=client, end_user=end_user, session_id=session_id, session_tag=session_tag, filter_tags=filter_tags
    )
    now = timezone.now()
    first_seq = session.last_seq + 1
    messages = [
        Message(
            organization_id=session.organization_id,
            end_user=end_user,
            scope=session.scope,
            session=session,
            seq=first_seq + offset,
            role=turn.role,
            name=turn.name,
            content=turn.content,
            tool_calls=turn.tool_calls,
            tool_call_id=turn.tool_call_id,
            metadata=turn.metadata,
            truncated=turn.truncated,
            occurred_at=turn.occurred_at or now,
            created_by=client,
        )
        for offset, turn in enumerate(turns)
    ]
    Message.objects.bulk_create(messages)
    session.message_count += len(messages)
    session.last_seq += len(messages)
    session.last_message_at = now
    if outcome:
        session.outcome = outcome
    session.save(update_fields=["message_count", "last_seq", "last_message_at", "outcome", "updated_at"])

    if messages:
        tasks.append(
            _enqueue_if_handled(
                EMBED_MESSAGES,
                {"session": str(session.pk), "from_seq": first_seq, "to_seq": session.last_seq},
                session=session,
                client=client,
            )
        )
        if session.session_tag == SessionTag.CONVERSATION:
            tasks.append(_enqueue_extraction(session, client=client))
            tasks.append(_enqueue_projection(session, client=client))
    if seal:
        tasks.extend(session_seal(session=session, client=client))

    body = {
        "session_id": session.session_id,
        "user_id": user_id,
        "session_tag": session.session_tag,
        "status": session.status,
        "messages_stored": len(messages),
        "messages_truncated": sum(1 for message in messages if message.truncated),
        "first_seq": first_seq if messages else None,
        "last_seq": session.last_seq if messages else None,
        "task_ids": [str(task.pk) for task in tasks if task is not None],
    }
    if record is not None:
        record.response = body
        record.save(update_fields=["response", "updated_at"])
    return body


@transaction.atomic
def session_seal_now(*, session: Session, client=None) -> list[MemoryTask]:
    session = Session.objects.select_for_update().get(pk=session.pk)
    return session_seal(session=session, client=client)


def session_set_outcome(*, session: Session, outcome: str) -> Session:
    session.outcome = outcome
    session.save(update_fields=["outcome", "updated_at"])
    return session


@transaction.atomic
def message_delete(*, message: Message) -> None:
    Session.objects.filter(pk=message.session_id).update(message_count=F("message_count") - 1)
    message.delete()


def seal_idle_sessions(*, batch_size: int = 500) -> int:
    """Seals open sessions that received nothing for SESSION_IDLE_SECONDS."""
    cutoff = timezone.now() - timedelta(seconds=settings.SESSION_IDLE_SECONDS)
    sealed = 0
    while True:
        with transaction.atomic():
            idle = list(
                Session.objects.select_for_update(skip_locked=True)
                .select_related("organization")
                .filter(status=Session.Status.OPEN, last_message_at__lt=cutoff)[:batch_size]
            )
            for session in idle:
                session_seal(session=session)
        sealed += len(idle)
        if len(idle) < batch_size:
            return sealed


def idempotency_records_prune() -> int:
    cutoff = timezone.now() - timedelta(hours=settings.IDEMPOTENCY_KEY_TTL_HOURS)
    deleted, _ = IngestRequest.objects.filter(created_at__lt=cutoff).delete()
    return deleted

"""Writes of sessions and messages: ingest, sealing, outcome, deletion, the marks other apps leave
on the turns they learned from, and retention's pruning. Other apps write these tables only here."""

import hashlib
import json
import re
from collections import Counter
from datetime import datetime, timedelta
from typing import Literal

from django.conf import settings
from django.contrib.postgres.fields.ranges import DateRange
from django.db import IntegrityError, transaction
from django.db.models import F, Q, Value
from django.db.models.functions import Greatest
from django.utils import timezone

from apps.conversations.models import SESSION_ID_PATTERN, IngestRequest, Message, Session, SessionTag
from apps.conversations.routing import (
    DISTILL_SESSION,
    EXTRACT_MEMORIES,
    PROJECT_ENTITIES,
    distillation_enqueue,
    embedding_enqueue,
    extraction_enqueue,
    projection_enqueue,
)
from apps.conversations.turns import normalise_messages
from apps.core.errors import ConflictError
from apps.core.events import SESSION_LEARNED, emit_event
from apps.core.temporal import ResolvedDate, find_dates, resolve_dates, span_of
from apps.core.validation import InputError, check_tags, check_text
from apps.pipeline.models import MemoryTask
from apps.pipeline.services import tasks_cancel
from apps.tenancy.services import end_user_get_or_create


def request_fingerprint(body) -> str:
    return hashlib.sha256(json.dumps(body, sort_keys=True, default=str).encode()).hexdigest()


def session_seal(*, session: Session, client=None) -> list[MemoryTask]:
    """Seals a session; a sealed task session is queued for skill distillation."""
    if session.status == Session.Status.SEALED:
        return []
    session.status = Session.Status.SEALED
    session.sealed_at = timezone.now()
    session.save(update_fields=["status", "sealed_at", "updated_at"])
    return _work_after_seal(session=session, client=client)


def _work_after_seal(*, session: Session, client) -> list[MemoryTask]:
    """What a session's sealing queues: distillation of a task session; a conversation's extraction
    and projection, due at once."""
    tasks = []
    if session.session_tag == SessionTag.TASK:
        tasks.append(distillation_enqueue(session, client=client))
    elif session.message_count:
        # Nothing more will join the session's waiting extraction and projection: they are due now.
        tasks.extend([extraction_enqueue(session, client=client), projection_enqueue(session, client=client)])
    return [task for task in tasks if task is not None]


def _session_for_add(*, client, end_user, session_id: str, session_tag: str | None, filter_tags: dict):
    """Returns (session locked for update, created, tasks enqueued by sealing older sessions).

    Everything here stays inside the client's write scope: session ids are unique per user and
    scope, so another scope's session of the same id is neither found nor changed, and a newer
    session seals only the older sessions of its own scope.
    """
    organization = client.organization
    lookup = {"organization": organization, "end_user": end_user, "scope": client.write_scope, "session_id": session_id}
    session = _session_locked(lookup)
    if session is None:
        new = Session(
            **lookup, client=client, session_tag=session_tag or settings.DEFAULT_SESSION_TAG, filter_tags=filter_tags
        )
        # ON CONFLICT DO NOTHING: a concurrent add that created it first is waited for, and its session
        # is the one read back (any other violation, a CHECK, is raised).
        Session.objects.bulk_create([new], ignore_conflicts=True)
        session = _session_locked(lookup)
        if session is None:  # the concurrent add's session was deleted meanwhile: ours was never stored
            raise ConflictError(f"Session {session_id!r} was deleted while this request created it; send it again.")
        if session.pk == new.pk:
            return session, True, _seal_older_sessions(session=session, client=client)
    if session.status == Session.Status.SEALED:
        raise ConflictError(f"Session {session_id!r} is sealed; send new messages under a new session_id.")
    if session_tag and session.session_tag != session_tag:
        raise ConflictError(
            f"Session {session_id!r} is a {session.session_tag} session; it cannot receive {session_tag} messages."
        )
    return session, False, []


def _session_locked(lookup: dict) -> Session | None:
    """The session of `lookup`, locked for update, with the organisation and end user already in
    hand attached (the tasks it enqueues read them)."""
    session = Session.objects.select_for_update().filter(**lookup).first()
    if session is not None:
        session.organization, session.end_user = lookup["organization"], lookup["end_user"]
    return session


def _seal_older_sessions(*, session, client) -> list:
    """A newer session of the same user and tag closes the older open ones of the same scope."""
    tasks = []
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
    for previous in older:
        tasks.extend(session_seal(session=previous, client=client))
    return tasks


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
) -> dict:
    """Stores OpenAI chat-format messages of one session as turns (see turns.py) and enqueues the
    background work, all in one transaction; `occurred_at` dates the turns that carry no date.

    Raises TurnError, naming every bad message, or a ValidationError naming a bad argument, before
    anything is stored. Returns the response
    body. With an idempotency key, a replay of the same request returns the first response and
    stores nothing; a different request under the same key raises ConflictError.
    """
    turns = normalise_messages(
        messages, max_chars=settings.MESSAGE_MAX_CHARS, default_occurred_at=occurred_at or timezone.now()
    )
    _check_add_arguments(
        user_id=user_id,
        session_id=session_id,
        session_tag=session_tag,
        outcome=outcome,
        filter_tags=filter_tags,
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
                raise ConflictError("This Idempotency-Key was already used with a different request body.") from None
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
    if seal:  # in the same statement as the counts
        session.status = Session.Status.SEALED
        session.sealed_at = now
    session.save(
        update_fields=["message_count", "last_seq", "last_message_at", "outcome", "status", "sealed_at", "updated_at"]
    )

    if messages:
        tasks.append(embedding_enqueue(session, from_seq=first_seq, to_seq=session.last_seq, client=client))
        if session.session_tag == SessionTag.CONVERSATION and not seal:
            tasks.append(extraction_enqueue(session, client=client))
            tasks.append(projection_enqueue(session, client=client))
    if seal:
        tasks.extend(_work_after_seal(session=session, client=client))

    body = {
        "session_id": session.session_id,
        "user_id": user_id,
        "session_tag": session.session_tag,
        "status": session.status,
        "messages_stored": len(messages),
        "messages_truncated": sum(1 for message in messages if message.truncated),
        "first_seq": first_seq if messages else None,
        "last_seq": session.last_seq if messages else None,
        "task_ids": list(dict.fromkeys(str(task.pk) for task in tasks if task is not None)),
    }
    if record is not None:
        record.response = body
        record.save(update_fields=["response", "updated_at"])
    return body


@transaction.atomic
def session_seal_now(*, session: Session, client=None) -> list[MemoryTask]:
    session = Session.objects.select_for_update().get(pk=session.pk)
    return session_seal(session=session, client=client)


# The work each tag routes a session to, as queued for that session.
TAG_WORK = {SessionTag.CONVERSATION: (EXTRACT_MEMORIES, PROJECT_ENTITIES), SessionTag.TASK: (DISTILL_SESSION,)}


def session_learned_from(session: Session) -> str:
    """Why the session counts as learned from, by the marks learning leaves on it ("" if none)."""
    if session.distilled_at:
        return "it was distilled"
    if session.extracted_at or Message.objects.filter(session=session, learned_at__isnull=False).exists():
        return "its turns were extracted"
    return ""


@transaction.atomic
def session_retag(*, session: Session, session_tag: str, client=None) -> Session:
    """Moves a session not yet learned from to the other tag's routing: the old tag's queued work for
    it is cancelled, the new tag's is queued (extraction and projection for a conversation;
    distillation for a task session that is sealed). The caller holds the owner's work locks and has
    checked the rows other apps derive (apps.agent.operations.update_session)."""
    if session.session_tag == session_tag:
        return session
    why = session_learned_from(session)
    if why:
        raise ConflictError(f"The session's tag can no longer change: {why}.")
    tasks_cancel(
        queryset=MemoryTask.objects.filter(
            task_type__in=TAG_WORK[session.session_tag], payload__session=str(session.pk)
        )
    )
    session.session_tag = session_tag
    session.save(update_fields=["session_tag", "updated_at"])
    if session_tag == SessionTag.CONVERSATION:
        extraction_enqueue(session, client=client)
        projection_enqueue(session, client=client)
    elif session.status == Session.Status.SEALED:
        distillation_enqueue(session, client=client)
    return session


def session_set_outcome(*, session: Session, outcome: str) -> Session:
    session.outcome = outcome
    session.save(update_fields=["outcome", "updated_at"])
    return session


CONTEXT_MAX_CHARS = 2000


def neighbour_context(previous: Message | None, following: Message | None, metadata: dict) -> str:
    """A turn's stored `context`: the text of the turns right before and after it (seq ± 1), and its
    date line. The one rule for writing it, at indexing and when a neighbour is deleted."""
    parts = [neighbour.embedding_text()[:CONTEXT_MAX_CHARS] for neighbour in (previous, following) if neighbour]
    return context_with_dates("\n".join(parts), metadata)


def session_lock(*, session_id) -> None:
    """Locks the session row for the caller's transaction: whoever writes neighbour context (indexing)
    and whoever deletes turns (deletion, erasure, retention) take it, so a context is never computed
    from a turn that is being deleted."""
    sessions_lock(session_ids=[session_id])


def sessions_lock(*, session_ids) -> None:
    """session_lock of several sessions, always in the same order (no deadlock between two callers)."""
    list(
        Session.objects.select_for_update().filter(pk__in=list(session_ids)).order_by("pk").values_list("pk", flat=True)
    )


def _refresh_neighbours(*, places: set[tuple]) -> int:
    """Recomputes the context of the surviving turns at `places` ((session id, seq) pairs) from their
    neighbours as they are now."""
    if not places:
        return 0
    candidates = Message.objects.filter(
        session_id__in={session_id for session_id, _ in places},
        seq__in={seq + step for _, seq in places for step in (-1, 0, 1)},
    ).only("id", "session_id", "seq", "role", "name", "content", "context", "metadata")
    window = {(message.session_id, message.seq): message for message in candidates}
    changed = []
    for session_id, seq in places:
        message = window.get((session_id, seq))
        if message is None:
            continue
        context = neighbour_context(
            window.get((session_id, seq - 1)), window.get((session_id, seq + 1)), message.metadata
        )
        if context != message.context:
            message.context = context
            changed.append(message)
    Message.objects.bulk_update(changed, ["context"])
    return len(changed)


@transaction.atomic
def messages_delete(*, message_ids) -> dict:
    """Deletes turns in one transaction under their sessions' locks: the turns go, the surviving turns
    next to them get a context (and so a search vector) without their text, and each session's count
    drops. Returns {"deleted": n, "contexts": n}."""
    rows = list(Message.objects.filter(pk__in=list(message_ids)).values_list("pk", "session_id", "seq"))
    if not rows:
        return {"deleted": 0, "contexts": 0}
    sessions_lock(session_ids={session_id for _, session_id, _ in rows})
    _, per_model = Message.objects.filter(pk__in=[pk for pk, _, _ in rows]).delete()
    gone = {(session_id, seq) for _, session_id, seq in rows}
    contexts = _refresh_neighbours(
        places={(session_id, seq + step) for session_id, seq in gone for step in (-1, 1)} - gone
    )
    by_count: dict[int, list] = {}
    for session_id, count in Counter(session_id for _, session_id, _ in rows).items():
        by_count.setdefault(count, []).append(session_id)
    for count, session_ids in by_count.items():
        Session.objects.filter(pk__in=session_ids).update(
            message_count=Greatest(F("message_count") - count, Value(0)), updated_at=timezone.now()
        )
    return {"deleted": per_model.get(Message._meta.label, 0), "contexts": contexts}


def session_hand_over(*, session: Session) -> bool:
    """A session whose opener is erased but which holds other clients' turns stays, theirs: it passes to
    the client that wrote its earliest remaining turn, without the opener's filter tags. Returns False
    when no turn is left (the caller deletes the session)."""
    heir = Message.objects.filter(session=session).order_by("seq").values_list("created_by_id", flat=True).first()
    if heir is None:
        return False
    Session.objects.filter(pk=session.pk).update(
        client_id=heir, filter_tags={"scope": session.scope}, updated_at=timezone.now()
    )
    return True


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


# Learning marks ----------------------------------------------------------------------------------

DATE_KEYS = ("resolved_date", "date_end", "date_granularity", "date_expression", "resolved_dates")
DATE_NOTE_MARK = "\u23f1"
LEARNED_BY = {"distillation": "distilled_at", "extraction": "extracted_at"}


def context_with_dates(context: str, metadata: dict) -> str:
    """The context plus one line naming the absolute dates the turn's relative ones refer to
    (`metadata["resolved_dates"]`, see messages_set_dates), so keyword search finds a turn that
    said "last month" when asked about "May 2023". Replaces an earlier such line."""
    lines = [line for line in context.splitlines() if not line.startswith(DATE_NOTE_MARK)]
    dates = [entry.get("text", "") for entry in (metadata or {}).get("resolved_dates") or [] if isinstance(entry, dict)]
    if any(dates):
        lines.append(f"{DATE_NOTE_MARK} " + "; ".join(text for text in dates if text))
    return "\n".join(lines)


# The turns whose words are dated: what a person or an assistant said (not tool output or prompts).
DATED_ROLES = (Message.Role.USER, Message.Role.ASSISTANT)


def date_metadata(dates: list[ResolvedDate]) -> dict:
    """A turn's DATE_KEYS for its relative dates: the first expression as the top-level keys
    (resolved_date, date_granularity, ...); all of them, with human words for each, under
    resolved_dates. {} for none."""
    if not dates:
        return {}
    return {
        **dates[0].as_metadata(),
        "resolved_dates": [{**resolved.as_metadata(), "text": resolved.describe()} for resolved in dates],
    }


def date_range(span) -> DateRange | None:
    """A (first day, last day) pair as stored in a `date_span` column (canonical: upper bound excluded)."""
    return None if span is None else DateRange(span[0], span[1] + timedelta(days=1), "[)")


def message_apply_dates(message: Message) -> bool:
    """Sets a turn's date metadata (its relative dates resolved against its own date) and its
    `date_span` (every date its words name) on the instance; True when either changed."""
    spoken = message.role in DATED_ROLES and message.content.strip()
    relative = resolve_dates(message.content, message.occurred_at) if spoken else []
    span = date_range(span_of(find_dates(message.content, message.occurred_at))) if spoken else None
    kept = {key: value for key, value in (message.metadata or {}).items() if key not in DATE_KEYS}
    metadata = {**kept, **date_metadata(relative)}
    if metadata == (message.metadata or {}) and span == message.date_span:
        return False
    message.metadata, message.date_span = metadata, span
    return True


DATED_FIELDS = ("id", "role", "content", "occurred_at", "metadata", "context", "date_span")


def messages_normalize_dates(*, message_ids: list) -> list:
    """Re-dates the turns from their words (message_apply_dates), under lock, writing only those
    that changed (with the date line of their context); returns the ids of those."""
    with transaction.atomic():
        messages = list(
            Message.objects.select_for_update().filter(pk__in=list(message_ids)).order_by("pk").only(*DATED_FIELDS)
        )
        changed = [message for message in messages if message_apply_dates(message)]
        for message in changed:
            message.context = context_with_dates(message.context, message.metadata)
        Message.objects.bulk_update(changed, ["metadata", "context", "date_span"])
    return [message.pk for message in changed]


def messages_lock_unlearned(*, message_ids: list) -> bool:
    """Locks the turns for the caller's transaction; False when some run learned from one of them meanwhile."""
    learned = (
        Message.objects.select_for_update()
        .filter(pk__in=message_ids)
        .order_by("pk")
        .values_list("learned_at", flat=True)
    )
    return all(learned_at is None for learned_at in learned)


def messages_set_dates(*, dates: dict) -> int:
    """Stores the absolute dates of each turn's relative ones: `dates` maps a message id to its DATE_KEYS,
    which replace the turn's earlier ones, and the turn's searchable context gets a line naming them.

    The turns are re-read under lock, so what the embedding handler wrote meanwhile is kept.
    """
    messages = list(
        Message.objects.select_for_update().filter(pk__in=list(dates)).order_by("pk").only("id", "metadata", "context")
    )
    for message in messages:
        kept = {key: value for key, value in (message.metadata or {}).items() if key not in DATE_KEYS}
        message.metadata = {**kept, **{key: value for key, value in dates[message.pk].items() if key in DATE_KEYS}}
        message.context = context_with_dates(message.context, message.metadata)
    Message.objects.bulk_update(messages, ["metadata", "context"])
    return len(messages)


def messages_mark_learned(
    *,
    session: Session,
    by: Literal["distillation", "extraction"],
    message_ids: list | None = None,
    through_seq: int | None = None,
) -> datetime:
    """Marks the session distilled or extracted (`by`) and its turns not learned from yet as learned
    from now (all of them, or those of `message_ids`, or up to `through_seq`). Retention prunes only
    learned turns. Call it in the transaction that stores what was learned."""
    field = LEARNED_BY[by]
    now = timezone.now()
    turns = Message.objects.filter(session=session, learned_at__isnull=True)
    if message_ids is not None:
        turns = turns.filter(pk__in=message_ids)
    if through_seq is not None:
        turns = turns.filter(seq__lte=through_seq)
    turns.update(learned_at=now)
    Session.objects.filter(pk=session.pk).update(**{field: now, "updated_at": now})
    setattr(session, field, now)
    return now


def session_announce_learned(*, session: Session, by: Literal["distillation", "extraction"], **counts) -> None:
    """Tells the listeners (webhooks) that a session's learning finished: a task session distilled, or
    a sealed conversation session with every turn extracted. Call it in the transaction that marks
    the last turns learned. `counts`: small numbers of what was learned."""
    emit_event(
        SESSION_LEARNED,
        organization_id=session.organization_id,
        data={
            "session_id": session.session_id,
            "user_id": session.end_user.user_id,
            "scope": session.scope,
            "session_tag": session.session_tag,
            "learned_by": by,
            **counts,
        },
    )


def messages_mark_unlearned(*, turns) -> list:
    """Turns whose learned product was deleted (a memory that also cited a turn that went) are learned
    from again by the next extraction; returns the ids of their sessions."""
    session_ids = list(turns.order_by().values_list("session_id", flat=True).distinct())
    turns.update(learned_at=None)
    return session_ids


def messages_prune_learned(*, cutoff: datetime, batch_size: int) -> Counter:
    """Deletes the turns learned from before `cutoff` of sessions distilled or extracted before it,
    batch by batch (messages_delete: the turns left next to them lose their text from their context);
    a turn nothing learned from is never pruned. Returns the count per organisation id."""
    learned = Session.objects.filter(Q(distilled_at__lt=cutoff) | Q(extracted_at__lt=cutoff))
    prunable = Message.objects.filter(session__in=learned.values("pk"), learned_at__isnull=False, learned_at__lt=cutoff)
    per_organization: Counter = Counter()
    while True:
        rows = list(prunable.values_list("pk", "organization_id")[:batch_size])
        messages_delete(message_ids=[row[0] for row in rows])
        per_organization.update(str(row[1]) for row in rows)
        if len(rows) < batch_size:
            return per_organization

"""Extraction of conversation sessions: the turns not yet learned from become episodic and semantic
memories (with an LLM) and, in every mode, carry their relative dates resolved in their metadata."""

import logging

from django.conf import settings
from django.db import transaction

from apps.conversations.models import Message, Session, SessionTag
from apps.conversations.selectors import messages_not_learned
from apps.conversations.services.dates import date_metadata, messages_set_dates
from apps.conversations.services.learning import (
    messages_lock_unlearned,
    messages_mark_learned,
    session_announce_learned,
)
from apps.conversations.services.sessions import sessions_lock
from apps.conversations.writers import turns_held
from apps.core.temporal import resolve_dates
from apps.memories.services.llm_extractor import ExtractionTurn, Operation, Plan, extraction_batches, llm_plan
from apps.memories.services.memories import (
    EPISODIC,
    SEMANTIC,
    memory_create,
    memory_embed,
    memory_snapshot,
    memory_soft_delete,
    memory_update,
)
from apps.pipeline.locks import UserLocks, advisory_lock
from apps.providers.llm import llm_enabled

logger = logging.getLogger(__name__)

SPOKEN_ROLES = (Message.Role.USER, Message.Role.ASSISTANT)
EXTRACT_LOCKS = UserLocks("extract")  # registered in MemoriesConfig.ready


def _tally() -> dict:
    return {"added": 0, "updated": 0, "deleted": 0, "unchanged": 0}


def _actor() -> str:
    return f"extraction:llm:{settings.LLM_MODEL}"


def _written(operation: Operation, vectors: dict, task_id) -> dict:
    return {
        "fields": operation.fields,
        "source_message_ids": operation.source_message_ids,
        "embedding": vectors[id(operation)],
        "actor": _actor(),
        "reason": operation.reason,
        "task_id": task_id,
    }


def _embed_changes(plan: Plan) -> dict:
    """Vectors of what adds and updates will write, by id(operation); computed before any row is locked."""
    vectors = {}
    for memory_type in (EPISODIC, SEMANTIC):
        of_type = [
            operation
            for operation in plan.operations
            if operation.memory_type == memory_type and operation.operation in ("add", "update")
        ]
        # An add has no target: its text is its fields alone.
        texts = [{**(memory_snapshot(op.target) if op.target else {}), **op.fields} for op in of_type]
        vectors.update(zip(map(id, of_type), memory_embed(memory_type, texts)))
    return vectors


def _apply(*, session: Session, plan: Plan, turns: list[ExtractionTurn], vectors: dict, task, result: dict) -> None:
    task_id = getattr(task, "pk", None)
    for operation in plan.operations:
        tally = result[operation.memory_type]
        if operation.operation == "none":
            tally["unchanged"] += 1
            continue
        if operation.operation == "add":
            if operation.memory_type == SEMANTIC:
                cited = [turn.message for turn in turns if turn.message.pk in operation.source_message_ids]
                when = f" on {cited[0].occurred_at:%Y-%m-%d}" if cited else ""
                operation.fields.setdefault("source", f"conversation {session.session_id}{when}"[:255])
            memory_create(memory_type=operation.memory_type, session=session, **_written(operation, vectors, task_id))
            tally["added"] += 1
            continue
        # The target again, locked, if it is still live (an API delete may have removed it meanwhile).
        live = type(operation.target).objects.select_for_update().filter(deleted_at__isnull=True)
        target = live.filter(pk=operation.target.pk).first()
        if target is None:
            plan.rejected.append(
                {
                    "memory_type": operation.memory_type,
                    "operation": operation.operation,
                    "id": str(operation.target.pk),
                    "reason": "the memory was deleted meanwhile",
                }
            )
            continue
        if operation.operation == "update":
            memory_update(memory=target, **_written(operation, vectors, task_id))
            tally["updated"] += 1
        else:
            memory_soft_delete(memory=target, actor=_actor(), reason=operation.reason, task_id=task_id)
            tally["deleted"] += 1


def session_extract(*, session: Session, task=None) -> dict:
    """Learns from the session's unlearned turns batch by batch, each marked learned where its memories are stored.
    Run it under EXTRACT_LOCKS.key_of(session); an unreachable LLM raises (the task retries), stored batches stay."""
    if session.session_tag != SessionTag.CONVERSATION:
        return {"skipped": f"a {session.session_tag} session is not extracted", "turns": 0}
    pending = list(messages_not_learned(session=session))
    use_llm = llm_enabled()
    result = {
        "extractor": f"llm:{settings.LLM_MODEL}" if use_llm else "rules",
        "turns": 0,
        "dates_resolved": 0,
        EPISODIC: _tally(),
        SEMANTIC: _tally(),
        "rejected": [],
        "problems": [],
    }
    # Each spoken turn with the relative dates it contains, resolved against its own date.
    spoken = {
        message.pk: ExtractionTurn(message=message, dates=resolve_dates(message.content, message.occurred_at))
        for message in pending
        if message.role in SPOKEN_ROLES and message.content.strip()
    }
    for batch in extraction_batches(pending, spoken):
        turns = [spoken[message.pk] for message in batch if message.pk in spoken]
        plan = llm_plan(session=session, turns=turns, task=task) if use_llm and turns else Plan()
        vectors = _embed_changes(plan)
        batch_ids = [message.pk for message in batch]
        with transaction.atomic():
            # The session row, then its turns: indexing's order (embed_messages), so the two cannot deadlock.
            sessions_lock(session_ids=[session.pk])
            # Until this commits no erasure of these turns' writers can run (one since makes the task retry).
            turns_held(organization_id=session.organization_id, turn_ids=batch_ids)
            if not messages_lock_unlearned(message_ids=batch_ids):
                result["problems"].append("some turns were learned from by another run meanwhile; batch skipped")
                continue
            result["dates_resolved"] += messages_set_dates(
                dates={turn.message.pk: date_metadata(turn.dates) for turn in turns if turn.dates}
            )
            _apply(session=session, plan=plan, turns=turns, vectors=vectors, task=task, result=result)
            messages_mark_learned(session=session, by="extraction", message_ids=batch_ids)
            sealed = Session.objects.filter(pk=session.pk, status=Session.Status.SEALED).exists()
            if sealed and not messages_not_learned(session=session).exists():
                session_announce_learned(session=session, by="extraction")
        result["turns"] += len(batch)
        result["rejected"].extend(plan.rejected)
        result["problems"].extend(plan.problems)
    if result["rejected"] or result["problems"]:
        # Counted, not quoted: the problems cite the model's output (kept in the task's result).
        logger.info(
            "extraction of session %s: %s rejected operation(s), %s problem(s)",
            session.pk,
            len(result["rejected"]),
            len(result["problems"]),
        )
    return result


def session_extract_locked(*, session: Session, task=None) -> dict:
    """session_extract under the per-user advisory lock; raises LockNotAvailable so the pipeline retries."""
    with advisory_lock(EXTRACT_LOCKS.key_of(session), wait=False):
        return session_extract(session=session, task=task)

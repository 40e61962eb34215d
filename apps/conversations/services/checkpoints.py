"""Writes of LangGraph checkpoints: a checkpoint stored (or replaced) in the client's write scope, the
pending writes of its tasks, and a thread deleted."""

from django.db import transaction

from apps.conversations.models import Checkpoint, CheckpointWrite
from apps.tenancy.services import end_user_get_or_create


def _thread(*, client, user_id: str, thread_id: str):
    return Checkpoint.objects.filter(
        organization=client.organization, scope=client.write_scope, end_user__user_id=user_id, thread_id=thread_id
    )


@transaction.atomic
def checkpoint_put(*, client, user_id: str, thread_id: str, checkpoint_ns: str, checkpoint_id: str, **fields) -> dict:
    """Stores the checkpoint (the same id again replaces it, keeping its writes) and answers which of its
    `message_ids` no checkpoint of the thread held before (the SDK copies those into session turns)."""
    end_user = end_user_get_or_create(organization=client.organization, user_id=user_id)
    message_ids = fields.get("message_ids", [])
    known = set()
    if message_ids:
        for held in (
            _thread(client=client, user_id=user_id, thread_id=thread_id)
            .filter(message_ids__has_any_keys=message_ids)
            .values_list("message_ids", flat=True)
        ):
            known.update(held)
    Checkpoint.objects.update_or_create(
        organization=client.organization,
        scope=client.write_scope,
        end_user=end_user,
        thread_id=thread_id,
        checkpoint_ns=checkpoint_ns,
        checkpoint_id=checkpoint_id,
        defaults={"client": client, **fields},
    )
    return {"new_message_ids": [message_id for message_id in message_ids if message_id not in known]}


@transaction.atomic
def checkpoint_writes_put(
    *,
    client,
    user_id: str,
    thread_id: str,
    checkpoint_ns: str,
    checkpoint_id: str,
    task_id: str,
    task_path: str,
    writes,
) -> int:
    """Stores the task's writes against the checkpoint (which may not be stored yet), in two statements
    whatever their number; answers how many writes the task now holds there. A write to one of
    LangGraph's special channels (a negative `idx`) replaces the task's earlier one; a regular write is
    kept as first written, as LangGraph's own savers do."""
    end_user = end_user_get_or_create(organization=client.organization, user_id=user_id)
    owner = {
        "organization": client.organization,
        "scope": client.write_scope,
        "end_user": end_user,
        "thread_id": thread_id,
        "checkpoint_ns": checkpoint_ns,
        "checkpoint_id": checkpoint_id,
        "task_id": task_id,
    }
    rows = {
        write["idx"]: CheckpointWrite(
            **owner,
            client=client,
            task_path=task_path,
            idx=write["idx"],
            channel=write["channel"],
            value=write["value"],
        )
        for write in reversed(writes)  # the first of one idx wins within a request too
    }
    unique = ["organization", "scope", "end_user", "thread_id", "checkpoint_ns", "checkpoint_id", "task_id", "idx"]
    CheckpointWrite.objects.bulk_create([row for idx, row in rows.items() if idx >= 0], ignore_conflicts=True)
    CheckpointWrite.objects.bulk_create(
        [row for idx, row in rows.items() if idx < 0],
        update_conflicts=True,
        unique_fields=unique,
        update_fields=["client", "task_path", "channel", "value", "updated_at"],
    )
    return CheckpointWrite.objects.filter(**owner).count()


def checkpoint_thread_delete(*, client, user_id: str, thread_id: str) -> int:
    """Every checkpoint of the thread in the client's write scope, in every namespace, with its writes;
    the number of checkpoints (0 when none)."""
    owner = {
        "organization": client.organization,
        "scope": client.write_scope,
        "end_user__user_id": user_id,
        "thread_id": thread_id,
    }
    with transaction.atomic():
        CheckpointWrite.objects.filter(**owner).delete()
        return Checkpoint.objects.filter(**owner).delete()[0]

"""Pipeline handlers of conversation memory: thin, they load by id and call a service."""

from apps.conversations.models import Session
from apps.conversations.routing import EXTRACT_MEMORIES
from apps.memories.services.consolidate import CONSOLIDATE_MEMORIES, consolidation_run
from apps.memories.services.dates import NORMALIZE_DATES, dates_normalize
from apps.memories.services.extract import session_extract_locked
from apps.pipeline.models import MemoryTask
from apps.pipeline.registry import payload_row, register_handler


@register_handler(EXTRACT_MEMORIES, priority=MemoryTask.Priority.LEARN)
@payload_row("session", Session.objects.select_related("organization", "end_user"), gone="session", turns=0)
def handle_extract_memories(task, session) -> dict:
    return session_extract_locked(session=session, task=task)


@register_handler(NORMALIZE_DATES, priority=MemoryTask.Priority.MAINTENANCE)
def handle_normalize_dates(task) -> dict:
    return dates_normalize(
        organization=task.organization, scope=task.payload.get("scope"), user_id=task.payload.get("user_id")
    )


@register_handler(CONSOLIDATE_MEMORIES, priority=MemoryTask.Priority.MAINTENANCE)
def handle_consolidate_memories(task) -> dict:
    return consolidation_run(task=task)

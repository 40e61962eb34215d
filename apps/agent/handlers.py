"""Pipeline handlers of the agent's API: thin, they call a service."""

from apps.agent.consolidate import CONSOLIDATE_MEMORIES, consolidation_run
from apps.conversations.routing import DELETE_SESSION
from apps.pipeline.models import MemoryTask
from apps.pipeline.registry import register_handler
from apps.privacy.services.cascade import session_purge


@register_handler(DELETE_SESSION, priority=MemoryTask.Priority.URGENT)
def delete_session(task) -> dict:
    return session_purge(session_pk=task.payload["deleted_session"])


@register_handler(CONSOLIDATE_MEMORIES, priority=MemoryTask.Priority.MAINTENANCE)
def consolidate_memories(task) -> dict:
    return consolidation_run(task=task)

from celery import shared_task

from apps.memories.services.memories import memories_purge_deleted


@shared_task(name="memories.purge_deleted_memories")
def purge_deleted_memories() -> dict:
    return memories_purge_deleted()

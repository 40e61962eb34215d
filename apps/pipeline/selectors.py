from apps.pipeline.models import MemoryTask


def task_list(*, client):
    """Tasks of the caller's organisation (tasks carry ids, never memory text)."""
    return MemoryTask.objects.filter(organization_id=client.organization_id)

"""The task endpoint's operation (REST: apps.pipeline.views)."""

from apps.core.operations import check_ids, get_or_404, operation
from apps.pipeline.selectors import task_list
from apps.pipeline.serializers import TaskOutputSerializer


@operation()
def get_task(*, client, task_id: str) -> dict:
    """Read a background task's type and status."""
    check_ids(task_id=task_id)
    return TaskOutputSerializer(get_or_404(task_list(client=client), pk=task_id)).data

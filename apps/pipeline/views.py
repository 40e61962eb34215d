"""REST adapter of apps.pipeline.operations."""

from apps.core.adapters import read_view
from apps.pipeline import operations
from apps.pipeline.serializers import TaskOutputSerializer

TaskDetailView = read_view(
    operations.get_task,
    output=TaskOutputSerializer,
    example="GET /api/v1/tasks/9a0b1c2d-3e4f-4a5b-8c6d-7e8f9a0b1c2d/",
)

"""REST adapter of apps.pipeline.operations."""

from drf_spectacular.utils import extend_schema
from rest_framework.response import Response

from apps.core.api import ClientAPIView, serves
from apps.pipeline import operations
from apps.pipeline.serializers import TaskOutputSerializer


class TaskDetailView(ClientAPIView):
    @extend_schema(responses=TaskOutputSerializer)
    @serves(operations.get_task, example="GET /api/v1/tasks/9a0b1c2d-3e4f-4a5b-8c6d-7e8f9a0b1c2d/")
    def get(self, request, task_id):
        return Response(operations.get_task(client=self.client, task_id=task_id))

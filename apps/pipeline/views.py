from drf_spectacular.utils import extend_schema
from rest_framework.response import Response

from apps.core.api import ClientAPIView
from apps.pipeline.selectors import task_list
from apps.pipeline.serializers import TaskOutputSerializer


class TaskDetailView(ClientAPIView):
    def scoped_queryset(self, *, client):
        return task_list(client=client)

    @extend_schema(responses=TaskOutputSerializer)
    def get(self, request, task_id):
        return Response(TaskOutputSerializer(self.get_object(pk=task_id)).data)

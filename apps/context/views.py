"""REST adapter of apps.context.operations."""

from drf_spectacular.utils import extend_schema
from rest_framework.response import Response

from apps.context import operations
from apps.context.serializers import ContextInputSerializer, ContextOutputSerializer
from apps.core.api import ClientAPIView, serves
from apps.core.permissions import IsActiveClient


class ContextView(ClientAPIView):
    """Prompt-ready context for a user (and session) within a token budget."""

    permission_classes = [IsActiveClient]  # a read, even as a POST
    error_statuses = (404,)  # a session_id the client does not read

    @extend_schema(request=ContextInputSerializer, responses=ContextOutputSerializer)
    @serves(
        operations.get_context,
        example="POST /api/v1/memory/context",
        body={"user_id": "alice", "query": "Where is Alice flying next?", "max_tokens": 500},
    )
    def post(self, request):
        return Response(operations.get_context(client=self.client, data=request.data))

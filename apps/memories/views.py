"""REST adapters of apps.memories.operations."""

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.response import Response

from apps.core.api import ClientAPIView, serves
from apps.memories import operations


class EpisodicMemoryDeleteView(ClientAPIView):
    @extend_schema(responses={204: None})
    @serves(operations.delete_episodic_memory, example="DELETE /api/v1/memory/episodic/3d9f0b7a-1c2e-4f5a-8b6d-9e0c1a2b3c4d")
    def delete(self, request, item_id):
        operations.delete_episodic_memory(client=self.client, item_id=item_id)
        return Response(status=status.HTTP_204_NO_CONTENT)


class SemanticMemoryDeleteView(ClientAPIView):
    @extend_schema(responses={204: None})
    @serves(operations.delete_semantic_memory, example="DELETE /api/v1/memory/semantic/3d9f0b7a-1c2e-4f5a-8b6d-9e0c1a2b3c4d")
    def delete(self, request, item_id):
        operations.delete_semantic_memory(client=self.client, item_id=item_id)
        return Response(status=status.HTTP_204_NO_CONTENT)

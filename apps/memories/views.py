from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.response import Response

from apps.core.api import ClientAPIView, require_write_access
from apps.memories.selectors import episodic_memory_list, semantic_memory_list
from apps.memories.services.memories import memory_delete


class MemoryDeleteView(ClientAPIView):
    """Deletes one memory and its history for good (soft deletion is extraction's, not the caller's)."""

    @extend_schema(responses={204: None})
    def delete(self, request, item_id):
        memory = self.get_object(pk=item_id)
        require_write_access(self.client, memory)
        memory_delete(memory=memory)
        return Response(status=status.HTTP_204_NO_CONTENT)


class EpisodicMemoryDeleteView(MemoryDeleteView):
    def scoped_queryset(self, *, client):
        return episodic_memory_list(reader=client.reader)


class SemanticMemoryDeleteView(MemoryDeleteView):
    def scoped_queryset(self, *, client):
        return semantic_memory_list(reader=client.reader)

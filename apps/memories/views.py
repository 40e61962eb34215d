"""REST adapters of apps.memories.operations: each method passes the caller and the request's input to
one operation and renders its answer."""

from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import status
from rest_framework.response import Response

from apps.core.api import ClientAPIView, serves
from apps.core.pagination import Pagination, paged_response
from apps.memories import operations, serializers


class MemoryConsolidateView(ClientAPIView):
    """Merge duplicates and resolve contradictions for a user or the whole write scope."""

    error_statuses = (404,)  # a user_id the organisation does not know

    @extend_schema(
        request=serializers.ConsolidateInputSerializer, responses={202: serializers.ConsolidateOutputSerializer}
    )
    @serves(
        operations.consolidate_memories,
        example="POST /api/v1/memory/consolidate",
        body={"dry_run": True},
    )
    def post(self, request):
        body = operations.consolidate_memories(client=self.client, data=request.data)
        return Response(body, status=status.HTTP_202_ACCEPTED)


class MemoryListView(ClientAPIView):
    memory_type = ""
    pagination_class = Pagination  # also tells the OpenAPI schema the list is paginated

    @serves(operations.list_memories, example="GET /api/v1/memory/semantic/?user_id=alice")
    def get(self, request):
        return paged_response(
            request,
            operations.list_memories(client=self.client, memory_type=self.memory_type, data=request.query_params),
        )

    @serves(
        operations.create_memory,
        example="POST /api/v1/memory/semantic/",
        body={"user_id": "alice", "name": "Alice", "summary": "Alice prefers aisle seats."},
    )
    def post(self, request):
        body = operations.create_memory(client=self.client, memory_type=self.memory_type, data=request.data)
        return Response(body, status=status.HTTP_201_CREATED)


class MemoryDetailView(ClientAPIView):
    memory_type = ""
    error_statuses = (409,)  # an edit of a memory extraction retired

    @serves(operations.get_memory, example="GET /api/v1/memory/semantic/2e3f4a5b-6c7d-4e8f-9a0b-1c2d3e4f5a6b")
    def get(self, request, item_id):
        return Response(operations.get_memory(client=self.client, memory_type=self.memory_type, memory_id=item_id))

    @serves(
        operations.update_memory,
        example="PATCH /api/v1/memory/semantic/2e3f4a5b-6c7d-4e8f-9a0b-1c2d3e4f5a6b",
        body={"summary": "Alice prefers window seats."},
    )
    def patch(self, request, item_id):
        return Response(
            operations.update_memory(
                client=self.client, memory_type=self.memory_type, memory_id=item_id, data=request.data
            )
        )

    @serves(operations.delete_memory, example="DELETE /api/v1/memory/semantic/2e3f4a5b-6c7d-4e8f-9a0b-1c2d3e4f5a6b")
    def delete(self, request, item_id):
        operations.delete_memory(client=self.client, memory_type=self.memory_type, memory_id=item_id)
        return Response(status=status.HTTP_204_NO_CONTENT)


class MemoryHistoryView(ClientAPIView):
    memory_type = ""

    @extend_schema(responses=serializers.MemoryHistoryOutputSerializer)
    @serves(
        operations.get_memory_history,
        example="GET /api/v1/memory/semantic/2e3f4a5b-6c7d-4e8f-9a0b-1c2d3e4f5a6b/history",
    )
    def get(self, request, item_id):
        return Response(
            operations.get_memory_history(client=self.client, memory_type=self.memory_type, memory_id=item_id)
        )


def _typed_views(memory_type: str) -> tuple[type, type, type]:
    """One memory type's list, detail and history views, their schemas naming its own shapes."""
    output, create, patch = operations.MEMORY_SHAPES[memory_type]
    attributes = {"memory_type": memory_type, "__module__": __name__}
    name = memory_type.capitalize()
    list_view = extend_schema_view(
        get=extend_schema(parameters=[serializers.MemoryListFilterSerializer], responses=output(many=True)),
        post=extend_schema(request=create, responses={201: output}),
    )(type(f"{name}MemoryListView", (MemoryListView,), attributes))
    detail_view = extend_schema_view(
        get=extend_schema(responses=output),
        patch=extend_schema(request=patch, responses=output),
        delete=extend_schema(responses={204: None}),
    )(type(f"{name}MemoryDetailView", (MemoryDetailView,), attributes))
    return list_view, detail_view, type(f"{name}MemoryHistoryView", (MemoryHistoryView,), attributes)


EpisodicMemoryListView, EpisodicMemoryDetailView, EpisodicMemoryHistoryView = _typed_views("episodic")
SemanticMemoryListView, SemanticMemoryDetailView, SemanticMemoryHistoryView = _typed_views("semantic")

"""REST adapters of apps.search.operations."""

from drf_spectacular.utils import extend_schema
from rest_framework.response import Response

from apps.core.api import ClientAPIView, serves
from apps.search import operations
from apps.search.serializers import MemorySearchInputSerializer, SearchAllUsersInputSerializer, SearchOutputSerializer


def _query_params(request) -> dict:
    """Query strings may repeat memory_types; everything else is single-valued."""
    params = {key: request.query_params.get(key) for key in request.query_params}
    if len(request.query_params.getlist("memory_types")) > 1:
        params["memory_types"] = request.query_params.getlist("memory_types")
    return params


class MemorySearchView(ClientAPIView):
    @extend_schema(request=MemorySearchInputSerializer, responses=SearchOutputSerializer)
    @serves(
        operations.search_memory,
        example="POST /api/v1/memory/search",
        body={
            "user_id": "alice",
            "query": "Where does Ana live?",
            "memory_types": ["semantic", "episodic", "message"],
            "limit": 10,
        },
    )
    def post(self, request):
        return Response(operations.search_memory(client=self.client, data=request.data))

    @extend_schema(parameters=[MemorySearchInputSerializer], responses=SearchOutputSerializer)
    @serves(
        operations.search_memory,
        example="GET /api/v1/memory/search?user_id=alice&query=Where+does+Ana+live%3F&memory_types=semantic,message",
    )
    def get(self, request):
        return Response(operations.search_memory(client=self.client, data=_query_params(request), from_query=True))


class SearchAllUsersView(ClientAPIView):
    @extend_schema(parameters=[SearchAllUsersInputSerializer], responses=SearchOutputSerializer)
    @serves(operations.search_all_users, example="GET /api/v1/memory/search_all_users?query=Lisbon&limit=20")
    def get(self, request):
        return Response(operations.search_all_users(client=self.client, data=_query_params(request)))

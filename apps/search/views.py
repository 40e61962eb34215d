from drf_spectacular.utils import extend_schema
from rest_framework.response import Response

from apps.core.api import ClientAPIView
from apps.core.permissions import IsActiveClient
from apps.search.engine import search
from apps.search.serializers import (
    MemorySearchInputSerializer,
    SearchAllUsersInputSerializer,
    SearchOutputSerializer,
    render_hit,
)


def _query_params(request) -> dict:
    """Query strings may repeat memory_types; everything else is single-valued."""
    params = {key: request.query_params.get(key) for key in request.query_params}
    if len(request.query_params.getlist("memory_types")) > 1:
        params["memory_types"] = request.query_params.getlist("memory_types")
    return params


class SearchView(ClientAPIView):
    # A search reads, even as a POST: read-only clients may call it.
    permission_classes = [IsActiveClient]
    input_serializer = MemorySearchInputSerializer

    def run(self, data, *, from_query: bool):
        serializer = self.input_serializer(data=data, from_query=from_query)
        serializer.is_valid(raise_exception=True)
        params = dict(serializer.validated_data)
        hits = search(
            reader=self.client.reader,
            query=params.pop("query"),
            memory_types=params.pop("memory_types", None),
            method=params.pop("search_method", None),
            limit=params.pop("limit"),
            filters=params,
        )
        results = [render_hit(hit) for hit in hits]
        return Response({
            "query": serializer.validated_data["query"], "count": len(results), "reranked_by": hits.reranked_by,
            "decomposed_into": hits.decomposed_into, "results": results,
        })


class MemorySearchView(SearchView):
    """Search one user's memories of any type in the caller's read scopes."""

    @extend_schema(request=MemorySearchInputSerializer, responses=SearchOutputSerializer)
    def post(self, request):
        return self.run(request.data, from_query=False)

    @extend_schema(parameters=[MemorySearchInputSerializer], responses=SearchOutputSerializer)
    def get(self, request):
        return self.run(_query_params(request), from_query=True)


class SearchAllUsersView(SearchView):
    """The same search across every user of the caller's organisation (still within its read scopes)."""

    input_serializer = SearchAllUsersInputSerializer

    @extend_schema(parameters=[SearchAllUsersInputSerializer], responses=SearchOutputSerializer)
    def get(self, request):
        return self.run(_query_params(request), from_query=True)

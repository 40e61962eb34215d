"""REST adapters of the most common operation shapes: a paged list, and the read and the deletion of
one item (a view of both inherits from the two)."""

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.response import Response

from apps.core.api import ClientAPIView, serves
from apps.core.pagination import Pagination, paged_response


def list_view(operation, *, filters, output, example: str) -> type[ClientAPIView]:
    """GET with `filters` (an input serializer) as query parameters: one page of `output`."""

    class ListView(ClientAPIView):
        pagination_class = Pagination  # tells the OpenAPI schema the list is paginated

        @extend_schema(parameters=[filters], responses=output(many=True))
        @serves(operation, example=example)
        def get(self, request):
            return paged_response(request, operation(client=self.client, query=request.query_params))

    return ListView


def read_view(operation, *, output, example: str) -> type[ClientAPIView]:
    """GET of the item the path names (its id passed to `operation` under the path's own name): `output`."""

    class ReadView(ClientAPIView):
        @extend_schema(responses=output)
        @serves(operation, example=example)
        def get(self, request, **path_ids):
            return Response(operation(client=self.client, **path_ids))

    return ReadView


def delete_view(operation, *, example: str) -> type[ClientAPIView]:
    """DELETE of the item the path names (its id passed to `operation` under the path's own name): 204."""

    class DeleteView(ClientAPIView):
        @extend_schema(responses={204: None})
        @serves(operation, example=example)
        def delete(self, request, **path_ids):
            operation(client=self.client, **path_ids)
            return Response(status=status.HTTP_204_NO_CONTENT)

    return DeleteView

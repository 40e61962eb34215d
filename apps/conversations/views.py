"""REST adapters of apps.conversations.operations."""

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.response import Response

from apps.conversations import operations
from apps.conversations.serializers import (
    MemoryAddInputSerializer,
    MemoryAddOutputSerializer,
    OwnerQuerySerializer,
    SessionListFilterSerializer,
    SessionOutputSerializer,
    SessionPatchInputSerializer,
    SessionSealOutputSerializer,
)
from apps.core.api import ClientAPIView, serves
from apps.core.pagination import Pagination, paged_response
from apps.tenancy.models import SCOPE_PATTERN

USER_ID_PARAMETER = OpenApiParameter(
    "user_id", {"type": "string", "minLength": 1, "maxLength": 255}, required=True,
    description="The session owner's user id.",
)
SCOPE_PARAMETER = OpenApiParameter(
    "scope", {"type": "string", "pattern": SCOPE_PATTERN}, required=False,
    description="The session's scope, needed only when the id exists in several scopes the client reads "
    "(default: the client's write scope, else the only readable one).",
)


class MemoryAddView(ClientAPIView):
    error_statuses = (409,)  # a sealed session, another tag, a reused Idempotency-Key

    @extend_schema(
        request=MemoryAddInputSerializer,
        responses={202: MemoryAddOutputSerializer},
        parameters=[OpenApiParameter("Idempotency-Key", str, OpenApiParameter.HEADER, required=False)],
    )
    @serves(operations.add_memory)
    def post(self, request):
        body = operations.add_memory(
            client=self.client, data=request.data, idempotency_key=request.headers.get("Idempotency-Key")
        )
        return Response(body, status=status.HTTP_202_ACCEPTED)


class SessionListView(ClientAPIView):
    pagination_class = Pagination  # tells the OpenAPI schema the list is paginated

    @extend_schema(parameters=[SessionListFilterSerializer], responses=SessionOutputSerializer(many=True))
    @serves(operations.list_sessions)
    def get(self, request):
        return paged_response(request, operations.list_sessions(client=self.client, query=request.query_params))


class SessionDetailView(ClientAPIView):
    @extend_schema(parameters=[OwnerQuerySerializer], responses=SessionOutputSerializer)
    @serves(operations.get_session)
    def get(self, request, session_id):
        return Response(operations.get_session(client=self.client, session_id=session_id, query=request.query_params))

    @extend_schema(
        parameters=[USER_ID_PARAMETER, SCOPE_PARAMETER],
        request=SessionPatchInputSerializer,
        responses=SessionOutputSerializer,
    )
    @serves(operations.update_session)
    def patch(self, request, session_id):
        return Response(operations.update_session(
            client=self.client, session_id=session_id, query=request.query_params, data=request.data
        ))


class SessionSealView(ClientAPIView):
    @extend_schema(parameters=[USER_ID_PARAMETER, SCOPE_PARAMETER], request=None, responses=SessionSealOutputSerializer)
    @serves(operations.seal_session)
    def post(self, request, session_id):
        return Response(operations.seal_session(client=self.client, session_id=session_id, query=request.query_params))


class MessageDeleteView(ClientAPIView):
    @extend_schema(responses={204: None})
    @serves(operations.delete_message)
    def delete(self, request, item_id):
        operations.delete_message(client=self.client, item_id=item_id)
        return Response(status=status.HTTP_204_NO_CONTENT)

"""REST adapters of apps.conversations.operations."""

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.response import Response

from apps.conversations import operations, serializers
from apps.core.adapters import list_view
from apps.core.api import ClientAPIView, serves
from apps.tenancy.models import SCOPE_PATTERN

USER_ID_PARAMETER = OpenApiParameter(
    "user_id",
    {"type": "string", "minLength": 1, "maxLength": 255},
    required=True,
    description="The session owner's user id.",
)
SCOPE_PARAMETER = OpenApiParameter(
    "scope",
    {"type": "string", "pattern": SCOPE_PATTERN},
    required=False,
    description="The session's scope, needed only when the id exists in several scopes the client reads "
    "(default: the client's write scope, else the only readable one).",
)


class MemoryAddView(ClientAPIView):
    error_statuses = (409,)  # a sealed session, another tag, a reused Idempotency-Key

    @extend_schema(
        request=serializers.MemoryAddInputSerializer,
        responses={202: serializers.MemoryAddOutputSerializer},
        parameters=[OpenApiParameter("Idempotency-Key", str, OpenApiParameter.HEADER, required=False)],
    )
    @serves(
        operations.add_memory,
        example="POST /api/v1/memory/add",
        body={
            "user_id": "alice",
            "session_id": "chat-2024-06-01",
            "session_tag": "conversation",
            "messages": [
                {"role": "user", "content": "My sister Ana moved to Lisbon last month."},
                {"role": "assistant", "content": "Lovely! Do you plan to visit her?"},
            ],
        },
    )
    def post(self, request):
        body = operations.add_memory(
            client=self.client, data=request.data, idempotency_key=request.headers.get("Idempotency-Key")
        )
        return Response(body, status=status.HTTP_202_ACCEPTED)


SessionListView = list_view(
    operations.list_sessions,
    filters=serializers.SessionListFilterSerializer,
    output=serializers.SessionOutputSerializer,
    example="GET /api/v1/sessions/?user_id=alice&status=open&limit=20",
)


class SessionDetailView(ClientAPIView):
    error_statuses = (409,)  # a re-tag after something was learned from the session

    @extend_schema(parameters=[serializers.OwnerQuerySerializer], responses=serializers.SessionDetailOutputSerializer)
    @serves(operations.get_session, example="GET /api/v1/sessions/chat-2024-06-01/?user_id=alice&limit=100")
    def get(self, request, session_id):
        return Response(operations.get_session(client=self.client, session_id=session_id, query=request.query_params))

    @extend_schema(
        parameters=[USER_ID_PARAMETER, SCOPE_PARAMETER],
        request=serializers.SessionPatchInputSerializer,
        responses=serializers.SessionOutputSerializer,
    )
    @serves(
        operations.update_session,
        example="PATCH /api/v1/sessions/book-flight-17/?user_id=alice",
        body={"outcome": "success"},
    )
    def patch(self, request, session_id):
        return Response(
            operations.update_session(
                client=self.client, session_id=session_id, query=request.query_params, data=request.data
            )
        )

    @extend_schema(
        parameters=[USER_ID_PARAMETER, SCOPE_PARAMETER], responses={202: serializers.SessionDeleteOutputSerializer}
    )
    @serves(operations.delete_session, example="DELETE /api/v1/sessions/book-flight-17/?user_id=alice")
    def delete(self, request, session_id):
        body = operations.delete_session(client=self.client, session_id=session_id, query=request.query_params)
        return Response(body, status=status.HTTP_202_ACCEPTED)


class SessionSealView(ClientAPIView):
    @extend_schema(
        parameters=[USER_ID_PARAMETER, SCOPE_PARAMETER], request=None, responses=serializers.SessionSealOutputSerializer
    )
    @serves(operations.seal_session, example="POST /api/v1/sessions/book-flight-17/seal?user_id=alice")
    def post(self, request, session_id):
        return Response(operations.seal_session(client=self.client, session_id=session_id, query=request.query_params))

"""REST adapters of apps.conversations.operations."""

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.response import Response

from apps.conversations import operations, serializers
from apps.core.adapters import list_view
from apps.core.api import ClientAPIView, serves
from apps.core.pagination import Pagination, paged_response
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


class CheckpointView(ClientAPIView):
    pagination_class = Pagination  # the list is paginated

    @extend_schema(
        parameters=[serializers.CheckpointListFilterSerializer],
        responses=serializers.CheckpointOutputSerializer(many=True),
    )
    @serves(operations.list_checkpoints, example="GET /api/v1/checkpoints/?user_id=alice&thread_id=trip-42&limit=1")
    def get(self, request):
        return paged_response(request, operations.list_checkpoints(client=self.client, query=request.query_params))

    @extend_schema(
        request=serializers.CheckpointPutInputSerializer, responses={201: serializers.CheckpointPutOutputSerializer}
    )
    @serves(
        operations.put_checkpoint,
        example="POST /api/v1/checkpoints/",
        body={
            "user_id": "alice",
            "thread_id": "trip-42",
            "checkpoint_id": "1f0d3c8e-0000-6000-8000-000000000001",
            "checkpoint": {"type": "json", "data": "e30="},
            "metadata": {"source": "input", "step": -1},
            "message_ids": [],
        },
    )
    def post(self, request):
        body = operations.put_checkpoint(client=self.client, data=request.data)
        return Response(body, status=status.HTTP_201_CREATED)

    @extend_schema(
        parameters=[serializers.CheckpointThreadSerializer],
        responses={200: serializers.CheckpointDeleteOutputSerializer},
    )
    @serves(operations.delete_checkpoint_thread, example="DELETE /api/v1/checkpoints/?user_id=alice&thread_id=trip-42")
    def delete(self, request):
        return Response(operations.delete_checkpoint_thread(client=self.client, query=request.query_params))


class CheckpointWritesView(ClientAPIView):
    @extend_schema(
        request=serializers.CheckpointWritesInputSerializer, responses=serializers.CheckpointWritesOutputSerializer
    )
    @serves(
        operations.put_checkpoint_writes,
        example="POST /api/v1/checkpoints/writes",
        body={
            "user_id": "alice",
            "thread_id": "trip-42",
            "checkpoint_id": "1f0d3c8e-0000-6000-8000-000000000001",
            "task_id": "task-1",
            "writes": [{"idx": 0, "channel": "answer", "value": {"type": "json", "data": "IjQyIg=="}}],
        },
    )
    def post(self, request):
        return Response(operations.put_checkpoint_writes(client=self.client, data=request.data))

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import exceptions, status
from rest_framework.response import Response

from apps.conversations.models import Session
from apps.conversations.selectors import AmbiguousSession, message_list, session_get, session_list, session_messages
from apps.conversations.serializers import (
    MemoryAddInputSerializer,
    MemoryAddOutputSerializer,
    MessageOutputSerializer,
    OwnerQuerySerializer,
    SessionListFilterSerializer,
    SessionOutputSerializer,
    SessionPatchInputSerializer,
    SessionSealOutputSerializer,
)
from apps.conversations.services import (
    message_delete,
    messages_ingest,
    request_fingerprint,
    session_seal_now,
    session_set_outcome,
)
from apps.conversations.turns import TurnError
from apps.core.api import ClientAPIView, require_write_access
from apps.core.errors import NOT_FOUND_MESSAGE
from apps.core.pagination import Pagination
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
    def post(self, request):
        serializer = MemoryAddInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        idempotency_key = request.headers.get("Idempotency-Key") or None
        if idempotency_key and len(idempotency_key) > 255:
            raise exceptions.ValidationError({"Idempotency-Key": ["At most 255 characters."]})
        try:
            body = messages_ingest(
                client=self.client,
                user_id=data["user_id"],
                session_id=data["session_id"],
                messages=data["messages"],
                occurred_at=data.get("occurred_at"),
                session_tag=data.get("session_tag"),
                filter_tags=data.get("filter_tags"),
                seal=data["seal"],
                outcome=data.get("outcome"),
                idempotency_key=idempotency_key,
                request_hash=request_fingerprint(request.data) if idempotency_key else None,
            )
        except TurnError as exc:
            raise exceptions.ValidationError({"messages": exc.errors}) from None
        return Response(MemoryAddOutputSerializer(body).data, status=status.HTTP_202_ACCEPTED)


class SessionListView(ClientAPIView):
    pagination_class = Pagination  # also tells the OpenAPI schema the list is paginated

    def scoped_queryset(self, *, client, filters=None):
        return session_list(reader=client.reader, filters=filters)

    @extend_schema(parameters=[SessionListFilterSerializer], responses=SessionOutputSerializer(many=True))
    def get(self, request):
        filters = SessionListFilterSerializer(data=request.query_params)
        filters.is_valid(raise_exception=True)
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(self.get_queryset(filters=filters.validated_data), request, self)
        return paginator.get_paginated_response(SessionOutputSerializer(page, many=True).data)


class SessionObjectMixin:
    """Session endpoints name a session by its id and owner (`?user_id=`), and `?scope=` if ambiguous:
    they read through `session_get`, which applies the caller's read scopes, not through get_object."""

    def owner_query(self):
        query = OwnerQuerySerializer(data=self.request.query_params)
        query.is_valid(raise_exception=True)
        return query.validated_data

    def get_session(self, session_id):
        query = self.owner_query()
        try:
            return session_get(
                client=self.client, user_id=query["user_id"], session_id=session_id, scope=query.get("scope")
            )
        except Session.DoesNotExist:
            raise exceptions.NotFound(NOT_FOUND_MESSAGE) from None
        except AmbiguousSession as exc:
            raise exceptions.ValidationError({"scope": [str(exc)]}) from None


class SessionDetailView(SessionObjectMixin, ClientAPIView):
    @extend_schema(parameters=[OwnerQuerySerializer], responses=SessionOutputSerializer)
    def get(self, request, session_id):
        session = self.get_session(session_id)
        query = self.owner_query()
        messages = session_messages(session=session)[query["offset"] : query["offset"] + query["limit"]]
        body = SessionOutputSerializer(session).data
        body["messages"] = MessageOutputSerializer(messages, many=True).data
        next_offset = query["offset"] + query["limit"]
        body["messages_next_offset"] = next_offset if next_offset < session.message_count else None
        return Response(body)

    @extend_schema(
        parameters=[USER_ID_PARAMETER, SCOPE_PARAMETER],
        request=SessionPatchInputSerializer,
        responses=SessionOutputSerializer,
    )
    def patch(self, request, session_id):
        session = self.get_session(session_id)
        require_write_access(self.client, session)
        serializer = SessionPatchInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        session = session_set_outcome(session=session, outcome=serializer.validated_data["outcome"])
        return Response(SessionOutputSerializer(session).data)


class SessionSealView(SessionObjectMixin, ClientAPIView):
    @extend_schema(parameters=[USER_ID_PARAMETER, SCOPE_PARAMETER], request=None, responses=SessionSealOutputSerializer)
    def post(self, request, session_id):
        session = self.get_session(session_id)
        require_write_access(self.client, session)
        tasks = session_seal_now(session=session, client=self.client)
        session.refresh_from_db()
        return Response(SessionSealOutputSerializer({"session": session, "task_ids": [task.pk for task in tasks]}).data)


class MessageDeleteView(ClientAPIView):
    def scoped_queryset(self, *, client):
        return message_list(reader=client.reader)

    @extend_schema(responses={204: None})
    def delete(self, request, item_id):
        message = self.get_object(pk=item_id)
        require_write_access(self.client, message)
        message_delete(message=message)
        return Response(status=status.HTTP_204_NO_CONTENT)

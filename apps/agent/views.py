"""REST adapters of the agent's operations (apps.agent.operations): each method passes the caller
and the request's input to one operation and renders its answer."""

from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import status
from rest_framework.response import Response

from apps.agent import operations
from apps.agent.serializers import (
    ConsolidateInputSerializer,
    ConsolidateOutputSerializer,
    ContextInputSerializer,
    ContextOutputSerializer,
    EpisodicMemoryCreateInputSerializer,
    EpisodicMemoryPatchInputSerializer,
    MemoryHistoryOutputSerializer,
    MemoryListFilterSerializer,
    ProfileFindingsOutputSerializer,
    SemanticMemoryCreateInputSerializer,
    SemanticMemoryPatchInputSerializer,
    SessionDeleteOutputSerializer,
)
from apps.conversations import views as conversation_views
from apps.conversations.serializers import SessionOutputSerializer, SessionPatchInputSerializer
from apps.core.adapters import delete_view
from apps.core.api import ClientAPIView, serves
from apps.core.pagination import Pagination, paged_response
from apps.core.permissions import IsActiveClient
from apps.memories.serializers import EpisodicMemoryOutputSerializer, SemanticMemoryOutputSerializer
from apps.profiles import views as profile_views


def no_content() -> Response:
    return Response(status=status.HTTP_204_NO_CONTENT)


class ContextView(ClientAPIView):
    """Prompt-ready context for a user (and session) within a token budget."""

    permission_classes = [IsActiveClient]  # a read, even as a POST
    error_statuses = (404,)  # a session_id the client does not read

    @extend_schema(request=ContextInputSerializer, responses=ContextOutputSerializer)
    @serves(
        operations.context_get,
        example="POST /api/v1/memory/context",
        body={"user_id": "alice", "query": "Where is Alice flying next?", "max_tokens": 500},
    )
    def post(self, request):
        return Response(operations.context_get(client=self.client, data=request.data))


# Memories ---------------------------------------------------------------------------------------


class MemoryConsolidateView(ClientAPIView):
    """Merge duplicates and resolve contradictions for a user or the whole write scope."""

    error_statuses = (404,)  # a user_id the organisation does not know

    @extend_schema(request=ConsolidateInputSerializer, responses={202: ConsolidateOutputSerializer})
    @serves(
        operations.memory_consolidate,
        example="POST /api/v1/memory/consolidate",
        body={"dry_run": True},
    )
    def post(self, request):
        body = operations.memory_consolidate(client=self.client, data=request.data)
        return Response(body, status=status.HTTP_202_ACCEPTED)


class MemoryListView(ClientAPIView):
    memory_type = ""
    pagination_class = Pagination  # also tells the OpenAPI schema the list is paginated

    @serves(operations.memory_list, example="GET /api/v1/memory/semantic/?user_id=alice")
    def get(self, request):
        return paged_response(
            request, operations.memory_list(client=self.client, memory_type=self.memory_type, data=request.query_params)
        )

    @serves(
        operations.memory_create,
        example="POST /api/v1/memory/semantic/",
        body={"user_id": "alice", "name": "Alice", "summary": "Alice prefers aisle seats."},
    )
    def post(self, request):
        body = operations.memory_create(client=self.client, memory_type=self.memory_type, data=request.data)
        return Response(body, status=status.HTTP_201_CREATED)


class MemoryDetailView(ClientAPIView):
    memory_type = ""
    error_statuses = (409,)  # an edit of a memory extraction retired

    @serves(operations.memory_get, example="GET /api/v1/memory/semantic/2e3f4a5b-6c7d-4e8f-9a0b-1c2d3e4f5a6b")
    def get(self, request, item_id):
        return Response(operations.memory_get(client=self.client, memory_type=self.memory_type, memory_id=item_id))

    @serves(
        operations.memory_update,
        example="PATCH /api/v1/memory/semantic/2e3f4a5b-6c7d-4e8f-9a0b-1c2d3e4f5a6b",
        body={"summary": "Alice prefers window seats."},
    )
    def patch(self, request, item_id):
        return Response(
            operations.memory_update(
                client=self.client, memory_type=self.memory_type, memory_id=item_id, data=request.data
            )
        )

    @serves(operations.memory_delete, example="DELETE /api/v1/memory/semantic/2e3f4a5b-6c7d-4e8f-9a0b-1c2d3e4f5a6b")
    def delete(self, request, item_id):
        operations.memory_delete(client=self.client, memory_type=self.memory_type, memory_id=item_id)
        return no_content()


class MemoryHistoryView(ClientAPIView):
    memory_type = ""

    @extend_schema(responses=MemoryHistoryOutputSerializer)
    @serves(
        operations.memory_history, example="GET /api/v1/memory/semantic/2e3f4a5b-6c7d-4e8f-9a0b-1c2d3e4f5a6b/history"
    )
    def get(self, request, item_id):
        return Response(operations.memory_history(client=self.client, memory_type=self.memory_type, memory_id=item_id))


def _list_schema(output, create):
    return extend_schema_view(
        get=extend_schema(parameters=[MemoryListFilterSerializer], responses=output(many=True)),
        post=extend_schema(request=create, responses={201: output}),
    )


def _detail_schema(output, patch):
    return extend_schema_view(
        get=extend_schema(responses=output),
        patch=extend_schema(request=patch, responses=output),
        delete=extend_schema(responses={204: None}),
    )


@_list_schema(EpisodicMemoryOutputSerializer, EpisodicMemoryCreateInputSerializer)
class EpisodicMemoryListView(MemoryListView):
    memory_type = "episodic"


@_list_schema(SemanticMemoryOutputSerializer, SemanticMemoryCreateInputSerializer)
class SemanticMemoryListView(MemoryListView):
    memory_type = "semantic"


@_detail_schema(EpisodicMemoryOutputSerializer, EpisodicMemoryPatchInputSerializer)
class EpisodicMemoryDetailView(MemoryDetailView):
    memory_type = "episodic"


@_detail_schema(SemanticMemoryOutputSerializer, SemanticMemoryPatchInputSerializer)
class SemanticMemoryDetailView(MemoryDetailView):
    memory_type = "semantic"


class EpisodicMemoryHistoryView(MemoryHistoryView):
    memory_type = "episodic"


class SemanticMemoryHistoryView(MemoryHistoryView):
    memory_type = "semantic"


# Sessions, experiences, profiles, entities ------------------------------------------------------


class SessionDetailView(conversation_views.SessionDetailView):
    """The session endpoints of apps.conversations, with its edit (outcome, re-tagging: it must see what
    every app learned from the session) and deletion of the whole session."""

    error_statuses = (409,)  # a re-tag after something was learned from the session

    @extend_schema(
        parameters=[conversation_views.USER_ID_PARAMETER, conversation_views.SCOPE_PARAMETER],
        request=SessionPatchInputSerializer,
        responses=SessionOutputSerializer,
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
        parameters=[conversation_views.USER_ID_PARAMETER, conversation_views.SCOPE_PARAMETER],
        responses={202: SessionDeleteOutputSerializer},
    )
    @serves(operations.session_delete, example="DELETE /api/v1/sessions/book-flight-17/?user_id=alice")
    def delete(self, request, session_id):
        body = operations.session_delete(client=self.client, session_id=session_id, data=request.query_params)
        return Response(body, status=status.HTTP_202_ACCEPTED)


ExperienceDetailView = delete_view(
    operations.experience_delete, example="DELETE /api/v1/experiences/2e3f4a5b-6c7d-4e8f-9a0b-1c2d3e4f5a6b/"
)


class ProfileDetailView(profile_views.ProfileDetailView):
    """The profile endpoint of apps.profiles, and deletion of the page."""

    @extend_schema(responses={204: None})
    @serves(operations.profile_delete, example="DELETE /api/v1/profiles/2e3f4a5b-6c7d-4e8f-9a0b-1c2d3e4f5a6b/")
    def delete(self, request, profile_id):
        operations.profile_delete(client=self.client, profile_id=profile_id)
        return no_content()


class ProfileFindingsView(ClientAPIView):
    @extend_schema(responses=ProfileFindingsOutputSerializer)
    @serves(operations.profile_findings, example="GET /api/v1/profiles/2e3f4a5b-6c7d-4e8f-9a0b-1c2d3e4f5a6b/findings")
    def get(self, request, profile_id):
        return Response(operations.profile_findings(client=self.client, profile_id=profile_id))


EntityDetailView = delete_view(
    operations.entity_delete, example="DELETE /api/v1/entities/2e3f4a5b-6c7d-4e8f-9a0b-1c2d3e4f5a6b/"
)

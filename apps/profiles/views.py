"""REST adapters of apps.profiles.operations."""

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.response import Response

from apps.core.adapters import delete_view, list_view, read_view
from apps.core.api import ClientAPIView, serves
from apps.profiles import operations, serializers

ProfileListView = list_view(
    operations.list_profiles,
    filters=serializers.ProfileListFilterSerializer,
    output=serializers.ProfileOutputSerializer,
    example="GET /api/v1/profiles/?user_id=alice",
)
EntityListView = list_view(
    operations.list_entities,
    filters=serializers.EntityListFilterSerializer,
    output=serializers.EntityOutputSerializer,
    example="GET /api/v1/entities/?user_id=alice&kind=person",
)
EntityDetailView = delete_view(
    operations.delete_entity, example="DELETE /api/v1/entities/2e3f4a5b-6c7d-4e8f-9a0b-1c2d3e4f5a6b/"
)


class ProfileDetailView(
    read_view(
        operations.get_profile,
        output=serializers.ProfileDetailOutputSerializer,
        example="GET /api/v1/profiles/2e3f4a5b-6c7d-4e8f-9a0b-1c2d3e4f5a6b/",
    ),
    delete_view(operations.delete_profile, example="DELETE /api/v1/profiles/2e3f4a5b-6c7d-4e8f-9a0b-1c2d3e4f5a6b/"),
):
    """A compiled page: read with its revisions and sources, or deleted."""


ProfileFindingsView = read_view(
    operations.get_profile_findings,
    output=serializers.ProfileFindingsOutputSerializer,
    example="GET /api/v1/profiles/2e3f4a5b-6c7d-4e8f-9a0b-1c2d3e4f5a6b/findings",
)


class TopicCompileView(ClientAPIView):
    error_statuses = (404,)  # a user_id with no session in the caller's write scope

    @extend_schema(
        request=serializers.TopicCompileInputSerializer, responses={202: serializers.TopicCompileOutputSerializer}
    )
    @serves(operations.compile_topics, example="POST /api/v1/topics/compile", body={"user_id": "alice"})
    def post(self, request):
        return Response(
            operations.compile_topics(client=self.client, data=request.data), status=status.HTTP_202_ACCEPTED
        )


class ProfileLintView(ClientAPIView):
    @extend_schema(request=None, responses=serializers.LintOutputSerializer)
    @serves(operations.lint_profile, example="POST /api/v1/profiles/2e3f4a5b-6c7d-4e8f-9a0b-1c2d3e4f5a6b/lint")
    def post(self, request, profile_id):
        return Response(operations.lint_profile(client=self.client, profile_id=profile_id))

"""REST adapters of apps.profiles.operations."""

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.response import Response

from apps.core.adapters import delete_view, list_view
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


class ProfileDetailView(ClientAPIView):
    @extend_schema(responses=serializers.ProfileDetailOutputSerializer)
    @serves(operations.get_profile, example="GET /api/v1/profiles/2e3f4a5b-6c7d-4e8f-9a0b-1c2d3e4f5a6b/")
    def get(self, request, profile_id):
        return Response(operations.get_profile(client=self.client, profile_id=profile_id))

    @extend_schema(responses={204: None})
    @serves(operations.delete_profile, example="DELETE /api/v1/profiles/2e3f4a5b-6c7d-4e8f-9a0b-1c2d3e4f5a6b/")
    def delete(self, request, profile_id):
        operations.delete_profile(client=self.client, profile_id=profile_id)
        return Response(status=status.HTTP_204_NO_CONTENT)


class ProfileFindingsView(ClientAPIView):
    @extend_schema(responses=serializers.ProfileFindingsOutputSerializer)
    @serves(
        operations.get_profile_findings, example="GET /api/v1/profiles/2e3f4a5b-6c7d-4e8f-9a0b-1c2d3e4f5a6b/findings"
    )
    def get(self, request, profile_id):
        return Response(operations.get_profile_findings(client=self.client, profile_id=profile_id))


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

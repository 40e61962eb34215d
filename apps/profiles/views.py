"""REST adapters of apps.profiles.operations."""

from drf_spectacular.utils import extend_schema
from rest_framework.response import Response

from apps.core.api import ClientAPIView, serves
from apps.core.pagination import Pagination, paged_response
from apps.profiles import operations
from apps.profiles.serializers import (
    EntityListFilterSerializer,
    EntityOutputSerializer,
    ProfileDetailOutputSerializer,
    ProfileListFilterSerializer,
    ProfileOutputSerializer,
)


class ProfileListView(ClientAPIView):
    pagination_class = Pagination  # tells the OpenAPI schema the list is paginated

    @extend_schema(parameters=[ProfileListFilterSerializer], responses=ProfileOutputSerializer(many=True))
    @serves(operations.list_profiles, example="GET /api/v1/profiles/?user_id=alice")
    def get(self, request):
        return paged_response(request, operations.list_profiles(client=self.client, query=request.query_params))


class ProfileDetailView(ClientAPIView):
    @extend_schema(responses=ProfileDetailOutputSerializer)
    @serves(operations.get_profile, example="GET /api/v1/profiles/2e3f4a5b-6c7d-4e8f-9a0b-1c2d3e4f5a6b/")
    def get(self, request, profile_id):
        return Response(operations.get_profile(client=self.client, profile_id=profile_id))


class EntityListView(ClientAPIView):
    pagination_class = Pagination  # tells the OpenAPI schema the list is paginated

    @extend_schema(parameters=[EntityListFilterSerializer], responses=EntityOutputSerializer(many=True))
    @serves(operations.list_entities, example="GET /api/v1/entities/?user_id=alice&kind=person")
    def get(self, request):
        return paged_response(request, operations.list_entities(client=self.client, query=request.query_params))

from drf_spectacular.utils import extend_schema
from rest_framework.response import Response

from apps.core.api import ClientAPIView
from apps.core.pagination import Pagination
from apps.profiles.selectors import entity_list, profile_detail_queryset, profile_list
from apps.profiles.serializers import (
    EntityListFilterSerializer,
    EntityOutputSerializer,
    ProfileDetailOutputSerializer,
    ProfileListFilterSerializer,
    ProfileOutputSerializer,
)


class ProfileListView(ClientAPIView):
    def scoped_queryset(self, *, client):
        return profile_list(client=client)

    @extend_schema(parameters=[ProfileListFilterSerializer], responses=ProfileOutputSerializer(many=True))
    def get(self, request):
        filters = ProfileListFilterSerializer(data=request.query_params)
        filters.is_valid(raise_exception=True)
        paginator = Pagination()
        page = paginator.paginate_queryset(profile_list(client=self.client, filters=filters.validated_data), request, self)
        return paginator.get_paginated_response(ProfileOutputSerializer(page, many=True).data)


class ProfileDetailView(ClientAPIView):
    def scoped_queryset(self, *, client):
        return profile_detail_queryset(client=client)

    @extend_schema(responses=ProfileDetailOutputSerializer)
    def get(self, request, profile_id):
        return Response(ProfileDetailOutputSerializer(self.get_object(pk=profile_id)).data)


class EntityListView(ClientAPIView):
    def scoped_queryset(self, *, client):
        return entity_list(client=client)

    @extend_schema(parameters=[EntityListFilterSerializer], responses=EntityOutputSerializer(many=True))
    def get(self, request):
        filters = EntityListFilterSerializer(data=request.query_params)
        filters.is_valid(raise_exception=True)
        paginator = Pagination()
        page = paginator.paginate_queryset(entity_list(client=self.client, filters=filters.validated_data), request, self)
        return paginator.get_paginated_response(EntityOutputSerializer(page, many=True).data)

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
    pagination_class = Pagination  # also tells the OpenAPI schema the list is paginated

    def scoped_queryset(self, *, client, filters=None):
        return profile_list(reader=client.reader, filters=filters)

    @extend_schema(parameters=[ProfileListFilterSerializer], responses=ProfileOutputSerializer(many=True))
    def get(self, request):
        filters = ProfileListFilterSerializer(data=request.query_params)
        filters.is_valid(raise_exception=True)
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(self.get_queryset(filters=filters.validated_data), request, self)
        return paginator.get_paginated_response(ProfileOutputSerializer(page, many=True).data)


class ProfileDetailView(ClientAPIView):
    def scoped_queryset(self, *, client):
        return profile_detail_queryset(reader=client.reader)

    @extend_schema(responses=ProfileDetailOutputSerializer)
    def get(self, request, profile_id):
        return Response(ProfileDetailOutputSerializer(self.get_object(pk=profile_id)).data)


class EntityListView(ClientAPIView):
    pagination_class = Pagination  # also tells the OpenAPI schema the list is paginated

    def scoped_queryset(self, *, client, filters=None):
        return entity_list(reader=client.reader, filters=filters)

    @extend_schema(parameters=[EntityListFilterSerializer], responses=EntityOutputSerializer(many=True))
    def get(self, request):
        filters = EntityListFilterSerializer(data=request.query_params)
        filters.is_valid(raise_exception=True)
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(self.get_queryset(filters=filters.validated_data), request, self)
        return paginator.get_paginated_response(EntityOutputSerializer(page, many=True).data)

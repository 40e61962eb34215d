from drf_spectacular.utils import extend_schema

from apps.core.api import ClientAPIView
from apps.core.pagination import Pagination
from apps.profiles.selectors import profile_list
from apps.profiles.serializers import ProfileListFilterSerializer, ProfileOutputSerializer


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

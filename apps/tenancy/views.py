"""REST adapter of apps.tenancy.operations."""

from drf_spectacular.utils import extend_schema
from rest_framework.response import Response

from apps.core.api import ClientAPIView, serves
from apps.tenancy import operations
from apps.tenancy.serializers import CurrentClientOutputSerializer


class CurrentClientView(ClientAPIView):
    @extend_schema(responses=CurrentClientOutputSerializer)
    @serves(operations.who_am_i, example="GET /api/v1/me")
    def get(self, request):
        return Response(operations.who_am_i(client=self.client))

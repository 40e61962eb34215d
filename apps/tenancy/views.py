from drf_spectacular.utils import extend_schema
from rest_framework.response import Response

from apps.core.api import ClientAPIView
from apps.tenancy.serializers import CurrentClientOutputSerializer


class CurrentClientView(ClientAPIView):
    """Who am I: the calling client, its organisation and scopes."""

    @extend_schema(responses=CurrentClientOutputSerializer)
    def get(self, request):
        return Response(CurrentClientOutputSerializer(self.client).data)

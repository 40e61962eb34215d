"""REST adapters of apps.privacy.operations."""

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.response import Response

from apps.core.adapters import delete_view
from apps.core.api import ClientAPIView, serves
from apps.privacy import operations
from apps.privacy.serializers import ErasureAcceptedOutputSerializer, ErasureOutputSerializer

ERASURE_RESPONSES = {
    202: ErasureAcceptedOutputSerializer,
    403: OpenApiResponse(
        description="The client lacks the can_erase permission (checked before the subject is looked up)."
    ),
    404: OpenApiResponse(description="No such subject in the caller's organisation."),
}


class UserErasureView(ClientAPIView):
    @extend_schema(request=None, responses=ERASURE_RESPONSES)
    @serves(operations.erase_user, example="DELETE /api/v1/users/alice/memories")
    def delete(self, request, user_id):
        return Response(operations.erase_user(client=self.client, user_id=user_id), status=status.HTTP_202_ACCEPTED)


class ClientErasureView(ClientAPIView):
    @extend_schema(request=None, responses=ERASURE_RESPONSES)
    @serves(operations.erase_client, example="DELETE /api/v1/clients/5a6b7c8d-9e0f-4a1b-8c2d-3e4f5a6b7c8d/memories")
    def delete(self, request, client_id):
        return Response(
            operations.erase_client(client=self.client, client_id=client_id), status=status.HTTP_202_ACCEPTED
        )


class ErasureDetailView(ClientAPIView):
    @extend_schema(responses={200: ErasureOutputSerializer, 404: OpenApiResponse(description="Not found.")})
    @serves(operations.get_erasure, example="GET /api/v1/erasures/7c8d9e0f-1a2b-4c3d-9e4f-5a6b7c8d9e0f/")
    def get(self, request, erasure_id):
        return Response(operations.get_erasure(client=self.client, erasure_id=erasure_id))


# A turn goes with what was derived from it (apps.privacy.services.provenance), so its deletion lives here.
MessageDeleteView = delete_view(
    operations.delete_message, example="DELETE /api/v1/memory/message/6f1c2a9e-5d7b-4e0a-9c4d-2b8e1f3a7c55"
)

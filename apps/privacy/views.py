from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.response import Response

from apps.core.api import ClientAPIView
from apps.core.permissions import CanErase, IsActiveClient
from apps.privacy.selectors import erasable_clients, erasable_users, erasure_list
from apps.privacy.serializers import ErasureAcceptedOutputSerializer, ErasureOutputSerializer
from apps.privacy.services.erasure import erasure_request
from apps.privacy.services.subjects import CLIENT, USER, Subject

ERASURE_RESPONSES = {
    202: ErasureAcceptedOutputSerializer,
    403: OpenApiResponse(description="The client lacks the can_erase permission (checked before the subject is looked up)."),
    404: OpenApiResponse(description="No such subject in the caller's organisation."),
}


class ErasureView(ClientAPIView):
    """Erasure is its own permission (can_erase), not a write: it reaches every scope."""

    permission_classes = [IsActiveClient, CanErase]


class UserErasureView(ErasureView):
    """Erases everything about one end user in the caller's organisation (every scope)."""

    def scoped_queryset(self, *, client):
        return erasable_users(client=client)

    @extend_schema(request=None, responses=ERASURE_RESPONSES)
    def delete(self, request, user_id):
        end_user = self.get_object(user_id=user_id)
        subject = Subject(organization=self.organization, kind=USER, subject_id=end_user.user_id, end_user=end_user)
        erasure = erasure_request(subject=subject, requested_by=self.client)
        return Response(ErasureAcceptedOutputSerializer(erasure).data, status=status.HTTP_202_ACCEPTED)


class ClientErasureView(ErasureView):
    """Erases what one client of the caller's organisation created, and revokes its keys."""

    def scoped_queryset(self, *, client):
        return erasable_clients(client=client)

    @extend_schema(request=None, responses=ERASURE_RESPONSES)
    def delete(self, request, client_id):
        target = self.get_object(pk=client_id)
        subject = Subject(organization=self.organization, kind=CLIENT, subject_id=str(target.pk), client=target)
        erasure = erasure_request(subject=subject, requested_by=self.client)
        return Response(ErasureAcceptedOutputSerializer(erasure).data, status=status.HTTP_202_ACCEPTED)


class ErasureDetailView(ClientAPIView):
    """An erasure is visible to the client that requested it and to clients with can_erase."""

    def scoped_queryset(self, *, client):
        return erasure_list(client=client)

    @extend_schema(responses={200: ErasureOutputSerializer, 404: OpenApiResponse(description="Not found.")})
    def get(self, request, erasure_id):
        return Response(ErasureOutputSerializer(self.get_object(pk=erasure_id)).data)

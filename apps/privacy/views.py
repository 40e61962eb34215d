from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.response import Response

from apps.core.api import ClientAPIView
from apps.privacy.selectors import erasable_clients, erasable_users, erasure_list
from apps.privacy.serializers import ErasureAcceptedOutputSerializer, ErasureOutputSerializer
from apps.privacy.services.erasure import erasure_request
from apps.privacy.services.subjects import CLIENT, USER, Subject


class UserErasureView(ClientAPIView):
    """Erases everything about one end user in the caller's organisation (every scope)."""

    def scoped_queryset(self, *, client):
        return erasable_users(client=client)

    @extend_schema(request=None, responses={202: ErasureAcceptedOutputSerializer})
    def delete(self, request, user_id):
        end_user = self.get_object(user_id=user_id)
        subject = Subject(organization=self.organization, kind=USER, subject_id=end_user.user_id, end_user=end_user)
        erasure = erasure_request(subject=subject, requested_by=self.client)
        return Response(ErasureAcceptedOutputSerializer(erasure).data, status=status.HTTP_202_ACCEPTED)


class ClientErasureView(ClientAPIView):
    """Erases what one client of the caller's organisation created, and revokes its keys."""

    def scoped_queryset(self, *, client):
        return erasable_clients(client=client)

    @extend_schema(request=None, responses={202: ErasureAcceptedOutputSerializer})
    def delete(self, request, client_id):
        target = self.get_object(pk=client_id)
        subject = Subject(organization=self.organization, kind=CLIENT, subject_id=str(target.pk), client=target)
        erasure = erasure_request(subject=subject, requested_by=self.client)
        return Response(ErasureAcceptedOutputSerializer(erasure).data, status=status.HTTP_202_ACCEPTED)


class ErasureDetailView(ClientAPIView):
    def scoped_queryset(self, *, client):
        return erasure_list(client=client)

    @extend_schema(responses=ErasureOutputSerializer)
    def get(self, request, erasure_id):
        return Response(ErasureOutputSerializer(self.get_object(pk=erasure_id)).data)

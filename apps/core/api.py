"""The one base class for API views: it resolves the caller and seals every queryset to it."""

from django.core.exceptions import ObjectDoesNotExist, ValidationError
from rest_framework import exceptions, serializers
from rest_framework.views import APIView

from apps.core.errors import NOT_FOUND_MESSAGE
from apps.core.permissions import IsActiveClient, WriteScopeForWrites


class ClientAPIView(APIView):
    """Subclasses implement `scoped_queryset(client=...)`; they never see an unscoped queryset.

    `get_object` turns a missing id, a malformed id and another organisation's id into
    the same 404.
    """

    permission_classes = [IsActiveClient, WriteScopeForWrites]

    @property
    def client(self):
        return self.request.user

    @property
    def organization(self):
        return self.request.user.organization

    def scoped_queryset(self, *, client):
        raise NotImplementedError(f"{type(self).__name__} must scope its queryset to the client")

    def get_queryset(self):
        return self.scoped_queryset(client=self.client)

    def get_object(self, **lookup):
        try:
            return self.get_queryset().get(**lookup)
        except (ObjectDoesNotExist, ValidationError, ValueError):
            raise exceptions.NotFound(NOT_FOUND_MESSAGE) from None


def require_write_access(client, item) -> None:
    """Readable is not writable: a client changes only what lives in its own write scope."""
    if item.scope != client.write_scope:
        raise exceptions.PermissionDenied(f"This item belongs to scope {item.scope!r}, which this client does not write.")


class InputSerializer(serializers.Serializer):
    """Input serializers refuse fields they do not know, so a typo is an error, not a no-op."""

    def to_internal_value(self, data):
        unknown = sorted(set(data) - set(self.fields)) if hasattr(data, "keys") else []
        errors = {name: ["Unknown field."] for name in unknown}
        try:
            value = super().to_internal_value(data)
        except serializers.ValidationError as exc:
            if isinstance(exc.detail, dict):
                errors.update(exc.detail)
            else:
                raise
        if errors:
            raise serializers.ValidationError(errors)
        return value

from rest_framework import exceptions
from rest_framework.permissions import SAFE_METHODS, BasePermission


class IsActiveClient(BasePermission):
    def has_permission(self, request, view):
        if request.user is None:
            raise exceptions.NotAuthenticated("An API key is required: send 'Authorization: Api-Key <key>'.")
        return True


class WriteScopeForWrites(BasePermission):
    """Clients without a write scope are read-only; a write attempt gets 403."""

    message = "This client is read-only (it has no write scope)."

    def has_permission(self, request, view):
        return request.method in SAFE_METHODS or bool(request.user.write_scope)

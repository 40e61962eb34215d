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


class CanErase(BasePermission):
    """Erasure reaches every scope of the organisation, so it is a permission of its own (the
    client's `can_erase` flag), checked before the subject is looked up: refused callers learn
    nothing about which subjects exist."""

    message = "This client may not erase: erasure needs the client's can_erase permission."

    def has_permission(self, request, view):
        return bool(request.user.can_erase)

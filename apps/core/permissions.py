from rest_framework import exceptions
from rest_framework.permissions import BasePermission


class IsActiveClient(BasePermission):
    """What the client may do is each operation's access (apps.core.operations.Access)."""

    def has_permission(self, request, view):
        if request.user is None:
            raise exceptions.NotAuthenticated("An API key is required: send 'Authorization: Api-Key <key>'.")
        return True

"""The account endpoint's operation (REST: apps.tenancy.views)."""

from apps.core.operations import operation
from apps.tenancy.serializers import CurrentClientOutputSerializer


@operation()
def who_am_i(*, client) -> dict:
    """Who am I: the calling client, its organisation and scopes."""
    return CurrentClientOutputSerializer(client).data

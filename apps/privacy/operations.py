"""The erasure endpoints' operations (REST: apps.privacy.views; MCP: apps.mcp_server).
can_erase is checked before the subject is looked up, so refused callers learn nothing about which exist."""

from apps.conversations.selectors import message_list
from apps.core.errors import ConflictError
from apps.core.operations import Access, check_ids, get_or_404, operation, require_write_access
from apps.pipeline.locks import LockNotAvailable
from apps.privacy.selectors import erasable_clients, erasable_users, erasure_list
from apps.privacy.serializers import ErasureAcceptedOutputSerializer, ErasureOutputSerializer
from apps.privacy.services.cascade import copies_forget
from apps.privacy.services.erasure import erasure_request
from apps.privacy.services.provenance import turn_delete
from apps.privacy.services.subjects import CLIENT, USER, Subject


@operation(access=Access.ERASE)
def erase_user(*, client, user_id: str) -> dict:
    """Erase everything about one end user.

    Every scope of the caller's organisation; runs in the background (202 with the erasure's id).
    Needs the client's can_erase permission, checked before the user is looked up."""
    check_ids(user_id=user_id)
    end_user = get_or_404(erasable_users(client=client), user_id=user_id)
    subject = Subject(organization=client.organization, kind=USER, subject_id=end_user.user_id, end_user=end_user)
    return ErasureAcceptedOutputSerializer(erasure_request(subject=subject, requested_by=client)).data


@operation(access=Access.ERASE)
def erase_client(*, client, client_id: str) -> dict:
    """Erase what one client created, and revoke its keys.

    Runs in the background (202 with the erasure's id). Needs the client's can_erase permission,
    checked before the client is looked up."""
    check_ids(client_id=client_id)
    target = get_or_404(erasable_clients(client=client), pk=client_id)
    subject = Subject(organization=client.organization, kind=CLIENT, subject_id=str(target.pk), client=target)
    return ErasureAcceptedOutputSerializer(erasure_request(subject=subject, requested_by=client)).data


@operation()
def get_erasure(*, client, erasure_id: str) -> dict:
    """Read an erasure's status and counts.

    Visible to the client that requested it and to clients with can_erase."""
    check_ids(erasure_id=erasure_id)
    return ErasureOutputSerializer(get_or_404(erasure_list(client=client), pk=erasure_id)).data


@operation(access=Access.WRITE)
def delete_message(*, client, item_id: str) -> None:
    """Delete one transcript turn for good, and what was derived from it (neighbours' context, memories citing it…)."""
    check_ids(item_id=item_id)
    message = get_or_404(message_list(reader=client.reader), pk=item_id)
    require_write_access(client, message)
    try:
        turn_delete(message=message)
    except LockNotAvailable:
        raise ConflictError("Learning from this user's sessions is running right now; try again shortly.") from None
    copies_forget(organization=client.organization, user_id=message.end_user.user_id, scope=message.scope)

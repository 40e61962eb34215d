"""One body per operation. Each endpoint's behaviour is one function (`apps/<app>/operations.py`)
that takes the caller (`client`) and its input as sent, checks the caller's access, validates the
input with the operation's input serializer, calls services and selectors, and returns the output
as plain data. REST views and MCP tools are thin adapters around it, so both transports validate,
refuse and answer alike; errors are members of apps.core.errors' family, mapped once per transport.
"""

import enum
import functools

from django.core.exceptions import ObjectDoesNotExist, ValidationError

from apps.core.errors import InvalidInput, NotFound, PermissionDenied
from apps.core.replicas import note_write
from apps.core.validation import name_problem, text_problem


class Access(enum.Enum):
    READ = "read"  # any active client, within its read scopes
    WRITE = "write"  # a client with a write scope; read-only clients get 403
    ERASE = "erase"  # a client with can_erase: erasure reaches every scope
    EXPORT = "export"  # a client with can_export: an export reaches every scope
    WEBHOOKS = "webhooks"  # a client with can_manage_webhooks: endpoints receive every scope's events


ACCESS_REFUSALS = {
    Access.WRITE: (lambda client: bool(client.write_scope), "This client is read-only (it has no write scope)."),
    Access.ERASE: (
        lambda client: bool(client.can_erase),
        "This client may not erase: erasure needs the client's can_erase permission.",
    ),
    Access.EXPORT: (
        lambda client: bool(client.can_export),
        "This client may not export: exports need the client's can_export permission.",
    ),
    Access.WEBHOOKS: (
        lambda client: bool(client.can_manage_webhooks),
        "This client may not manage webhooks: they need the client's can_manage_webhooks permission.",
    ),
}


def require(client, access: Access) -> None:
    """403 unless the client may do what `access` names; checked before any lookup, so a refused
    caller learns nothing about which items exist."""
    if access in ACCESS_REFUSALS:
        allowed, message = ACCESS_REFUSALS[access]
        if not allowed(client):
            raise PermissionDenied(message)


def operation(*, access: Access = Access.READ):
    """Marks a function as an operation: its access is checked first, whoever calls it, and is
    readable by the transports (`function.access`) for their own documentation."""

    def decorate(function):
        @functools.wraps(function)
        def run(*, client, **arguments):
            require(client, access)
            result = function(client=client, **arguments)
            if access is not Access.READ:
                note_write(client)  # the client's next reads see this write (apps.core.replicas)
            return result

        run.access = access
        return run

    return decorate


def validated(serializer_class, data, **options) -> dict:
    """The serializer's validated data, or InvalidInput naming each bad field. A missing body (None,
    e.g. a JSON `null`) is an empty one; MCP leaves unset arguments out (memory_platform_client.mcp_server.tools)."""
    serializer = serializer_class(data=data if data is not None else {}, **options)
    if not serializer.is_valid():
        raise InvalidInput(serializer.errors)
    return serializer.validated_data


def object_body(data):
    """The body of an endpoint whose fields are all optional: a JSON null is refused by name rather
    than taken for an empty object (which `validated` does for a missing body)."""
    if data is None:
        raise InvalidInput({"non_field_errors": ["Expected a JSON object, not null."]})
    return data


def check_parameters(candidates) -> None:
    """(name, [values]) pairs of values that name what to look up (ids in a path, query strings):
    InvalidInput naming each that PostgreSQL could not store (NUL) or UTF-8 could not encode."""
    errors = {}
    for name, values in candidates:
        if name_problem(name, kind="A parameter name"):
            errors["query"] = [name_problem(name, kind="A parameter name")]
            continue
        for value in values:
            problem = text_problem(str(value))
            if problem:
                errors[name] = [problem]
    if errors:
        raise InvalidInput(errors)


def check_ids(**ids) -> None:
    """The ids an operation looks up by, under the same text rule as query strings."""
    check_parameters([(name, [value]) for name, value in ids.items() if isinstance(value, str)])


def get_or_404(queryset, **lookup):
    """One row of an already scoped queryset; a missing, malformed or foreign id is the same 404."""
    try:
        return queryset.get(**lookup)
    except (ObjectDoesNotExist, ValidationError, ValueError):
        raise NotFound() from None


def require_write_access(client, item) -> None:
    """Readable is not writable: a client changes only what lives in its own write scope."""
    if item.scope != client.write_scope:
        raise PermissionDenied(f"This item belongs to scope {item.scope!r}, which this client does not write.")

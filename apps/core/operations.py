"""One body per operation: each endpoint's behaviour is one function (`apps/<app>/operations.py`) taking
the caller and its input; REST views and MCP tools are thin adapters around it."""

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


# The client attribute each access needs (true), and the 403's message without it.
ACCESS_REFUSALS = {
    Access.WRITE: ("write_scope", "This client is read-only (it has no write scope)."),
    Access.ERASE: ("can_erase", "This client may not erase: erasure needs the client's can_erase permission."),
    Access.EXPORT: ("can_export", "This client may not export: exports need the client's can_export permission."),
    Access.WEBHOOKS: (
        "can_manage_webhooks",
        "This client may not manage webhooks: they need the client's can_manage_webhooks permission.",
    ),
}


def require(client, access: Access) -> None:
    """403 unless the client may; checked before any lookup, so a refused caller learns nothing of what exists."""
    if access in ACCESS_REFUSALS:
        attribute, message = ACCESS_REFUSALS[access]
        if not getattr(client, attribute):
            raise PermissionDenied(message)


def operation(*, access: Access = Access.READ):
    """Marks a function as an operation whose access is checked first, whoever calls it (`function.access`)."""

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
    """The serializer's validated data, or InvalidInput naming each bad field; a missing body is an empty one."""
    serializer = serializer_class(data=data if data is not None else {}, **options)
    if not serializer.is_valid():
        raise InvalidInput(serializer.errors)
    return serializer.validated_data


def object_body(data):
    """For an all-optional body: a JSON null is refused rather than taken for an empty object."""
    if data is None:
        raise InvalidInput({"non_field_errors": ["Expected a JSON object, not null."]})
    return data


def check_parameters(candidates) -> None:
    """InvalidInput naming each of the (name, [values]) pairs holding NUL or a lone surrogate."""
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

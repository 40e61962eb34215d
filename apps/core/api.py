"""The one base class for API views: it resolves the caller and seals every queryset to it."""

from django.core.exceptions import ObjectDoesNotExist, ValidationError
from django.http import QueryDict
from rest_framework import exceptions, serializers
from rest_framework.views import APIView

from apps.core.errors import NOT_FOUND_MESSAGE
from apps.core.permissions import IsActiveClient, WriteScopeForWrites
from apps.core.validation import name_problem, text_problem

# Request headers whose values are stored (the body, query and path are checked for every view).
STORED_HEADERS = ("Idempotency-Key",)


SEALED_METHODS = ("get_queryset", "get_object")


class ClientAPIView(APIView):
    """Subclasses implement `scoped_queryset(client=...)` (a list view's also takes the request's
    `filters`) and read through `get_queryset` and `get_object`; they never see an unscoped queryset.
    Overriding those two is refused when the class is created, so no view can bypass the hook.

    `get_object` turns a missing id, a malformed id and another organisation's id into
    the same 404.
    """

    permission_classes = [IsActiveClient, WriteScopeForWrites]

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        for name in SEALED_METHODS:
            if getattr(cls, name) is not getattr(ClientAPIView, name):
                raise TypeError(
                    f"{cls.__qualname__} overrides {name}(); implement scoped_queryset(client=...) instead, "
                    "so every read stays within the caller's organisation and read scopes."
                )

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        check_request_text(request, path_parameters=kwargs)

    @property
    def client(self):
        return self.request.user

    @property
    def organization(self):
        return self.request.user.organization

    def scoped_queryset(self, *, client):
        raise NotImplementedError(f"{type(self).__name__} must scope its queryset to the client")

    def get_queryset(self, **filters):
        return self.scoped_queryset(client=self.client, **filters)

    def get_object(self, **lookup):
        try:
            return self.get_queryset().get(**lookup)
        except (ObjectDoesNotExist, ValidationError, ValueError):
            raise exceptions.NotFound(NOT_FOUND_MESSAGE) from None


def check_request_text(request, *, path_parameters: dict) -> None:
    """Path parameters, query parameters and stored headers may not hold what PostgreSQL cannot
    store (NUL) or UTF-8 cannot encode (lone surrogates): a 400 naming each one, before any query."""
    candidates = [(name, [value]) for name, value in path_parameters.items()]
    candidates += list(request.query_params.lists())
    candidates += [(name, [request.headers[name]]) for name in STORED_HEADERS if name in request.headers]
    check_parameters(candidates)


def check_parameters(candidates) -> None:
    """(name, [values]) pairs of parameters that name what to look up; ValidationError naming each bad one.
    The MCP tools, which call the views' querysets without a request, check their arguments here too."""
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
        raise exceptions.ValidationError(errors)


def require_write_access(client, item) -> None:
    """Readable is not writable: a client changes only what lives in its own write scope."""
    if item.scope != client.write_scope:
        raise exceptions.PermissionDenied(f"This item belongs to scope {item.scope!r}, which this client does not write.")


class InputSerializer(serializers.Serializer):
    """Input serializers refuse fields they do not know, so a typo is an error, not a no-op.

    `from_query` (a class attribute, or a keyword for serializers that read a body and a query
    string alike) lets apps.core.fields take the text form of integers, booleans and objects.
    """

    from_query = False

    def __init__(self, *args, from_query: bool | None = None, **kwargs):
        data = kwargs.get("data")
        if isinstance(data, QueryDict):
            # A plain dict, so DRF's form semantics do not apply: `?q=` is an empty q (refused where a
            # value is required to be non-empty, as the schema says), not a missing one.
            kwargs["data"] = {key: data.get(key) for key in data}
        super().__init__(*args, **kwargs)
        if from_query is not None:
            self.from_query = from_query

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

"""The one base class for API views: it resolves the caller (the API key's client) and hands it,
with the request's input, to one operation (apps.core.operations)."""

from django.http import QueryDict
from rest_framework import serializers
from rest_framework.views import APIView

from apps.core.operations import check_parameters, get_or_404, require
from apps.core.permissions import IsActiveClient

# Request headers whose values are stored (the body, query and path are checked for every view).
STORED_HEADERS = ("Idempotency-Key",)
SEALED_METHODS = ("get_queryset", "get_object")


class ClientAPIView(APIView):
    """A `@serves(operation)` method hands `self.client` and the input to the operation. A view reading
    rows itself implements `scoped_queryset(client=...)`; overriding SEALED_METHODS is refused."""

    permission_classes = [IsActiveClient]

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
        served = operation_of(self, request.method)
        if served is not None:  # a refused caller is told so before its input is looked at
            require(self.client, served.access)
        # A 400 naming each path or query parameter or stored header holding NUL or a lone surrogate.
        candidates = [(name, [value]) for name, value in kwargs.items()]
        candidates += list(request.query_params.lists())
        candidates += [(name, [request.headers[name]]) for name in STORED_HEADERS if name in request.headers]
        check_parameters(candidates)

    @property
    def client(self):
        return self.request.user

    def scoped_queryset(self, *, client):
        raise NotImplementedError(f"{type(self).__name__} must scope its queryset to the client")

    def get_queryset(self, **filters):
        return self.scoped_queryset(client=self.client, **filters)

    def get_object(self, **lookup):
        return get_or_404(self.get_queryset(), **lookup)


def serves(operation, *, example: str, body: dict | None = None):
    """Marks a view method as the REST adapter of `operation`, documented in the schema by the operation's
    docstring and the example request (`example`: method and path; `body`: its JSON body)."""

    def mark(handler):
        handler.operation, handler.example, handler.example_body = operation, example, body
        return handler

    return mark


def operation_of(view, method: str):
    return getattr(getattr(view, method.lower(), None), "operation", None)


class InputSerializer(serializers.Serializer):
    """Refuses unknown fields, so a typo is an error. `from_query` lets apps.core.fields take the text
    form of integers, booleans and objects."""

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


def projection(serializer_class, fields: tuple[str, ...], *, name: str, **extra):
    """`serializer_class` showing only `fields` (in its own order), plus the `extra` fields: one
    definition of each field, shown in part where an answer carries part of an item."""
    declared = serializer_class._declared_fields
    unknown = set(fields) - set(declared)
    if unknown:
        raise ValueError(f"{serializer_class.__name__} has no field {', '.join(sorted(unknown))}")
    hidden = dict.fromkeys((field for field in declared if field not in fields), None)
    return type(name, (serializer_class,), {**hidden, **extra, "__module__": serializer_class.__module__})

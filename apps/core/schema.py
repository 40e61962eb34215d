"""The OpenAPI schema: every status an operation can answer, with the error shape, and request schemas
that state the rules apps.core.validation enforces (schemathesis checks both ways in the suite)."""

import inspect

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.plumbing import ResolvedComponent
from drf_spectacular.utils import OpenApiExample
from rest_framework import serializers

from apps.core import fields, validation
from apps.core.api import InputSerializer, operation_of
from apps.core.operations import Access
from apps.core.pagination import PAGE_ALIASES

ERROR_COMPONENT = "Error"
ERROR_SCHEMA = {
    "type": "object",
    "description": "Every error under /api/ has this shape.",
    "properties": {
        "error": {
            "type": "object",
            "properties": {
                "status": {"type": "integer", "description": "The HTTP status, repeated."},
                "code": {"type": "string", "description": "e.g. invalid, not_authenticated, not_found, conflict."},
                "message": {"type": "string", "description": "What was wrong, naming the fields."},
                "details": {"description": "Per-field messages of a validation error."},
            },
            "required": ["status", "code", "message"],
        }
    },
    "required": ["error"],
}
ERROR_DESCRIPTIONS = {
    400: "Invalid input: the message names each field (a body, query or path value, or a stored header).",
    401: "No API key, or an invalid, revoked or disabled one.",
    403: "The client may not do this (read-only client, another scope's item, or no can_erase / can_export / can_manage_webhooks).",
    404: "No such item among those the client reads (a foreign id and a missing one look the same).",
    409: "The request conflicts with stored state (a sealed session, a reused Idempotency-Key).",
    411: "A chunked body sent to a server that cannot read one; send a Content-Length.",
    413: "The body is larger than DATA_UPLOAD_MAX_MEMORY_SIZE.",
    415: "The body is not application/json.",
    429: "Over a rate limit: the message names it; Retry-After says when to send again.",
}

# A date-time inside the accepted window, in the shape the server parses: months with their real day
# counts (29 February is accepted by the server in leap years, but left out of the pattern).
_DAY = "((0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-8])|(0[13-9]|1[0-2])-(29|30)|(0[13578]|1[02])-31)"
DATETIME_PATTERN = (
    f"^(19[0-9]{{2}}|2[01][0-9]{{2}})-{_DAY}T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]{{1,6}})?"
    "(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])?$"
)
DATETIME_DESCRIPTION = (
    f"ISO 8601 date-time in {validation.DATE_WINDOW} with a UTC offset up to ±23:59 (Z or none for UTC); stored as UTC."
)


STORABLE_JSON = "StorableJSON"
SCALARS = [
    {"type": "string", "pattern": validation.TEXT_PATTERN},
    {"type": "number"},
    {"type": "boolean"},
    {"type": "null"},
]


def storable_json_schema() -> dict:
    """Any JSON value the server stores: strings and keys without NUL, numbers finite."""
    return {"$ref": f"#/components/schemas/{STORABLE_JSON}"}


def storable_object_schema() -> dict:
    return {
        "type": "object",
        "propertyNames": {"pattern": validation.TEXT_PATTERN},
        "additionalProperties": storable_json_schema(),
    }


COMBINATIONS = ("anyOf", "oneOf", "allOf")
SHAPE_KEYWORDS = ("type", "enum", "const", "$ref", "properties", "required", "items")


def with_storage_rules(schema: dict, *, date_format: str | None = None) -> dict:
    """A pydantic model's JSON Schema, with what the server stores: text without NUL or lone
    surrogates, date-times (`format: date-time`) in the window, any JSON value as StorableJSON."""
    node = {key: value for key, value in schema.items() if key not in ("title", "format", "default")}
    date_format = schema.get("format", date_format)
    if not any(key in node for key in (*SHAPE_KEYWORDS, *COMBINATIONS)):
        return storable_json_schema()  # an `Any`
    if node.get("type") == "string" and not any(key in node for key in ("enum", "const", "pattern")):
        node["pattern"] = DATETIME_PATTERN if date_format == "date-time" else validation.TEXT_PATTERN
    if node.get("type") == "object" and "properties" not in node and node.get("additionalProperties", True) is True:
        node.update(storable_object_schema())
    if "properties" in node:
        node["properties"] = {name: with_storage_rules(value) for name, value in node["properties"].items()}
    if isinstance(node.get("items"), dict):
        node["items"] = with_storage_rules(node["items"])
    for key in COMBINATIONS:
        if key in node:
            node[key] = [with_storage_rules(member, date_format=date_format) for member in node[key]]
    return node


def add_storable_json_component(result, generator, request, public):
    """drf-spectacular postprocessing hook: the recursive StorableJSON component. Its depth limit is
    stated in words: one component per level grows past what validators and generators can walk."""
    schemas = result.setdefault("components", {}).setdefault("schemas", {})
    schemas[STORABLE_JSON] = {
        "description": f"Any JSON value; the whole body nests at most JSON_MAX_DEPTH ({validation.max_depth()}) "
        "levels, and strings and keys hold no NUL (\\u0000).",
        "anyOf": [*SCALARS, {"type": "array", "items": storable_json_schema()}, storable_object_schema()],
    }
    result["components"]["schemas"] = dict(sorted(schemas.items()))
    return result


# Each group of the API docs (SPECTACULAR_SETTINGS["TAGS"]) by its path prefixes under /api/v1/, tried in order.
PATH_TAGS = {
    "memory": ("memory/",),
    "sessions": ("sessions/", "checkpoints"),
    "skills": ("skills/", "experiences/"),
    "profiles": ("profiles/", "entities/", "topics/"),
    "privacy": ("users/", "clients/", "erasures/", "exports"),
    "webhooks": ("webhooks/",),
    "tasks": ("tasks/",),
    "account": ("me",),
}


class PlatformAutoSchema(AutoSchema):
    """Tags by PATH_TAGS; summary, description and example from the operation served (apps.core.api.serves)."""

    def _handler(self):
        return getattr(self.view, self.method.lower(), None)

    def _operation_doc(self) -> list[str]:
        served = operation_of(self.view, self.method)
        doc = inspect.getdoc(served) if served is not None else None
        return doc.split("\n\n", 1) if doc else []

    def get_tags(self) -> list[str]:
        route = self.path.removeprefix("/api/v1/")
        return [next((tag for tag, prefixes in PATH_TAGS.items() if route.startswith(prefixes)), *super().get_tags())]

    def get_summary(self) -> str | None:
        doc = self._operation_doc()
        return " ".join(doc[0].split()) if doc else None

    def get_description(self) -> str:
        doc = self._operation_doc()
        if not doc:
            return super().get_description()
        parts = [doc[1]] if len(doc) > 1 else []
        example = getattr(self._handler(), "example", None)
        if example:
            body = " with the JSON body of the example below" if getattr(self._handler(), "example_body", None) else ""
            parts.append(f"Example request: `{example}`{body}.")
        return "\n\n".join(parts)

    def get_examples(self):
        body = getattr(self._handler(), "example_body", None)
        return [OpenApiExample("Example request", value=body, request_only=True)] if body else []

    def _map_serializer_field(self, field, direction, bypass_extensions=False):
        schema = super()._map_serializer_field(field, direction, bypass_extensions)
        if direction != "request":
            return schema
        if isinstance(field, fields.DateTimeField):
            schema.pop("format", None)
            schema.update(type="string", pattern=DATETIME_PATTERN, description=DATETIME_DESCRIPTION)
        elif isinstance(field, fields.TagsField):
            schema.update(
                type="object",
                propertyNames={"pattern": validation.TEXT_PATTERN},
                additionalProperties={"anyOf": SCALARS},
            )
        elif isinstance(field, fields.StringInput):
            if not isinstance(field, serializers.RegexField):  # whose own pattern excludes NUL already
                schema.setdefault("pattern", validation.TEXT_PATTERN)
            if not field.allow_blank:
                schema.setdefault("minLength", 1)
        elif isinstance(field, serializers.ListField) and not field.allow_empty:
            schema["minItems"] = 1
        return schema

    def _map_basic_serializer(self, serializer, direction):
        schema = super()._map_basic_serializer(serializer, direction)
        if isinstance(serializer, InputSerializer):
            schema["additionalProperties"] = False  # unknown fields are refused by name
            schema.update(getattr(serializer, "schema_extra", {}))  # rules across fields, e.g. "exactly one of"
            if type(serializer).__dict__.get("__doc__") is None:
                schema.pop("description", None)  # the base class's docstring says nothing to a client
            for name, field_schema in schema.get("properties", {}).items():
                # drf-spectacular writes a blank-allowed string as "pattern, or empty"; the text pattern admits "".
                if "oneOf" in field_schema and field_schema["oneOf"][-1] == {"type": "string", "maxLength": 0}:
                    schema["properties"][name] = {**field_schema.pop("oneOf")[0], **field_schema}
        return schema

    def _get_request_for_media_type(self, serializer, direction="request"):
        schema, required = super()._get_request_for_media_type(serializer, direction)
        if getattr(serializer, "schema_extra", {}).get("minProperties"):
            required = True  # no field is required on its own, but an empty body breaks the rule across them
        return schema, required

    def _resolve_path_parameters(self, variables):
        parameters = super()._resolve_path_parameters(variables)
        for parameter in parameters:
            parameter["schema"] = {"type": "string", "minLength": 1, "pattern": validation.TEXT_PATTERN}
        return parameters

    def _get_parameters(self):
        # The schema names the canonical spelling only: `page`/`page_size` are aliases of `offset`/`limit`
        # that must not contradict them (a 400), a rule between parameters JSON Schema cannot state.
        parameters = [
            parameter
            for parameter in super()._get_parameters()
            if not (parameter["in"] == "query" and parameter["name"] in PAGE_ALIASES)
        ]
        for parameter in parameters:
            schema = parameter.get("schema", {})
            if schema.get("type") == "object":
                # JSON text in the query string (`filter_tags={"team":"a"}`), not form-style key=value pairs.
                parameter["content"] = {"application/json": {"schema": parameter.pop("schema")}}
            elif schema.get("type") == "string" and "enum" not in schema:
                schema.setdefault("pattern", validation.TEXT_PATTERN)
            if parameter["in"] == "header":
                schema.setdefault("maxLength", 255)
        return parameters

    def _get_response_bodies(self, direction="response"):
        responses = super()._get_response_bodies(direction)
        if not self.path.startswith("/api/v1/"):
            return responses
        error = self._error_component().ref
        for status in self._error_statuses():
            response = responses.setdefault(str(status), {"description": ERROR_DESCRIPTIONS[status]})
            response["content"] = {"application/json": {"schema": error}}
        return dict(sorted(responses.items()))

    def _error_component(self) -> ResolvedComponent:
        component = ResolvedComponent(
            name=ERROR_COMPONENT, type=ResolvedComponent.SCHEMA, object=ERROR_COMPONENT, schema=ERROR_SCHEMA
        )
        self.registry.register_on_missing(component)
        return component

    def _error_statuses(self) -> set[int]:
        statuses = {400, 401}
        served = operation_of(self.view, self.method)
        if served is not None and served.access is not Access.READ:
            statuses.add(403)
        if "{" in self.path:
            statuses.add(404)
        if self._get_request_body():
            statuses |= {411, 413, 415}
        # A view's own: a tuple for all its methods, or a mapping of method to tuple.
        declared = getattr(self.view, "error_statuses", ())
        statuses |= set(declared.get(self.method, ()) if isinstance(declared, dict) else declared)
        return statuses

"""Input fields that accept what the OpenAPI schema says and nothing else: the JSON type it names from a
body (DRF would take `"5"` as an integer), the text form from a query string (`from_query`)."""

import re

from rest_framework import serializers

from apps.core import validation


def _from_query(field) -> bool:
    return bool(getattr(field.root, "from_query", False))


class StringInput:
    """Only a JSON string (query text is always one), without NUL or lone surrogates; kept as sent: ids
    and texts are exact (DRF would strip whitespace, so " " would be blank)."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("trim_whitespace", False)
        super().__init__(*args, **kwargs)

    def to_internal_value(self, data):
        if not isinstance(data, str):
            raise serializers.ValidationError("Must be a string.")
        problem = validation.text_problem(data)
        if problem:
            raise serializers.ValidationError(problem)
        return super().to_internal_value(data)


class CharField(StringInput, serializers.CharField):
    pass


class RegexField(StringInput, serializers.RegexField):
    """The whole value must match (Python's `$` would also match before a final newline)."""

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        if value.endswith("\n"):
            self.fail("invalid")
        return value


class ChoiceField(serializers.ChoiceField):
    """One of the listed strings; anything else (another type included) is refused by name."""

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid_choice", input="a non-string value")
        if validation.text_problem(data):
            self.fail("invalid_choice", input="a value with forbidden characters")
        return super().to_internal_value(data)


class StrictBooleanField(serializers.BooleanField):
    """`true`/`false` in JSON; `true`/`false` in a query string. `"yes"`, `1` and `"true"` in a body are refused."""

    default_error_messages = {"invalid": "Must be a JSON boolean, true or false."}

    def to_internal_value(self, data):
        if isinstance(data, bool):
            return data
        if _from_query(self) and data in ("true", "false"):
            return data == "true"
        self.fail("invalid")


class IntegerField(serializers.IntegerField):
    """A JSON integer (digits in a query string) within bounds that default to a bigint column's."""

    default_error_messages = {"invalid": "Must be an integer."}

    def __init__(self, **kwargs):
        kwargs.setdefault("min_value", -validation.BIGINT_MAX)
        kwargs.setdefault("max_value", validation.BIGINT_MAX)
        super().__init__(**kwargs)

    def to_internal_value(self, data):
        if isinstance(data, bool):
            self.fail("invalid")
        if isinstance(data, str):
            if not _from_query(self) or not re.fullmatch(r"-?[0-9]{1,30}", data):
                self.fail("invalid")
            data = int(data)
        if isinstance(data, float) and data.is_integer():
            data = int(data)  # JSON (and JSON Schema) make no difference between 70 and 70.0
        if not isinstance(data, int):
            self.fail("invalid")
        return super().to_internal_value(data)


class DateTimeField(serializers.DateTimeField):
    """ISO 8601 text inside the documented window (years 1900-2199, offsets within ±23:59), as UTC."""

    def to_internal_value(self, data):
        try:
            return validation.parse_datetime_strict(data, field="")
        except validation.InputError as exc:
            raise serializers.ValidationError(exc.message) from None


class TagsField(serializers.DictField):
    """A flat JSON object of scalars, in a body or as JSON text in a query string."""

    default_error_messages = {"not_a_dict": "Must be a JSON object."}

    def to_internal_value(self, data):
        if isinstance(data, str) and _from_query(self):
            try:
                data = validation.loads(data)
            except validation.InputError as exc:
                raise serializers.ValidationError(exc.message) from None
        if not isinstance(data, dict):
            self.fail("not_a_dict", input_type=type(data).__name__)
        try:
            validation.check_tags(data, field="")
        except validation.InputError as exc:
            raise serializers.ValidationError({exc.field: [exc.message]} if exc.field else exc.message) from None
        return super().to_internal_value(data)


class MemoryTypeField(serializers.ChoiceField):
    """A constant, named in the schema as an enum of one."""

    def __init__(self, memory_type: str):
        super().__init__(choices=[memory_type], source="*")
        self.memory_type = memory_type

    def to_representation(self, value):
        return self.memory_type

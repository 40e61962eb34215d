"""The API's only request parser: JSON under the rules of apps.core.validation."""

from rest_framework import exceptions
from rest_framework.parsers import JSONParser, get_encoding

from apps.core.validation import InputError, loads


class StrictJSONParser(JSONParser):
    """A 400 naming the field for what apps.core.validation.loads refuses, instead of storing it or crashing."""

    def parse(self, stream, media_type=None, parser_context=None):
        encoding = get_encoding(parser_context or {})
        try:
            text = stream.read().decode(encoding)
        except UnicodeDecodeError as exc:
            raise exceptions.ParseError(f"The body is not valid {encoding} (byte {exc.start}).") from None
        try:
            return loads(text)
        except InputError as exc:
            if exc.field:
                raise exceptions.ValidationError({exc.field: [exc.message]}) from None
            raise exceptions.ParseError(f"JSON parse error: {exc.message}") from None

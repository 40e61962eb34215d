"""What may reach the database (no NUL, lone surrogates, NaN, unbounded nesting or out-of-window dates),
checked at every edge with an error naming the field; nothing is silently rewritten."""

import json
import math
import re
import uuid
from datetime import datetime, timezone

from django import forms
from django.conf import settings
from django.core.exceptions import ValidationError
from django.utils.dateparse import parse_datetime

# The characters a stored string may not contain: NUL and the surrogate code points (valid only in pairs
# inside UTF-16, never on their own in a Python str that came from UTF-8 or from a JSON \u escape).
FORBIDDEN_CHARACTERS = re.compile("[\x00\ud800-\udfff]")
# The same rule as a JSON Schema pattern, for the OpenAPI schema. It names NUL only: a lone surrogate is
# not a Unicode scalar value, so no JSON Schema string (and no validator's regex engine) can hold one.
TEXT_PATTERN = "^[^\\u0000]*$"
# A JSON escape that decodes to one of them: without one (and without them raw), no decoded string holds one.
FORBIDDEN_ESCAPES = re.compile(r"\\u(?:0000|[dD][89a-fA-F][0-9a-fA-F]{2})")

FIRST_YEAR = 1900
LAST_YEAR = 2199
DATE_WINDOW = f"years {FIRST_YEAR} to {LAST_YEAR}"

# Column ranges: bigint for offsets and counters stored or used in SQL.
BIGINT_MAX = 2**63 - 1


class InputError(ValueError):
    """A value that may not be stored; `field` is its dotted path, `message` says why."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}" if field else message)
        self.field = field
        self.message = message

    def as_validation_error(self) -> ValidationError:
        return ValidationError({self.field or "non_field_errors": [self.message]})


def max_depth() -> int:
    return settings.JSON_MAX_DEPTH


def text_problem(value: str) -> str | None:
    """Why a string may not be stored, or None."""
    found = FORBIDDEN_CHARACTERS.search(value)
    if found is None:
        return None
    if found.group() == "\x00":
        return "Must not contain NUL characters (\\u0000)."
    return "Must not contain unpaired surrogate code points (\\ud800-\\udfff)."


def name_problem(value: str, *, kind: str) -> str | None:
    """The same rule for a key or parameter name: "A key must not contain…"."""
    problem = text_problem(value)
    return f"{kind} {problem[0].lower()}{problem[1:]}" if problem else None


def check_text(value: str, *, field: str) -> str:
    problem = text_problem(value)
    if problem:
        raise InputError(field, problem)
    return value


def _path(at) -> str:
    """The dotted path of a place check_json walks: a string, or (the parent's place, key)."""
    keys = []
    while isinstance(at, tuple):
        at, key = at
        keys.append(str(key))
    return ".".join([at, *reversed(keys)] if at else reversed(keys))


def check_json(value, *, field: str = "", depth: int = 0) -> None:
    """Walks a decoded JSON value without recursion; `depth` is how deep `value` already sits. A
    place's dotted path is spelled out only for an error: every string of a request is walked."""
    limit = max_depth()
    forbidden = FORBIDDEN_CHARACTERS.search
    stack = [(value, field, depth)]
    while stack:
        item, at, level = stack.pop()
        if isinstance(item, str):
            if forbidden(item) is not None:
                raise InputError(_path(at), text_problem(item))
        elif item is None or isinstance(item, int):  # bool is an int
            continue
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise InputError(_path(at), "Numbers must be finite (no NaN or Infinity).")
        elif isinstance(item, (dict, list)):
            if level + 1 > limit:
                raise InputError(_path(at), f"JSON nested deeper than {limit} levels.")
            if isinstance(item, dict):
                for key, child in item.items():
                    if not isinstance(key, str):
                        raise InputError(_path(at), "Object keys must be strings.")
                    if forbidden(key) is not None:
                        raise InputError(_path(at), name_problem(key, kind="A key"))
                    stack.append((child, (at, key), level + 1))
            else:
                stack.extend((child, (at, index), level + 1) for index, child in enumerate(item))
        else:
            raise InputError(_path(at), f"Not a JSON value ({type(item).__name__}).")


def _refuse_constant(name):
    raise InputError("", f"{name} is not valid JSON; numbers must be finite.")


def _finite_float(text):
    number = float(text)
    if not math.isfinite(number):
        raise InputError("", f"The number {text[:20]} is out of range.")
    return number


def loads(text: str | bytes, *, field: str = "", check_values: bool = True):
    """json.loads, refusing NaN, Infinity, overflowing numbers, NUL, lone surrogates and deep nesting;
    `check_values=False` leaves strings and depth to the caller."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InputError(field, f"Not UTF-8 (byte {exc.start}).") from None
    if "\x00" in text:  # raw, outside any escape: JSON would call it a control character
        raise InputError(field, text_problem("\x00"))
    try:
        value = json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float)
    except InputError as exc:
        raise InputError(field, exc.message) from None
    except RecursionError:
        raise InputError(field, f"JSON nested deeper than {max_depth()} levels.") from None
    except ValueError as exc:  # JSONDecodeError, or an integer too long to convert
        raise InputError(field, f"Not valid JSON: {exc}") from None
    if check_values and not _plainly_valid(text):
        check_json(value, field=field)
    return value


def _plainly_valid(text: str) -> bool:
    """Whether the text can only decode to values check_json accepts, so most documents skip the walk."""
    return (
        text.count("{") + text.count("[") <= max_depth()
        and FORBIDDEN_CHARACTERS.search(text) is None
        and FORBIDDEN_ESCAPES.search(text) is None
    )


def check_tags(tags, *, field: str) -> dict:
    """Tags (`filter_tags`): a flat object of strings, numbers, booleans or nulls."""
    if not isinstance(tags, dict):
        raise InputError(field, "Must be a JSON object.")
    check_json(tags, field=field, depth=1)
    for key, value in tags.items():
        if isinstance(value, (dict, list)):
            raise InputError(_path((field, key)), "Tag values must be a string, a number, a boolean or null.")
    return tags


def check_fields(values: dict) -> None:
    """For services: a Django ValidationError naming the first field that may not be stored."""
    try:
        for name, value in values.items():
            check_json(value, field=name)
    except InputError as exc:
        raise exc.as_validation_error() from None


class JSONFormField(forms.JSONField):
    """The API's rules for the admin's JSON inputs (Django's own accepts NaN and crashes on deep nesting)."""

    def to_python(self, value):
        if self.disabled or value in self.empty_values or isinstance(value, (list, dict, int, float)):
            return super().to_python(value)
        try:
            return loads(value)
        except InputError as exc:
            raise ValidationError(str(exc), code="invalid") from None

    def bound_data(self, data, initial):
        """Redisplays refused input as typed (Django's own would parse it again, unguarded)."""
        if self.disabled:
            return initial
        if data is None:
            return None
        try:
            return loads(data)
        except InputError:
            return forms.fields.InvalidJSONInput(data)


def check_datetime(value: datetime, *, field: str) -> datetime:
    """An aware datetime inside the documented window, as UTC."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    if not FIRST_YEAR <= value.year <= LAST_YEAR:
        raise InputError(field, f"Dates must fall in {DATE_WINDOW}.")
    return value.astimezone(timezone.utc)


def parse_datetime_strict(text, *, field: str, default_tz=timezone.utc) -> datetime:
    """ISO 8601 text → an aware UTC datetime in the window; InputError says what was wrong."""
    if not isinstance(text, str):
        raise InputError(field, "Must be an ISO 8601 date-time string.")
    check_text(text, field=field)
    try:
        parsed = parse_datetime(text.strip())
    except ValueError:  # the shape is right, a part is not (month 13, Feb 30, hour 24, offset ±24:00 or more)
        raise InputError(
            field, "Not a valid date-time: a month, day, hour, minute or UTC offset is out of range."
        ) from None
    if parsed is None:
        raise InputError(field, "Not an ISO 8601 date-time.")
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=default_tz)
    return check_datetime(parsed, field=field)


def is_uuid(value) -> bool:
    """Whether `value` (or its text) is a UUID in any form uuid.UUID reads."""
    try:
        uuid.UUID(str(value))
    except ValueError:
        return False
    return True

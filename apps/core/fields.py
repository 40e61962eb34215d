"""Serializer fields stricter than DRF's defaults."""

from rest_framework import serializers


class StrictBooleanField(serializers.BooleanField):
    """A JSON boolean and nothing else: DRF's BooleanField would take "yes", "on", 1 or "0"."""

    default_error_messages = {"invalid": "Must be a JSON boolean, true or false."}

    def to_internal_value(self, data):
        if isinstance(data, bool):
            return data
        self.fail("invalid")

from rest_framework import serializers

from apps.core import fields
from apps.core.api import InputSerializer
from apps.tenancy.models import SCOPE_PATTERN


class ExportInputSerializer(InputSerializer):
    schema_extra = {"minProperties": 1, "maxProperties": 1}  # exactly one of the three
    user_id = fields.CharField(
        max_length=255, required=False, help_text="An end user: everything erasing them would delete."
    )
    client_id = fields.CharField(
        max_length=64, required=False, help_text="A client of the organisation: what it wrote."
    )
    scope = fields.RegexField(SCOPE_PATTERN, required=False, help_text="A scope: everything stored in it.")

    def validate(self, data):
        given = [name for name in ("user_id", "client_id", "scope") if name in data]
        if len(given) != 1:
            raise serializers.ValidationError(
                {"non_field_errors": ["Give exactly one of user_id, client_id or scope."]}
            )
        return data


class ExportAcceptedOutputSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    status = serializers.CharField()
    task_id = serializers.UUIDField(allow_null=True)


class ExportOutputSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    selection = serializers.CharField(help_text="user, client or scope.")
    value = serializers.CharField(help_text="The user_id, client id or scope exported.")
    status = serializers.CharField(help_text="queued, running, succeeded, failed (retried) or expired.")
    counts = serializers.JSONField(help_text="Rows per kind in the archive.")
    size_bytes = serializers.IntegerField()
    sha256 = serializers.CharField(help_text="Of the archive file.")
    error = serializers.CharField()
    task_id = serializers.UUIDField(allow_null=True)
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)
    expires_at = serializers.DateTimeField(allow_null=True, help_text="After this the archive is deleted.")
    download_url = serializers.CharField(
        allow_null=True,
        help_text="While the archive is ready and not expired; only the requesting client may download it.",
    )

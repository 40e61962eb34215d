from rest_framework import serializers


class ErasureAcceptedOutputSerializer(serializers.Serializer):
    erasure_id = serializers.UUIDField(source="id")
    status = serializers.CharField()
    task_id = serializers.UUIDField(allow_null=True)


class ErasureOutputSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    subject_kind = serializers.CharField()
    subject_id = serializers.CharField()
    status = serializers.CharField()
    counts = serializers.JSONField()
    residual = serializers.JSONField(allow_null=True)
    error = serializers.CharField()
    requested_by = serializers.UUIDField(source="requested_by_id", allow_null=True)
    authorized_by = serializers.CharField()
    task_id = serializers.UUIDField(allow_null=True)
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)

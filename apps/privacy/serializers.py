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
    task_id = serializers.UUIDField(allow_null=True)
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)

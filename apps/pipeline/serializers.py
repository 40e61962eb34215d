from rest_framework import serializers


class TaskOutputSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    task_type = serializers.CharField()
    status = serializers.CharField()
    attempts = serializers.IntegerField()
    max_attempts = serializers.IntegerField()
    run_after = serializers.DateTimeField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)
    error = serializers.SerializerMethodField()
    result = serializers.JSONField(help_text="What the work reported (any JSON; null until it finished).")

    def get_error(self, task) -> str:
        """The first line only: tracebacks are for operators in the admin."""
        return task.error.splitlines()[0] if task.error else ""

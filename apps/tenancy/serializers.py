from rest_framework import serializers


class CurrentClientOutputSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    name = serializers.CharField()
    organization = serializers.CharField(source="organization.name")
    write_scope = serializers.CharField(allow_null=True)
    read_scopes = serializers.ListField(child=serializers.CharField())
    can_erase = serializers.BooleanField()
    can_export = serializers.BooleanField()
    can_manage_webhooks = serializers.BooleanField()

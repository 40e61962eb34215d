from rest_framework import serializers

from apps.core import fields
from apps.core.api import InputSerializer
from apps.core.pagination import PageQuerySerializer
from apps.profiles.models import Entity, Profile


class ProfileListFilterSerializer(PageQuerySerializer):
    user_id = fields.CharField(max_length=255, required=False)
    status = fields.ChoiceField(choices=Profile.Status.choices, required=False)
    kind = fields.ChoiceField(
        choices=Profile.Kind.choices, required=False, help_text="`person` (the default) or `topic` pages."
    )


class EntityListFilterSerializer(PageQuerySerializer):
    user_id = fields.CharField(max_length=255)
    kind = fields.ChoiceField(choices=Entity.Kind.choices, required=False)


class SourceRefSerializer(serializers.Serializer):
    item_type = serializers.CharField()
    item_id = serializers.UUIDField()


class ProfileOutputSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    kind = serializers.CharField()
    entity_id = serializers.UUIDField(allow_null=True, help_text="The person's entity; null on a topic page.")
    name = serializers.CharField()
    user_id = serializers.CharField(source="end_user.user_id")
    scope = serializers.CharField()
    status = serializers.CharField()
    markdown = serializers.CharField()
    revision = serializers.IntegerField()
    sources = SourceRefSerializer(source="source_refs", many=True)
    compiled_at = serializers.DateTimeField(allow_null=True)
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


class QuotedSourceSerializer(SourceRefSerializer):
    quote = serializers.CharField()


class RevisionSerializer(serializers.Serializer):
    number = serializers.IntegerField()
    markdown = serializers.CharField()
    model = serializers.CharField()
    prompt_tokens = serializers.IntegerField()
    completion_tokens = serializers.IntegerField()
    reason = serializers.CharField()
    sources = QuotedSourceSerializer(many=True)
    created_at = serializers.DateTimeField()


class ProfileDetailOutputSerializer(ProfileOutputSerializer):
    sources = QuotedSourceSerializer(many=True, source="sources.all")
    revisions = RevisionSerializer(many=True, source="revisions.all")


class EdgeSerializer(serializers.Serializer):
    entity_id = serializers.UUIDField()
    name = serializers.CharField()
    kind = serializers.CharField()
    weight = serializers.IntegerField()
    evidence = serializers.ListField(child=serializers.DictField())


class EntityOutputSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    kind = serializers.CharField()
    name = serializers.CharField()
    aliases = serializers.ListField(child=serializers.CharField())
    is_user = serializers.BooleanField()
    mention_count = serializers.IntegerField()
    user_id = serializers.CharField(source="end_user.user_id")
    scope = serializers.CharField()
    edges = serializers.SerializerMethodField()

    def get_edges(self, entity) -> list[dict]:
        edges = [(edge, edge.target) for edge in entity.edges_out.all()]
        edges += [(edge, edge.source) for edge in entity.edges_in.all()]
        edges.sort(key=lambda pair: (-pair[0].weight, pair[1].name))
        rows = [
            {
                "entity_id": other.pk,
                "name": other.name,
                "kind": other.kind,
                "weight": edge.weight,
                "evidence": edge.evidence,
            }
            for edge, other in edges
        ]
        return EdgeSerializer(rows, many=True).data


class TopicCompileInputSerializer(InputSerializer):
    user_id = fields.CharField(
        max_length=255, required=False, help_text="Only this user's topics; every user's of the scope if left out."
    )


class TopicCompileOutputSerializer(serializers.Serializer):
    scope = serializers.CharField()
    user_id = serializers.CharField(allow_null=True)
    task_id = serializers.UUIDField()
    task_status = serializers.CharField()


class LintIssueSerializer(serializers.Serializer):
    finding_id = serializers.UUIDField()
    page_id = serializers.UUIDField()
    page = serializers.CharField()
    page_kind = serializers.CharField()
    finding = serializers.CharField(help_text="`stale`, `orphan` or `contradiction`.")
    severity = serializers.CharField()
    detail = serializers.CharField()
    peer_id = serializers.UUIDField(allow_null=True)
    created_at = serializers.DateTimeField()


class LintOutputSerializer(serializers.Serializer):
    stale = serializers.IntegerField(help_text="Stale findings this pass opened.")
    orphan = serializers.IntegerField()
    contradiction = serializers.IntegerField()
    recompiles = serializers.IntegerField(help_text="Recompiles this pass queued.")
    issues = LintIssueSerializer(many=True, help_text="Every open finding of the page after the pass.")
    issues_total = serializers.IntegerField()


class LintFindingOutputSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    kind = serializers.ChoiceField(choices=["stale", "orphan", "contradiction"])
    severity = serializers.ChoiceField(choices=["info", "warning", "error"])
    status = serializers.ChoiceField(choices=["open", "resolved"])
    detail = serializers.CharField()
    peer_id = serializers.UUIDField(allow_null=True, help_text="The other page of a contradiction.")
    resolved_by = serializers.CharField()
    resolved_at = serializers.DateTimeField(allow_null=True)
    created_at = serializers.DateTimeField()


class ProfileFindingsOutputSerializer(serializers.Serializer):
    profile_id = serializers.UUIDField()
    findings = LintFindingOutputSerializer(many=True, help_text="Open findings first, newest first.")

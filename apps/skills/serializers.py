from rest_framework import serializers

from apps.core import fields
from apps.core.api import InputSerializer
from apps.core.pagination import PageQuerySerializer
from apps.skills.models import ExperienceType, Skill, SkillExperience
from apps.tenancy.models import SCOPE_PATTERN

MAX_K = 50


class SkillRetrieveInputSerializer(InputSerializer):
    task = fields.CharField(max_length=8000, trim_whitespace=True)
    k = fields.IntegerField(min_value=1, max_value=MAX_K, default=5)
    user_id = fields.CharField(
        max_length=255,
        required=False,
        help_text="The end user the agent acts for: also the skills this user taught. Without it, only shared skills.",
    )


class RetrievedSkillSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    name = serializers.CharField()
    description = serializers.CharField()
    instructions = serializers.CharField()
    triggers = serializers.JSONField()
    examples = serializers.JSONField()
    entry_type = serializers.CharField()
    version = serializers.IntegerField()
    scope = serializers.CharField()
    shared = serializers.BooleanField(
        help_text="Served to every user of the scope; false: only to the users who taught it."
    )
    score = serializers.FloatField()


class SkillRetrieveOutputSerializer(serializers.Serializer):
    task = serializers.CharField()
    skills = RetrievedSkillSerializer(many=True)


class SkillListFilterSerializer(PageQuerySerializer):
    status = fields.ChoiceField(choices=Skill.Status.choices, required=False)
    entry_type = fields.ChoiceField(choices=Skill.EntryType.choices, required=False)
    scope = fields.RegexField(SCOPE_PATTERN, required=False)
    user_id = fields.CharField(max_length=255, required=False)
    q = fields.CharField(max_length=500, required=False)


class SkillOutputSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    name = serializers.CharField()
    description = serializers.CharField()
    instructions = serializers.CharField()
    triggers = serializers.JSONField()
    examples = serializers.JSONField()
    entry_type = serializers.CharField()
    status = serializers.CharField()
    version = serializers.IntegerField()
    scope = serializers.CharField()
    user_id = serializers.CharField(source="end_user.user_id", allow_null=True, default=None)
    shared = serializers.BooleanField(
        help_text="Served to every user of the scope; false: only to the users who taught it."
    )
    action_signature = serializers.ListField(child=serializers.CharField())
    retrieval_count = serializers.IntegerField()
    last_retrieved_at = serializers.DateTimeField(allow_null=True)
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()


class SkillVersionOutputSerializer(serializers.Serializer):
    version = serializers.IntegerField()
    operation = serializers.CharField()
    actor = serializers.CharField()
    reason = serializers.CharField()
    snapshot = serializers.JSONField()
    experience_ids = serializers.SerializerMethodField()
    created_at = serializers.DateTimeField()

    def get_experience_ids(self, version) -> list[str]:
        return [str(experience.pk) for experience in version.experiences.all()]


class SkillDetailOutputSerializer(SkillOutputSerializer):
    versions = SkillVersionOutputSerializer(many=True)


class ExperienceListFilterSerializer(PageQuerySerializer):
    status = fields.ChoiceField(choices=SkillExperience.Status.choices, required=False)
    experience_type = fields.ChoiceField(choices=ExperienceType.choices, required=False)
    scope = fields.RegexField(SCOPE_PATTERN, required=False)
    user_id = fields.CharField(max_length=255, required=False)
    session_id = fields.CharField(max_length=64, required=False)
    q = fields.CharField(max_length=500, required=False)


class ExperienceOutputSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    experience_type = serializers.CharField()
    title = serializers.CharField()
    content = serializers.CharField()
    importance = serializers.FloatField()
    credibility = serializers.FloatField()
    evidence = serializers.JSONField()
    action_signature = serializers.ListField(child=serializers.CharField())
    source_message_ids = serializers.ListField(child=serializers.UUIDField())
    status = serializers.CharField()
    scope = serializers.CharField()
    user_id = serializers.CharField(source="end_user.user_id")
    session_id = serializers.CharField(source="session.session_id", allow_null=True, default=None)
    created_at = serializers.DateTimeField()


class DistillOutputSerializer(serializers.Serializer):
    session_id = serializers.CharField()
    task_id = serializers.UUIDField()
    task_status = serializers.CharField()

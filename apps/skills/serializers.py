from rest_framework import serializers

from apps.conversations.models import SESSION_ID_PATTERN
from apps.core import fields
from apps.core.api import InputSerializer, projection
from apps.core.pagination import PageQuerySerializer
from apps.skills.models import ExperienceType, Skill, SkillExperience, SkillFeedback
from apps.tenancy.models import SCOPE_PATTERN

MAX_K = 50
SESSION_ID_ERRORS = {"invalid": "Use 1-64 letters, digits, '_' or '-'."}


class SkillRetrieveInputSerializer(InputSerializer):
    schema_extra = {"dependentRequired": {"session_id": ["user_id"]}}  # a session is always some user's
    task = fields.CharField(max_length=8000, trim_whitespace=True)
    k = fields.IntegerField(min_value=1, max_value=MAX_K, default=5)
    user_id = fields.CharField(
        max_length=255,
        required=False,
        help_text="The end user the agent acts for: also the skills this user taught. Without it, only shared skills.",
    )
    session_id = fields.RegexField(
        SESSION_ID_PATTERN,
        required=False,
        error_messages=SESSION_ID_ERRORS,
        help_text="The task session (of `user_id`, in the client's write scope) the skills serve: each skill "
        "returned is recorded as a use of it, and the session's outcome, once sealed, counts for or against the "
        "skills of that scope at the top ranks and those marked applied (each end user once).",
    )


class SkillUseInputSerializer(InputSerializer):
    user_id = fields.CharField(max_length=255)
    session_id = fields.RegexField(SESSION_ID_PATTERN, error_messages=SESSION_ID_ERRORS)


class SkillUseOutputSerializer(serializers.Serializer):
    skill_id = serializers.UUIDField()
    session_id = serializers.CharField()
    applied = serializers.IntegerField(help_text="The uses of the skill in the session now marked applied.")
    applied_at = serializers.DateTimeField()


class SkillFeedbackInputSerializer(SkillUseInputSerializer):
    verdict = fields.ChoiceField(choices=SkillFeedback.Verdict.choices)
    reason = fields.CharField(max_length=2000, required=False, allow_blank=True, default="")


class SkillFeedbackOutputSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    skill_id = serializers.UUIDField()
    version = serializers.IntegerField()
    session_id = serializers.CharField()
    user_id = serializers.CharField(source="end_user.user_id", allow_null=True, default=None)
    verdict = serializers.CharField()
    reason = serializers.CharField()
    actor = serializers.CharField()
    created_at = serializers.DateTimeField()


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


RetrievedSkillSerializer = projection(
    SkillOutputSerializer,
    # `action_signature`: the tools the skill's workflow calls, so an agent (the AI SDK middleware) can tell
    # from its own tool calls that it followed the skill and report it applied.
    (
        "id",
        "name",
        "description",
        "instructions",
        "triggers",
        "examples",
        "entry_type",
        "version",
        "scope",
        "shared",
        "action_signature",
    ),
    name="RetrievedSkillSerializer",
    score=serializers.FloatField(help_text="The ranking score: relevance times the effectiveness factor."),
    relevance=serializers.FloatField(help_text="The hybrid search score alone."),
    effectiveness_factor=serializers.FloatField(
        help_text="Within 1 ± SKILL_EFFECTIVENESS_WEIGHT: above 1 when the skill's sessions succeed more often than "
        "its scope's, below when less; 1 without outcomes."
    ),
    effectiveness_reason=serializers.CharField(),
)


class SkillRetrieveOutputSerializer(serializers.Serializer):
    task = serializers.CharField()
    session_id = serializers.CharField(allow_null=True)
    effectiveness_weight = serializers.FloatField(help_text="SKILL_EFFECTIVENESS_WEIGHT: the factor's bound.")
    skills = RetrievedSkillSerializer(many=True)


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


class EffectivenessVersionSerializer(serializers.Serializer):
    version = serializers.IntegerField()
    uses = serializers.IntegerField(help_text="Retrievals that returned it.")
    applied = serializers.IntegerField(help_text="Uses the agent reported it followed.")
    sessions = serializers.IntegerField(
        help_text="Sealed task sessions with an outcome that count for it: in its scope, and it was at the top "
        "of their retrieval or marked applied. For information: the figures below count users."
    )
    users = serializers.IntegerField(help_text="The end users of those sessions, each counted once.")
    successes = serializers.IntegerField(
        help_text="Users whose sessions mostly succeeded (their latest decides a tie)."
    )
    failures = serializers.IntegerField(help_text="Users whose sessions mostly failed.")
    success_rate = serializers.FloatField(allow_null=True, help_text="successes / users.")
    success_rate_interval = serializers.ListField(
        child=serializers.FloatField(), allow_null=True, help_text="Wilson 95% interval."
    )
    baseline_users = serializers.IntegerField(
        help_text="The scope's users with sealed task sessions with an outcome that did not retrieve it, each once."
    )
    baseline_successes = serializers.IntegerField()
    baseline_rate = serializers.FloatField(allow_null=True)
    lift = serializers.FloatField(allow_null=True, help_text="success_rate - baseline_rate.")
    lift_interval = serializers.ListField(
        child=serializers.FloatField(), allow_null=True, help_text="Newcombe 95% interval of the lift."
    )


class EffectivenessFeedbackSerializer(serializers.Serializer):
    helped = serializers.IntegerField()
    hurt = serializers.IntegerField()
    irrelevant = serializers.IntegerField()


class ReviewWindowSerializer(EffectivenessVersionSerializer):
    version = None
    since_version = serializers.IntegerField(
        help_text="The window starts at the version a person's latest approval made (1: never approved)."
    )
    harmful = serializers.BooleanField(help_text="Whether this evidence sends the skill to review.")


class EffectivenessSerializer(EffectivenessVersionSerializer):
    version = None
    feedback = EffectivenessFeedbackSerializer()
    versions = EffectivenessVersionSerializer(many=True)
    review = ReviewWindowSerializer(help_text="The evidence review decides on: since a person last approved it.")


class SkillDetailOutputSerializer(SkillOutputSerializer):
    versions = SkillVersionOutputSerializer(many=True)
    effectiveness = EffectivenessSerializer()


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

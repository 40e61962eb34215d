"""REST adapters of apps.skills.operations."""

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.response import Response

from apps.conversations.views import SCOPE_PARAMETER, USER_ID_PARAMETER
from apps.core.adapters import delete_view, list_view, read_view
from apps.core.api import ClientAPIView, serves
from apps.skills import operations, serializers


class SkillRetrieveView(ClientAPIView):
    @extend_schema(
        request=serializers.SkillRetrieveInputSerializer, responses=serializers.SkillRetrieveOutputSerializer
    )
    @serves(
        operations.retrieve_skills,
        example="POST /api/v1/skills/retrieve",
        body={
            "task": "Book a one-way flight from Lisbon to Oslo for next Friday",
            "k": 5,
            "user_id": "alice",
            "session_id": "book-flight-17",
        },
    )
    def post(self, request):
        return Response(operations.retrieve_skills(client=self.client, data=request.data))


SkillListView = list_view(
    operations.list_skills,
    filters=serializers.SkillListFilterSerializer,
    output=serializers.SkillOutputSerializer,
    example="GET /api/v1/skills/?status=active&q=flight&limit=20",
)


class SkillDetailView(
    read_view(
        operations.get_skill,
        output=serializers.SkillDetailOutputSerializer,
        example="GET /api/v1/skills/0b7e3c1d-8f2a-4c6e-9d15-7a4b2e9f6c31/",
    )
):
    @extend_schema(responses={204: None})
    @serves(operations.delete_skill, example="DELETE /api/v1/skills/0b7e3c1d-8f2a-4c6e-9d15-7a4b2e9f6c31/")
    def delete(self, request, skill_id):
        operations.delete_skill(client=self.client, item_id=skill_id)
        return Response(status=status.HTTP_204_NO_CONTENT)


class SkillUseView(ClientAPIView):
    error_statuses = (409,)  # the session never retrieved the skill

    @extend_schema(request=serializers.SkillUseInputSerializer, responses=serializers.SkillUseOutputSerializer)
    @serves(
        operations.apply_skill,
        example="POST /api/v1/skills/0b7e3c1d-8f2a-4c6e-9d15-7a4b2e9f6c31/uses",
        body={"user_id": "alice", "session_id": "book-flight-17"},
    )
    def post(self, request, skill_id):
        return Response(operations.apply_skill(client=self.client, skill_id=skill_id, data=request.data))


class SkillFeedbackView(ClientAPIView):
    @extend_schema(
        request=serializers.SkillFeedbackInputSerializer, responses={201: serializers.SkillFeedbackOutputSerializer}
    )
    @serves(
        operations.skill_feedback,
        example="POST /api/v1/skills/0b7e3c1d-8f2a-4c6e-9d15-7a4b2e9f6c31/feedback",
        body={
            "user_id": "alice",
            "session_id": "book-flight-17",
            "verdict": "hurt",
            "reason": "The fare rules step no longer applies to basic economy.",
        },
    )
    def post(self, request, skill_id):
        body = operations.skill_feedback(client=self.client, skill_id=skill_id, data=request.data)
        return Response(body, status=status.HTTP_201_CREATED)


ProceduralMemoryDeleteView = delete_view(
    operations.delete_skill, example="DELETE /api/v1/memory/procedural/0b7e3c1d-8f2a-4c6e-9d15-7a4b2e9f6c31"
)
ExperienceListView = list_view(
    operations.list_experiences,
    filters=serializers.ExperienceListFilterSerializer,
    output=serializers.ExperienceOutputSerializer,
    example="GET /api/v1/experiences/?experience_type=worth_avoiding&limit=20",
)
ExperienceDetailView = delete_view(
    operations.delete_experience, example="DELETE /api/v1/experiences/2e3f4a5b-6c7d-4e8f-9a0b-1c2d3e4f5a6b/"
)


class SessionDistillView(ClientAPIView):
    error_statuses = (409,)  # not a task session, or not sealed yet

    @extend_schema(
        parameters=[USER_ID_PARAMETER, SCOPE_PARAMETER],
        request=None,
        responses={202: serializers.DistillOutputSerializer},
    )
    @serves(operations.distill_session, example="POST /api/v1/sessions/book-flight-17/distill?user_id=alice")
    def post(self, request, session_id):
        body = operations.distill_session(client=self.client, session_id=session_id, query=request.query_params)
        return Response(body, status=status.HTTP_202_ACCEPTED)

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.response import Response

from apps.conversations.views import SCOPE_PARAMETER, USER_ID_PARAMETER, SessionObjectMixin
from apps.core.api import ClientAPIView, require_write_access
from apps.core.pagination import Pagination
from apps.core.permissions import IsActiveClient
from apps.skills.selectors import experience_list, skill_detail_queryset, skill_list, skill_writable_queryset
from apps.skills.serializers import (
    DistillOutputSerializer,
    ExperienceListFilterSerializer,
    ExperienceOutputSerializer,
    SkillDetailOutputSerializer,
    SkillListFilterSerializer,
    SkillOutputSerializer,
    SkillRetrieveInputSerializer,
    SkillRetrieveOutputSerializer,
)
from apps.skills.services.distill import distill_request
from apps.skills.services.retrieve import skills_retrieve
from apps.skills.services.skills import skill_delete


class SkillRetrieveView(ClientAPIView):
    # A retrieval reads: read-only clients may POST it.
    permission_classes = [IsActiveClient]

    @extend_schema(request=SkillRetrieveInputSerializer, responses=SkillRetrieveOutputSerializer)
    def post(self, request):
        serializer = SkillRetrieveInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        hits = skills_retrieve(reader=self.client.reader, task=data["task"], k=data["k"], user_id=data.get("user_id"))
        skills = [{**SkillOutputSerializer(skill).data, "score": score} for skill, score in hits]
        return Response(SkillRetrieveOutputSerializer({"task": data["task"], "skills": skills}).data)


class SkillListView(ClientAPIView):
    pagination_class = Pagination  # also tells the OpenAPI schema the list is paginated

    def scoped_queryset(self, *, client, filters=None):
        return skill_list(reader=client.reader, filters=filters)

    @extend_schema(parameters=[SkillListFilterSerializer], responses=SkillOutputSerializer(many=True))
    def get(self, request):
        filters = SkillListFilterSerializer(data=request.query_params)
        filters.is_valid(raise_exception=True)
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(self.get_queryset(filters=filters.validated_data), request, self)
        return paginator.get_paginated_response(SkillOutputSerializer(page, many=True).data)


class SkillDetailView(ClientAPIView):
    def scoped_queryset(self, *, client):
        return skill_detail_queryset(reader=client.reader)

    @extend_schema(responses=SkillDetailOutputSerializer)
    def get(self, request, skill_id):
        return Response(SkillDetailOutputSerializer(self.get_object(pk=skill_id)).data)

    @extend_schema(responses={204: None})
    def delete(self, request, skill_id):
        return _delete_skill(self, skill_id)


class ProceduralMemoryDeleteView(ClientAPIView):
    def scoped_queryset(self, *, client):
        return skill_writable_queryset(reader=client.reader)

    @extend_schema(responses={204: None})
    def delete(self, request, item_id):
        return _delete_skill(self, item_id)


def _delete_skill(view: ClientAPIView, skill_id) -> Response:
    skill = view.get_object(pk=skill_id)
    require_write_access(view.client, skill)
    skill_delete(skill=skill)
    return Response(status=status.HTTP_204_NO_CONTENT)


class ExperienceListView(ClientAPIView):
    pagination_class = Pagination  # also tells the OpenAPI schema the list is paginated

    def scoped_queryset(self, *, client, filters=None):
        return experience_list(reader=client.reader, filters=filters)

    @extend_schema(parameters=[ExperienceListFilterSerializer], responses=ExperienceOutputSerializer(many=True))
    def get(self, request):
        filters = ExperienceListFilterSerializer(data=request.query_params)
        filters.is_valid(raise_exception=True)
        paginator = self.pagination_class()
        queryset = self.get_queryset(filters=filters.validated_data)
        page = paginator.paginate_queryset(queryset, request, self)
        return paginator.get_paginated_response(ExperienceOutputSerializer(page, many=True).data)


class SessionDistillView(SessionObjectMixin, ClientAPIView):
    error_statuses = (409,)  # not a task session, or not sealed yet

    @extend_schema(
        parameters=[USER_ID_PARAMETER, SCOPE_PARAMETER],
        request=None,
        responses={202: DistillOutputSerializer},
    )
    def post(self, request, session_id):
        session = self.get_session(session_id)
        require_write_access(self.client, session)
        task = distill_request(session=session, client=self.client)
        body = {"session_id": session.session_id, "task_id": task.pk, "task_status": task.status}
        return Response(DistillOutputSerializer(body).data, status=status.HTTP_202_ACCEPTED)

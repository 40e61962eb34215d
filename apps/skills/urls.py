"""Skill routes, included under /api/v1/ by memory_platform/api_router.py."""

from django.urls import path

from apps.skills.views import (
    ExperienceListView,
    ProceduralMemoryDeleteView,
    SessionDistillView,
    SkillDetailView,
    SkillListView,
    SkillRetrieveView,
)

urlpatterns = [
    path("skills/retrieve", SkillRetrieveView.as_view(), name="skill-retrieve"),
    path("skills/", SkillListView.as_view(), name="skill-list"),
    path("skills/<str:skill_id>/", SkillDetailView.as_view(), name="skill-detail"),
    path("memory/procedural/<str:item_id>", ProceduralMemoryDeleteView.as_view(), name="memory-procedural-delete"),
    path("experiences/", ExperienceListView.as_view(), name="experience-list"),
    path("sessions/<str:session_id>/distill", SessionDistillView.as_view(), name="session-distill"),
]

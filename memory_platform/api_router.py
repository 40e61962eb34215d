"""Every /api/v1/ route, in one place."""

from django.urls import path

from apps.conversations.views import (
    MemoryAddView,
    MessageDeleteView,
    SessionDetailView,
    SessionListView,
    SessionSealView,
)
from apps.memories.views import EpisodicMemoryDeleteView, SemanticMemoryDeleteView
from apps.pipeline.views import TaskDetailView
from apps.privacy.views import ClientErasureView, ErasureDetailView, UserErasureView
from apps.profiles.views import EntityListView, ProfileDetailView, ProfileListView
from apps.search.views import MemorySearchView, SearchAllUsersView
from apps.skills.views import (
    ExperienceListView,
    ProceduralMemoryDeleteView,
    SessionDistillView,
    SkillDetailView,
    SkillListView,
    SkillRetrieveView,
)
from apps.tenancy.views import CurrentClientView

urlpatterns = [
    path("me", CurrentClientView.as_view(), name="current-client"),
    path("tasks/<str:task_id>/", TaskDetailView.as_view(), name="task-detail"),
    path("memory/add", MemoryAddView.as_view(), name="memory-add"),
    path("memory/search", MemorySearchView.as_view(), name="memory-search"),
    path("memory/search_all_users", SearchAllUsersView.as_view(), name="memory-search-all-users"),
    path("memory/message/<str:item_id>", MessageDeleteView.as_view(), name="memory-message-delete"),
    path("sessions/", SessionListView.as_view(), name="session-list"),
    path("sessions/<str:session_id>/", SessionDetailView.as_view(), name="session-detail"),
    path("sessions/<str:session_id>/seal", SessionSealView.as_view(), name="session-seal"),
    path("sessions/<str:session_id>/distill", SessionDistillView.as_view(), name="session-distill"),
    path("memory/procedural/<str:item_id>", ProceduralMemoryDeleteView.as_view(), name="memory-procedural-delete"),
    path("memory/episodic/<str:item_id>", EpisodicMemoryDeleteView.as_view(), name="memory-episodic-delete"),
    path("memory/semantic/<str:item_id>", SemanticMemoryDeleteView.as_view(), name="memory-semantic-delete"),
    path("skills/retrieve", SkillRetrieveView.as_view(), name="skill-retrieve"),
    path("skills/", SkillListView.as_view(), name="skill-list"),
    path("skills/<str:skill_id>/", SkillDetailView.as_view(), name="skill-detail"),
    path("experiences/", ExperienceListView.as_view(), name="experience-list"),
    path("users/<path:user_id>/memories", UserErasureView.as_view(), name="user-erasure"),
    path("clients/<str:client_id>/memories", ClientErasureView.as_view(), name="client-erasure"),
    path("erasures/<str:erasure_id>/", ErasureDetailView.as_view(), name="erasure-detail"),
    path("profiles/", ProfileListView.as_view(), name="profile-list"),
    path("profiles/<str:profile_id>/", ProfileDetailView.as_view(), name="profile-detail"),
    path("entities/", EntityListView.as_view(), name="entity-list"),
]

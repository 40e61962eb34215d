"""Every /api/v1/ route, in one place."""

from django.urls import path

from apps.context.views import ContextView
from apps.conversations.views import (
    CheckpointView,
    CheckpointWritesView,
    MemoryAddView,
    SessionDetailView,
    SessionListView,
    SessionSealView,
)
from apps.memories.views import (
    EpisodicMemoryDetailView,
    EpisodicMemoryHistoryView,
    EpisodicMemoryListView,
    MemoryConsolidateView,
    SemanticMemoryDetailView,
    SemanticMemoryHistoryView,
    SemanticMemoryListView,
)
from apps.pipeline.views import TaskDetailView
from apps.portability.views import ExportCreateView, ExportDetailView, ExportDownloadView
from apps.privacy.views import ClientErasureView, ErasureDetailView, MessageDeleteView, UserErasureView
from apps.profiles.views import (
    EntityDetailView,
    EntityListView,
    ProfileDetailView,
    ProfileFindingsView,
    ProfileLintView,
    ProfileListView,
    TopicCompileView,
)
from apps.search.views import MemorySearchView, SearchAllUsersView
from apps.skills.views import (
    ExperienceDetailView,
    ExperienceListView,
    ProceduralMemoryDeleteView,
    SessionDistillView,
    SkillDetailView,
    SkillFeedbackView,
    SkillListView,
    SkillRetrieveView,
    SkillUseView,
)
from apps.tenancy.views import CurrentClientView
from apps.webhooks.views import WebhookDeliveryListView, WebhookDetailView, WebhookListView, WebhookTestView

urlpatterns = [
    path("me", CurrentClientView.as_view(), name="current-client"),
    path("tasks/<str:task_id>/", TaskDetailView.as_view(), name="task-detail"),
    path("memory/add", MemoryAddView.as_view(), name="memory-add"),
    path("memory/search", MemorySearchView.as_view(), name="memory-search"),
    path("memory/search_all_users", SearchAllUsersView.as_view(), name="memory-search-all-users"),
    path("memory/message/<str:item_id>", MessageDeleteView.as_view(), name="memory-message-delete"),
    path("sessions/", SessionListView.as_view(), name="session-list"),
    path("checkpoints/", CheckpointView.as_view(), name="checkpoint-list"),
    path("checkpoints/writes", CheckpointWritesView.as_view(), name="checkpoint-writes"),
    path("memory/context", ContextView.as_view(), name="memory-context"),
    path("memory/consolidate", MemoryConsolidateView.as_view(), name="memory-consolidate"),
    path("sessions/<str:session_id>/", SessionDetailView.as_view(), name="session-detail"),
    path("sessions/<str:session_id>/seal", SessionSealView.as_view(), name="session-seal"),
    path("sessions/<str:session_id>/distill", SessionDistillView.as_view(), name="session-distill"),
    path("memory/procedural/<str:item_id>", ProceduralMemoryDeleteView.as_view(), name="memory-procedural-delete"),
    path("memory/episodic/", EpisodicMemoryListView.as_view(), name="memory-episodic-list"),
    path("memory/episodic/<str:item_id>", EpisodicMemoryDetailView.as_view(), name="memory-episodic-detail"),
    path(
        "memory/episodic/<str:item_id>/history",
        EpisodicMemoryHistoryView.as_view(),
        name="memory-episodic-history",
    ),
    path("memory/semantic/", SemanticMemoryListView.as_view(), name="memory-semantic-list"),
    path("memory/semantic/<str:item_id>", SemanticMemoryDetailView.as_view(), name="memory-semantic-detail"),
    path(
        "memory/semantic/<str:item_id>/history",
        SemanticMemoryHistoryView.as_view(),
        name="memory-semantic-history",
    ),
    path("skills/retrieve", SkillRetrieveView.as_view(), name="skill-retrieve"),
    path("skills/", SkillListView.as_view(), name="skill-list"),
    path("skills/<str:skill_id>/", SkillDetailView.as_view(), name="skill-detail"),
    path("skills/<str:skill_id>/uses", SkillUseView.as_view(), name="skill-uses"),
    path("skills/<str:skill_id>/feedback", SkillFeedbackView.as_view(), name="skill-feedback"),
    path("experiences/", ExperienceListView.as_view(), name="experience-list"),
    path("experiences/<str:experience_id>/", ExperienceDetailView.as_view(), name="experience-detail"),
    path("users/<path:user_id>/memories", UserErasureView.as_view(), name="user-erasure"),
    path("clients/<str:client_id>/memories", ClientErasureView.as_view(), name="client-erasure"),
    path("erasures/<str:erasure_id>/", ErasureDetailView.as_view(), name="erasure-detail"),
    path("exports", ExportCreateView.as_view(), name="export-create"),
    path("exports/<str:export_id>", ExportDetailView.as_view(), name="export-detail"),
    path("exports/<str:export_id>/download", ExportDownloadView.as_view(), name="export-download"),
    path("profiles/", ProfileListView.as_view(), name="profile-list"),
    path("profiles/<str:profile_id>/", ProfileDetailView.as_view(), name="profile-detail"),
    path("profiles/<str:profile_id>/findings", ProfileFindingsView.as_view(), name="profile-findings"),
    path("profiles/<str:profile_id>/lint", ProfileLintView.as_view(), name="profile-lint"),
    path("topics/compile", TopicCompileView.as_view(), name="topic-compile"),
    path("entities/", EntityListView.as_view(), name="entity-list"),
    path("entities/<str:entity_id>/", EntityDetailView.as_view(), name="entity-detail"),
    path("webhooks/", WebhookListView.as_view(), name="webhook-list"),
    path("webhooks/<str:webhook_id>/", WebhookDetailView.as_view(), name="webhook-detail"),
    path("webhooks/<str:webhook_id>/deliveries", WebhookDeliveryListView.as_view(), name="webhook-deliveries"),
    path("webhooks/<str:webhook_id>/test", WebhookTestView.as_view(), name="webhook-test"),
]

"""Basic admin for skill memory; the curation workflow (diffs, approvals) builds on it."""

from django.contrib import admin

from apps.core.admin import OrganizationScopedAdmin
from apps.skills.models import Skill, SkillExperience, SkillVersion


class SkillVersionInline(admin.TabularInline):
    model = SkillVersion
    fields = ["version", "operation", "actor", "reason", "created_at"]
    readonly_fields = fields
    ordering = ["-version"]
    extra = 0
    can_delete = False
    show_change_link = False

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(Skill)
class SkillAdmin(OrganizationScopedAdmin):
    list_display = ["name", "status", "entry_type", "scope", "version", "retrieval_count", "last_retrieved_at", "updated_at"]
    list_filter = ["status", "entry_type", "scope"]
    list_select_related = ["organization", "end_user"]
    search_fields = ["name", "description"]
    readonly_fields = [
        "organization", "scope", "end_user", "version", "action_signature", "retrieval_count", "last_retrieved_at",
        "embedding_model", "created_at", "updated_at",
    ]
    fields = [
        "name", "status", "entry_type", "description", "instructions", "triggers", "examples", *readonly_fields,
    ]
    inlines = [SkillVersionInline]

    def get_queryset(self, request):
        return super().get_queryset(request).defer("embedding", "search_vector")

    def has_add_permission(self, request):
        return False  # skills come from evolution; people curate them


@admin.register(SkillExperience)
class SkillExperienceAdmin(OrganizationScopedAdmin):
    list_display = ["title", "experience_type", "status", "scope", "importance", "credibility", "session", "created_at"]
    list_filter = ["experience_type", "status", "scope"]
    list_select_related = ["organization", "session"]
    search_fields = ["title", "content"]
    date_hierarchy = "created_at"
    readonly_fields = [
        "organization", "scope", "end_user", "session", "created_by", "experience_type", "title", "content",
        "importance", "credibility", "evidence", "action_signature", "source_message_ids", "created_at",
    ]
    fields = [*readonly_fields, "status"]

    def get_queryset(self, request):
        return super().get_queryset(request).defer("embedding", "search_vector")

    def has_add_permission(self, request):
        return False

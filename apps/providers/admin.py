from django.contrib import admin

from apps.providers.models import LLMUsage
from apps.tenancy.admin_base import OrganizationScopedAdmin


@admin.register(LLMUsage)
class LLMUsageAdmin(OrganizationScopedAdmin):
    list_display = ["created_at", "organization", "purpose", "model", "prompt_tokens", "completion_tokens", "task_id"]
    list_filter = ["purpose", "model"]
    list_select_related = ["organization"]
    date_hierarchy = "created_at"

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

from django.contrib import admin

from apps.providers.models import LLMUsage
from apps.tenancy.admin_base import ReadOnlyAdmin


@admin.register(LLMUsage)
class LLMUsageAdmin(ReadOnlyAdmin):
    list_display = ["created_at", "organization", "purpose", "model", "prompt_tokens", "completion_tokens", "task_id"]
    list_filter = ["purpose", "model"]
    list_select_related = ["organization"]
    date_hierarchy = "created_at"

from django.contrib import admin, messages
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html

from apps.conversations.models import Session
from apps.conversations.selectors import session_messages
from apps.core.admin import OrganizationScopedAdmin
from apps.core.errors import ConflictError
from apps.skills.services.distill import distill_request


@admin.register(Session)
class SessionAdmin(OrganizationScopedAdmin):
    list_display = [
        "session_id", "end_user", "session_tag", "status", "outcome", "message_count", "scope", "last_message_at",
        "distilled_at", "transcript_link",
    ]
    list_filter = ["session_tag", "status", "outcome", "scope"]
    list_select_related = ["end_user", "organization"]
    search_fields = ["session_id", "end_user__user_id"]
    date_hierarchy = "last_message_at"
    readonly_fields = [
        "organization", "end_user", "client", "scope", "session_id", "session_tag", "status", "message_count",
        "last_message_at", "sealed_at", "distilled_at", "extracted_at", "filter_tags", "transcript_link",
    ]
    fields = readonly_fields[:-1] + ["outcome", "transcript_link"]
    actions = ["distill_now"]

    def has_add_permission(self, request):
        return False

    @admin.display(description="transcript")
    def transcript_link(self, session):
        url = reverse("admin:conversations_session_transcript", args=[session.pk])
        return format_html('<a href="{}">{} turns</a>', url, session.message_count)

    @admin.action(description="Distil now (sealed task sessions)", permissions=["change"])
    def distill_now(self, request, queryset):
        queued = 0
        for session in queryset:
            try:
                distill_request(session=session)
                queued += 1
            except ConflictError as exc:
                self.message_user(request, str(exc), messages.WARNING)
        if queued:
            self.message_user(request, f"Queued distillation of {queued} session(s).", messages.SUCCESS)

    def get_urls(self):
        return [
            path(
                "<uuid:pk>/transcript/",
                self.admin_site.admin_view(self.transcript_view),
                name="conversations_session_transcript",
            ),
            *super().get_urls(),
        ]

    def transcript_view(self, request, pk):
        session = get_object_or_404(self.get_queryset(request).select_related("end_user", "client"), pk=pk)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "session": session,
            "messages_list": session_messages(session=session),
            "title": f"Transcript of {session.session_id}",
        }
        return TemplateResponse(request, "admin/conversations/session/transcript.html", context)

"""Sessions in the admin (read-only, with transcripts) and the home page's card of task sessions
awaiting distillation."""

from django.contrib import admin
from django.shortcuts import get_object_or_404
from django.urls import path, reverse
from django.utils.html import format_html

from apps.conversations.models import Session, SessionTag
from apps.conversations.selectors import session_messages
from apps.core.extensions import (
    Tile,
    admin_page,
    admin_url,
    holding,
    of_organization,
    register_admin_holdings,
    register_dashboard_card,
)
from apps.tenancy.admin_base import OrganizationScopedAdmin


@admin.register(Session)
class SessionAdmin(OrganizationScopedAdmin):
    list_display = [
        "session_id",
        "end_user",
        "session_tag",
        "status",
        "outcome",
        "message_count",
        "scope",
        "last_message_at",
        "distilled_at",
        "transcript_link",
    ]
    list_filter = ["session_tag", "status", "outcome", "scope"]
    list_select_related = ["end_user", "organization"]
    search_fields = ["session_id", "end_user__user_id"]
    date_hierarchy = "last_message_at"
    readonly_fields = [
        "organization",
        "end_user",
        "client",
        "scope",
        "session_id",
        "session_tag",
        "status",
        "message_count",
        "last_message_at",
        "sealed_at",
        "distilled_at",
        "extracted_at",
        "filter_tags",
        "transcript_link",
    ]
    fields = readonly_fields[:-1] + ["outcome", "transcript_link"]

    def has_add_permission(self, request):
        return False

    @admin.display(description="transcript")
    def transcript_link(self, session):
        url = reverse("admin:conversations_session_transcript", args=[session.pk])
        return format_html('<a href="{}">{} turns</a>', url, session.message_count)

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
        return admin_page(
            self,
            request,
            "admin/conversations/session/transcript.html",
            title=f"Transcript of {session.session_id}",
            session=session,
            messages_list=session_messages(session=session),
        )


def sessions_card(*, user, organization):
    if not user.has_perm("conversations.view_session"):
        return None
    awaiting = (
        of_organization(Session.objects, organization)
        .filter(session_tag=SessionTag.TASK, status=Session.Status.SEALED, distilled_at__isnull=True)
        .count()
    )
    return (
        "Sessions",
        [
            Tile(
                "Awaiting distillation",
                awaiting,
                admin_url(
                    "admin:conversations_session_changelist",
                    session_tag__exact="task",
                    status__exact="sealed",
                    distilled_at__isnull="True",
                ),
            ),
        ],
    )


register_dashboard_card(sessions_card, order=30)


def end_user_sessions(end_user) -> list:
    sessions = Session.objects.filter(end_user=end_user).order_by("-last_message_at")
    return [
        holding(
            "Sessions",
            sessions,
            label=lambda session: f"{session.session_id} ({session.session_tag}, {session.scope})",
            filters={"end_user": end_user.pk},
        )
    ]


register_admin_holdings("tenancy.EndUser", end_user_sessions)

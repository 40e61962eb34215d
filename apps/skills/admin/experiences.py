"""The experiences' admin: lessons with their evidence, held or flagged ones approved or rejected by a person."""

from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from apps.skills.admin.actions import ServiceActions, service_action
from apps.skills.history import experience_evidence
from apps.skills.models import SignalType, SkillExperience
from apps.skills.services.review import experience_approve, experience_reject
from apps.tenancy.admin_base import OrganizationScopedAdmin, ScopeFilter


class SignalFilter(admin.SimpleListFilter):
    title = "signal"
    parameter_name = "signal"

    def lookups(self, request, model_admin):
        return SignalType.choices

    def queryset(self, request, queryset):
        if self.value():
            return queryset.filter(evidence__signal_type=self.value())
        return queryset


@admin.register(SkillExperience)
class SkillExperienceAdmin(ServiceActions, OrganizationScopedAdmin):
    item_argument, item_label = "experience", "lesson"
    list_display = [
        "title",
        "experience_type",
        "signal",
        "credibility",
        "importance",
        "status",
        "flags",
        "short_quote",
        "session_link",
        "created_at",
    ]
    actions = ["approve_selected", "reject_selected"]
    list_filter = ["experience_type", SignalFilter, "status", ScopeFilter]
    list_select_related = ["session"]
    search_fields = ["title", "content"]
    date_hierarchy = "created_at"
    show_full_result_count = False
    readonly_fields = [
        "title",
        "experience_type",
        "signal",
        "credibility",
        "importance",
        "content",
        "evidence_quote",
        "session_link",
        "evidence_turns",
        "caused_versions",
        "organization",
        "scope",
        "end_user",
        "created_by",
        "action_signature",
        "evidence",
        "flags",
        "approved_by",
        "created_at",
    ]
    fields = [*readonly_fields[:5], "status", *readonly_fields[5:]]

    def get_queryset(self, request):
        return super().get_queryset(request).defer("embedding", "search_vector")

    def has_add_permission(self, request):
        return False

    approve_selected = service_action(
        experience_approve, "Approved", "Approve selected held or flagged lessons for every user"
    )
    reject_selected = service_action(experience_reject, "Rejected", "Reject selected held or flagged lessons")

    @admin.display(description="signal", ordering="evidence__signal_type")
    def signal(self, experience):
        return experience.evidence.get("signal_type", "") if isinstance(experience.evidence, dict) else ""

    @admin.display(description="evidence")
    def short_quote(self, experience):
        quote = experience.evidence.get("quote", "") if isinstance(experience.evidence, dict) else ""
        return quote if len(quote) <= 80 else quote[:79] + "…"

    @admin.display(description="evidence quote")
    def evidence_quote(self, experience):
        return experience.evidence.get("quote", "") if isinstance(experience.evidence, dict) else ""

    @admin.display(description="session")
    def session_link(self, experience):
        if experience.session_id is None:
            return "— (pruned)"
        url = reverse("admin:conversations_session_transcript", args=[experience.session_id])
        return format_html('<a href="{}">{}</a>', url, experience.session.session_id)

    @admin.display(description="evidence turns")
    def evidence_turns(self, experience):
        evidence = experience_evidence(experience)
        if not evidence.turns:
            return "—"
        return format_html_join(", ", '<a href="{}">turn {}</a>', ((url, seq) for seq, url in evidence.turns))

    @admin.display(description="caused skill versions")
    def caused_versions(self, experience):
        versions = experience.skill_versions.select_related("skill").order_by("skill__name", "version")
        if not versions:
            return "—"
        return format_html_join(
            ", ",
            '<a href="{}#v{}">{} v{}</a>',
            (
                (reverse("admin:skills_skill_versions", args=[v.skill_id]), v.version, v.skill.name, v.version)
                for v in versions
            ),
        )

"""Curation of compiled memory: pages with revision diffs and sources linked to turns, entities, lint findings
as a review queue, and an end-user action that compiles topic pages. Staff see their organisation only."""

from django.contrib import admin, messages
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from apps.conversations.models import Message
from apps.core.extensions import holding, register_admin_action, register_admin_holdings
from apps.profiles.models import Entity, ItemType, LintFinding, Profile
from apps.profiles.services.entities import topics_compile_request
from apps.profiles.services.lint import finding_resolve
from apps.skills.history import side_by_side
from apps.tenancy.admin_base import ReadOnlyAdmin, ScopeFilter

ROW_STYLE = {"replace": "background:#fff5b1", "delete": "background:#ffdce0", "insert": "background:#dcffe4"}


@admin.register(Profile)
class ProfileAdmin(ReadOnlyAdmin):
    list_display = ["name", "kind", "end_user", "scope", "status", "revision", "compiled_at"]
    list_filter = ["kind", "status", ScopeFilter]
    list_select_related = ["end_user"]
    search_fields = ["name", "end_user__user_id"]
    fields = [
        "name",
        "kind",
        "end_user",
        "scope",
        "status",
        "revision",
        "compiled_at",
        "page",
        "source_links",
        "history",
    ]

    @admin.display(description="current page")
    def page(self, profile):
        return format_html("<pre style='white-space:pre-wrap'>{}</pre>", profile.markdown or "(empty)")

    @admin.display(description="sources")
    def source_links(self, profile):
        sources = list(profile.sources.all())
        turns = {
            message.pk: message
            for message in Message.objects.filter(
                pk__in=[source.item_id for source in sources if source.item_type == ItemType.MESSAGE]
            ).only("pk", "seq", "session_id")
        }

        def link(source):
            message = turns.get(source.item_id)
            if message is None:
                return format_html("{} {}: “{}”", source.item_type, source.item_id, source.quote)
            url = reverse("admin:conversations_session_transcript", args=[message.session_id]) + f"#turn-{message.seq}"
            return format_html('<a href="{}">turn {}</a>: “{}”', url, message.seq, source.quote)

        return format_html_join("", "<div>{}</div>", ((link(source),) for source in sources)) or "—"

    @admin.display(description="revisions (each against the one before)")
    def history(self, profile):
        blocks, previous = [], ""
        for revision in profile.revisions.order_by("number"):
            rows = format_html_join(
                "",
                "<tr style='{}'><td>{}</td><td>{}</td></tr>",
                (
                    (ROW_STYLE.get(row.kind, ""), row.left, row.right)
                    for row in side_by_side(previous, revision.markdown)
                ),
            )
            blocks.append(
                format_html(
                    "<h4>Revision {} · {} · {} + {} tokens · {}</h4><table class='revision-diff'>{}</table>",
                    revision.number,
                    revision.model,
                    revision.prompt_tokens,
                    revision.completion_tokens,
                    revision.reason or "—",
                    rows,
                )
            )
            previous = revision.markdown
        return format_html_join("", "{}", ((block,) for block in reversed(blocks))) or "—"


@admin.register(Entity)
class EntityAdmin(ReadOnlyAdmin):
    list_display = ["name", "kind", "end_user", "scope", "mention_count", "is_user"]
    list_filter = ["kind", ScopeFilter]
    list_select_related = ["end_user"]
    search_fields = ["name", "end_user__user_id"]
    fields = ["name", "kind", "aliases", "end_user", "scope", "mention_count", "is_user"]


@admin.register(LintFinding)
class LintFindingAdmin(ReadOnlyAdmin):
    """The review queue: open findings first; resolving one records who did it and when."""

    organization_path = "profile__organization"
    list_display = ["kind", "severity", "profile", "peer", "status", "short_detail", "created_at", "resolved_by"]
    list_filter = ["status", "kind", "severity"]
    list_select_related = ["profile", "peer"]
    ordering = ["status", "-created_at"]
    actions = ["resolve"]
    readonly_fields = [
        "profile",
        "peer",
        "kind",
        "severity",
        "detail",
        "status",
        "resolved_by",
        "resolved_at",
        "created_at",
    ]

    def has_change_permission(self, request, obj=None):
        # The resolve action needs the change permission; the form itself stays read-only.
        return request.user.has_perm("profiles.change_lintfinding")

    @admin.display(description="detail")
    def short_detail(self, finding):
        return finding.detail[:120]

    @admin.action(description="Resolve the selected findings")
    def resolve(self, request, queryset):
        findings = list(queryset.filter(status=LintFinding.Status.OPEN))
        for finding in findings:
            finding_resolve(finding=finding, actor=f"admin:{request.user.get_username()}")
        self.message_user(request, f"Resolved {len(findings)} finding(s).", messages.SUCCESS)


@admin.action(description="Compile the topic pages of the selected users (in the background)")
def compile_topics_now(modeladmin, request, queryset):
    tasks = [
        topics_compile_request(organization=user.organization, end_user=user)
        for user in queryset.select_related("organization")
    ]
    modeladmin.message_user(
        request,
        f"Queued a topic compile for {len(tasks)} user(s); each task's result shows the pages made.",
        messages.SUCCESS,
    )


# The tenancy admin stays unaware of compiled memory: its end users get this action here.
register_admin_action("tenancy.EndUser", compile_topics_now)


def end_user_profiles(end_user) -> list:
    """The pages compiled from the person's memory (of them and of the people and topics they spoke of)."""
    return [
        holding(
            "Profile pages",
            Profile.objects.filter(end_user=end_user).order_by("kind", "name"),
            label=lambda profile: f"{profile.name} ({profile.kind})",
            filters={"end_user": end_user.pk},
        ),
        holding(
            "Entities",
            Entity.objects.filter(end_user=end_user).order_by("-mention_count", "name"),
            label=lambda entity: entity.name,
        ),
    ]


register_admin_holdings("tenancy.EndUser", end_user_profiles)

"""The skills' admin: a review queue, person edits recorded as versions, the version history with
its diffs and lineage down to transcript turns. Every write goes through a service."""

from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.contrib.admin.views.main import ORDER_VAR, ChangeList
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import FloatField, IntegerField
from django.db.models.expressions import RawSQL
from django.shortcuts import get_object_or_404
from django.urls import path, reverse
from django.utils.html import format_html

from apps.core.extensions import admin_page
from apps.core.validation import JSONFormField, check_fields
from apps.skills.admin.actions import ServiceActions, service_action
from apps.skills.admin.effectiveness import effectiveness_panel
from apps.skills.effectiveness import success_rate_sql, users_sql
from apps.skills.history import skill_history
from apps.skills.models import Skill, SkillVersion
from apps.skills.selectors import with_retrievals, with_withheld
from apps.skills.services.review import (
    person_actor,
    skill_approve,
    skill_archive_by_person,
    skill_edit_by_person,
    skill_reject,
    skill_share_by_person,
)
from apps.skills.services.skills import EDITABLE_FIELDS, skill_delete
from apps.tenancy.admin_base import HistoryInline, OrganizationScopedAdmin, ScopeFilter

# Large columns a list never shows: loading them for 100 rows would dominate the page.
HEAVY_SKILL_COLUMNS = ("embedding", "search_vector", "instructions", "examples")
REVIEW_QUEUE_URL_NAME = "skills_skill_review_queue"


class SkillVersionInline(HistoryInline):
    model = SkillVersion
    fields = ["version", "operation", "actor", "reason", "created_at", "diff_link"]
    readonly_fields = fields
    ordering = ["-version"]
    max_num = 0
    show_change_link = False

    def has_delete_permission(self, request, obj=None):
        return False

    @admin.display(description="diff and lineage")
    def diff_link(self, version):
        url = reverse("admin:skills_skill_versions", args=[version.skill_id])
        return format_html('<a href="{}#v{}">show</a>', url, version.version)


def _is_review_queue(request) -> bool:
    return getattr(request.resolver_match, "url_name", None) == REVIEW_QUEUE_URL_NAME


class SkillChangeList(ChangeList):
    def __init__(self, request, *args, **kwargs):
        self.review_queue = _is_review_queue(request)
        super().__init__(request, *args, **kwargs)

    def get_queryset(self, request, exclude_parameters=None):
        return super().get_queryset(request, exclude_parameters).defer(*HEAVY_SKILL_COLUMNS)

    def get_ordering_field_columns(self):
        # Django marks the model's default ordering in the headers; the queue's own order has no column.
        if self.review_queue and ORDER_VAR not in self.params:
            return {}
        return super().get_ordering_field_columns()


class SkillChangeForm(forms.ModelForm):
    change_reason = forms.CharField(
        required=False,
        max_length=500,
        help_text="Why you changed it; stored with the new version.",
        widget=forms.TextInput(attrs={"size": 80}),
    )

    class Meta:
        model = Skill
        fields = ["name", "entry_type", "description", "instructions", "triggers", "examples"]
        field_classes = {"triggers": JSONFormField, "examples": JSONFormField}

    def clean(self):
        cleaned = super().clean()
        try:
            check_fields({name: cleaned[name] for name in self.Meta.fields if name in cleaned})
        except ValidationError as exc:
            for name, problems in exc.message_dict.items():
                self.add_error(name, problems)
        return cleaned


class RejectForm(forms.Form):
    reason = forms.CharField(
        max_length=2000,
        widget=forms.Textarea(attrs={"rows": 3, "cols": 80}),
        help_text="Stored with the rejection; the skill is archived, not deleted.",
    )


class WithheldFilter(admin.SimpleListFilter):
    """The skills a person could share to answer users who asked for what they teach."""

    title = "would answer other users"
    parameter_name = "withheld"

    def lookups(self, request, model_admin):
        return [("yes", "Yes: ranked first for users it is not shared with")]

    def queryset(self, request, queryset):
        if self.value() == "yes":
            return queryset.filter(shared=False, withheld_from_users__gt=0).order_by("-withheld_from_users")
        return queryset


@admin.register(Skill)
class SkillAdmin(ServiceActions, OrganizationScopedAdmin):
    item_argument = item_label = "skill"
    form = SkillChangeForm
    list_display = [
        "name",
        "status",
        "shared",
        "entry_type",
        "scope",
        "version",
        "retrievals",
        "withheld_from",
        "outcomes",
        "updated_at",
        "versions_link",
    ]
    list_filter = ["status", "shared", WithheldFilter, "entry_type", ScopeFilter]
    list_select_related = ["organization", "end_user"]
    search_fields = ["name", "description", "instructions"]
    list_per_page = 50
    # One COUNT over the filtered rows is enough; the unfiltered total would be a second full count.
    show_full_result_count = False
    actions = ["approve_selected", "reject_selected", "share_selected", "archive_selected", "delete_selected"]
    readonly_fields = [
        "status",
        "shared",
        "organization",
        "scope",
        "end_user",
        "version",
        "action_signature",
        "embedding_model",
        "created_at",
        "updated_at",
        "effectiveness",
    ]
    fieldsets = [
        (None, {"fields": [*SkillChangeForm.Meta.fields, "change_reason"]}),
        ("State", {"fields": readonly_fields[:-1]}),
        ("Effectiveness", {"fields": ["effectiveness"]}),
    ]
    inlines = [SkillVersionInline]

    def has_add_permission(self, request):
        return False  # skills come from evolution; people curate them

    def get_changelist(self, request, **kwargs):
        return SkillChangeList

    def get_list_display(self, request):
        columns = super().get_list_display(request)
        return [columns[0], "organization", *columns[1:]] if request.user.is_superuser else columns

    def get_ordering(self, request):
        if _is_review_queue(request):
            # Status descending puts pending_review first; an index serves it (skill_review_order_idx).
            return ["-status", "-updated_at"]
        return super().get_ordering(request)

    def get_urls(self):
        return [
            path("review/", self.admin_site.admin_view(self.review_queue_view), name=REVIEW_QUEUE_URL_NAME),
            path("<uuid:pk>/versions/", self.admin_site.admin_view(self.versions_view), name="skills_skill_versions"),
            *super().get_urls(),
        ]

    def review_queue_view(self, request):
        return self.changelist_view(request, extra_context={"title": "Skill review queue", "review_queue": True})

    def changelist_view(self, request, extra_context=None):
        extra_context = {
            "review_queue_url": reverse(f"admin:{REVIEW_QUEUE_URL_NAME}"),
            "all_skills_url": reverse("admin:skills_skill_changelist"),
            **(extra_context or {}),
        }
        return super().changelist_view(request, extra_context=extra_context)

    def versions_view(self, request, pk):
        if not self.has_view_or_change_permission(request):
            raise PermissionDenied
        skill = get_object_or_404(self.get_queryset(request).select_related("end_user"), pk=pk)
        return admin_page(
            self,
            request,
            "admin/skills/skill/versions.html",
            title=f"Versions and lineage of {skill.name}",
            skill=skill,
            entries=skill_history(skill=skill),
        )

    def get_queryset(self, request):
        return with_withheld(with_retrievals(super().get_queryset(request))).annotate(
            outcome_users=RawSQL(*users_sql(), output_field=IntegerField()),
            success_rate=RawSQL(*success_rate_sql(), output_field=FloatField()),
        )

    @admin.display(description="retrievals", ordering="retrieval_count")
    def retrievals(self, skill):
        return skill.retrieval_count

    @admin.display(description="withheld from (users)", ordering="withheld_from_users")
    def withheld_from(self, skill):
        """Users it ranked first for while not shared with them: one approval (share) serves them."""
        return skill.withheld_from_users if not skill.shared else "–"

    @admin.display(description="success rate (users)", ordering="success_rate")
    def outcomes(self, skill):
        if not skill.outcome_users:
            return "–"
        return f"{skill.success_rate:.0%} ({skill.outcome_users})"

    @admin.display(description="outcomes of the users whose task sessions retrieved it")
    def effectiveness(self, skill):
        return effectiveness_panel(skill)

    @admin.display(description="history")
    def versions_link(self, skill):
        return format_html('<a href="{}">versions</a>', reverse("admin:skills_skill_versions", args=[skill.pk]))

    def save_model(self, request, obj, form, change):
        """The form's instance is never saved: the service records the edit as a version."""
        original = self.get_queryset(request).get(pk=obj.pk)
        changes = {name: form.cleaned_data[name] for name in form.changed_data if name in EDITABLE_FIELDS}
        version = original.version
        updated = skill_edit_by_person(
            skill=original, changes=changes, actor=person_actor(request.user), reason=form.cleaned_data["change_reason"]
        )
        obj.refresh_from_db()
        if updated.version == version:
            self.message_user(request, "Nothing changed; no version was recorded.", messages.INFO)

    def delete_model(self, request, obj):
        skill_delete(skill=obj)

    def delete_queryset(self, request, queryset):
        for skill in queryset:
            skill_delete(skill=skill)

    approve_selected = service_action(skill_approve, "Approved", "Approve selected skills")

    @admin.action(description="Reject selected skills (archive with a reason)…", permissions=["change"])
    def reject_selected(self, request, queryset):
        form = RejectForm(request.POST if "apply" in request.POST else None)
        if form.is_valid():
            self._each(request, queryset, skill_reject, "Rejected", reason=form.cleaned_data["reason"])
            return None
        return admin_page(
            self,
            request,
            "admin/skills/skill/reject_confirmation.html",
            title="Reject skills",
            skills=queryset,
            form=form,
            action="reject_selected",
            action_checkbox_name=helpers.ACTION_CHECKBOX_NAME,
            review_queue=_is_review_queue(request),
        )

    share_selected = service_action(
        skill_share_by_person, "Shared", "Share selected skills with every user of their scope"
    )
    archive_selected = service_action(skill_archive_by_person, "Archived", "Archive selected skills")

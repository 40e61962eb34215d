"""Erasure requests (read-only audit list) and the "erase this user / client" confirmation pages."""

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.shortcuts import get_object_or_404, redirect
from django.urls import path, reverse

from apps.core.extensions import admin_page, register_admin_action, register_object_tool
from apps.privacy.models import ErasureRequest
from apps.privacy.services.erasure import erasure_request
from apps.privacy.services.subjects import CLIENT, USER, subject_resolve
from apps.privacy.services.verify import table_counts
from apps.tenancy.admin_base import ReadOnlyAdmin, staff_organization
from apps.tenancy.models import Client, EndUser

ERASE_PERMISSION = "privacy.add_erasurerequest"
# Each kind's rows, the field that is the subject's id, and the one that names it on the pages.
ERASABLE = {USER: (EndUser, "user_id", "user_id"), CLIENT: (Client, "pk", "name")}


@admin.register(ErasureRequest)
class ErasureRequestAdmin(ReadOnlyAdmin):
    list_display = [
        "created_at",
        "subject_kind",
        "subject_id",
        "status",
        "requested_by",
        "requested_by_staff",
        "authorized_by",
        "removed",
        "finished_at",
    ]
    list_filter = ["status", "subject_kind", "authorized_by"]
    list_select_related = ["organization", "requested_by"]
    search_fields = ["subject_id"]
    date_hierarchy = "created_at"
    readonly_fields = [
        "organization",
        "subject_kind",
        "subject_id",
        "requested_by",
        "requested_by_staff",
        "authorized_by",
        "status",
        "task_id",
        "counts",
        "residual",
        "error",
        "created_at",
        "started_at",
        "finished_at",
    ]
    fields = readonly_fields

    def has_delete_permission(self, request, obj=None):
        return False  # the audit trail stays

    @admin.display(description="rows removed")
    def removed(self, erasure):
        return sum(count for table, count in (erasure.counts or {}).items() if "(" not in table)

    def get_urls(self):
        erase = [
            path(
                f"erase/{kind}/<uuid:pk>/",
                self.admin_site.admin_view(self.erase_view),
                {"kind": kind},
                name=f"privacy_erase_{kind}",
            )
            for kind in ERASABLE
        ]
        return [*erase, *super().get_urls()]

    def erase_view(self, request, pk, kind):
        model, id_field, name_field = ERASABLE[kind]
        queryset = model.objects.select_related("organization")
        if not request.user.is_superuser:
            queryset = queryset.filter(organization=staff_organization(request))
        row = get_object_or_404(queryset, pk=pk)
        if not request.user.has_perm(ERASE_PERMISSION):
            raise PermissionDenied
        subject = subject_resolve(organization=row.organization, kind=kind, subject_id=str(getattr(row, id_field)))
        label = f"{kind} {getattr(row, name_field)}"
        if request.method == "POST":
            erasure = erasure_request(subject=subject, requested_by_staff=request.user.get_username())
            self.message_user(request, f"Erasure of {label} queued.", messages.SUCCESS)
            return redirect(reverse("admin:privacy_erasurerequest_change", args=[erasure.pk]))
        counts = table_counts(subject)
        return admin_page(
            self,
            request,
            "admin/privacy/erasurerequest/confirm.html",
            title=f"Erase {label}?",
            subject_label=label,
            organization=subject.organization,
            counts=sorted(counts.items()),
            total=sum(counts.values()),
        )


def _erase_action(kind: str):
    def action(modeladmin, request, queryset):
        if queryset.count() != 1:
            modeladmin.message_user(
                request, "Select exactly one to erase; each erasure is confirmed on its own.", messages.WARNING
            )
            return None
        return redirect(reverse(f"admin:privacy_erase_{kind}", args=[queryset.get().pk]))

    action.__name__ = f"erase_{kind}"
    return admin.action(action, description=f"Erase this {kind} (shows what will be removed first)")


def erase_person_tool(request, end_user):
    """On an end user's page, in place of the Delete the tenancy admin does not offer."""
    if not request.user.has_perm(ERASE_PERMISSION):
        return None
    return "Erase this person…", reverse(f"admin:privacy_erase_{USER}", args=[end_user.pk])


# The tenancy admin stays unaware of privacy: its end users and clients get these actions here.
for kind, (model, *_) in ERASABLE.items():
    register_admin_action(model._meta.label, _erase_action(kind))
register_object_tool(EndUser._meta.label, erase_person_tool)

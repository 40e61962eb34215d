"""Erasure requests (read-only audit list) and the "erase this user / client" confirmation pages."""

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.shortcuts import get_object_or_404, redirect
from django.urls import path, reverse

from apps.core.extensions import admin_page, register_admin_action
from apps.privacy.models import ErasureRequest
from apps.privacy.services.erasure import erasure_request
from apps.privacy.services.subjects import CLIENT, USER, Subject
from apps.privacy.services.verify import table_counts
from apps.tenancy.admin_base import ReadOnlyAdmin, staff_organization
from apps.tenancy.models import Client, EndUser

ERASE_PERMISSION = "privacy.add_erasurerequest"


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
        return [
            path("erase/user/<uuid:pk>/", self.admin_site.admin_view(self.erase_user_view), name="privacy_erase_user"),
            path(
                "erase/client/<uuid:pk>/",
                self.admin_site.admin_view(self.erase_client_view),
                name="privacy_erase_client",
            ),
            *super().get_urls(),
        ]

    def _scoped(self, request, model):
        queryset = model.objects.select_related("organization")
        if request.user.is_superuser:
            return queryset
        return queryset.filter(organization=staff_organization(request))

    def erase_user_view(self, request, pk):
        end_user = get_object_or_404(self._scoped(request, EndUser), pk=pk)
        subject = Subject(organization=end_user.organization, kind=USER, subject_id=end_user.user_id, end_user=end_user)
        return self._confirm(request, subject, label=f"user {end_user.user_id}")

    def erase_client_view(self, request, pk):
        client = get_object_or_404(self._scoped(request, Client), pk=pk)
        subject = Subject(organization=client.organization, kind=CLIENT, subject_id=str(client.pk), client=client)
        return self._confirm(request, subject, label=f"client {client.name}")

    def _confirm(self, request, subject: Subject, *, label: str):
        if not request.user.has_perm(ERASE_PERMISSION):
            raise PermissionDenied
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


@admin.action(description="Erase this user (shows what will be removed first)")
def erase_user(modeladmin, request, queryset):
    return _redirect_to_confirmation(modeladmin, request, queryset, "admin:privacy_erase_user")


@admin.action(description="Erase this client (shows what will be removed first)")
def erase_client(modeladmin, request, queryset):
    return _redirect_to_confirmation(modeladmin, request, queryset, "admin:privacy_erase_client")


def _redirect_to_confirmation(modeladmin, request, queryset, url_name):
    if queryset.count() != 1:
        modeladmin.message_user(
            request, "Select exactly one to erase; each erasure is confirmed on its own.", messages.WARNING
        )
        return None
    return redirect(reverse(url_name, args=[queryset.get().pk]))


# The tenancy admin stays unaware of privacy: its end users and clients get these actions here.
register_admin_action("tenancy.EndUser", erase_user)
register_admin_action("tenancy.Client", erase_client)

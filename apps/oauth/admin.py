"""OAuth bindings in the admin (organisation-scoped like the clients), and a Client action that
revokes every OAuth token of the selected clients."""

from django.contrib import admin, messages

from apps.core.extensions import register_admin_action
from apps.oauth.models import ApplicationBinding
from apps.oauth.services import client_oauth_revoke
from apps.tenancy.admin_base import OrganizationScopedAdmin


@admin.register(ApplicationBinding)
class ApplicationBindingAdmin(OrganizationScopedAdmin):
    organization_path = "client__organization"
    list_display = ["application", "client", "bound_by", "created_at"]
    list_select_related = ["application", "client__organization", "bound_by"]
    raw_id_fields = ["application", "bound_by"]
    search_fields = ["application__name", "application__client_id", "client__name"]


@admin.action(description="Revoke the OAuth tokens of the selected clients (their hosts must be approved again)")
def revoke_oauth_tokens(modeladmin, request, queryset):
    unbound = sum(client_oauth_revoke(client=client) for client in queryset)
    modeladmin.message_user(request, f"Revoked the OAuth tokens of {unbound} application(s).", messages.SUCCESS)


# The tenancy admin stays unaware of OAuth: its clients get this action here.
register_admin_action("tenancy.Client", revoke_oauth_tokens)

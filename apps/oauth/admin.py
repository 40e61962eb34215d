"""OAuth bindings in the admin (organisation-scoped like the clients), django-oauth-toolkit's own admins for
superusers only, and a Client action that revokes every OAuth token of the selected clients."""

from django.contrib import admin, messages
from oauth2_provider.models import AccessToken, Application, Grant, IDToken, RefreshToken

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


class SuperusersOnly:
    """DOT's applications, tokens and grants belong to no organisation until bound (an open registration
    belongs to nobody): staff see and change their bindings above, a superuser the rest."""

    def has_module_permission(self, request):
        return request.user.is_active and request.user.is_superuser

    def has_view_permission(self, request, obj=None):
        return self.has_module_permission(request)

    has_add_permission = has_change_permission = has_delete_permission = has_view_permission


for _model in (Application, AccessToken, RefreshToken, Grant, IDToken):
    _dot_admin = type(admin.site.get_model_admin(_model))
    admin.site.unregister(_model)
    admin.site.register(_model, type(_dot_admin.__name__, (SuperusersOnly, _dot_admin), {}))


@admin.action(description="Revoke the OAuth tokens of the selected clients (their hosts must be approved again)")
def revoke_oauth_tokens(modeladmin, request, queryset):
    unbound = sum(client_oauth_revoke(client=client) for client in queryset)
    modeladmin.message_user(request, f"Revoked the OAuth tokens of {unbound} application(s).", messages.SUCCESS)


# The tenancy admin stays unaware of OAuth: its clients get this action here.
register_admin_action("tenancy.Client", revoke_oauth_tokens)

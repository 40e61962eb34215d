from django.contrib import admin
from django.utils.cache import add_never_cache_headers

from apps.core.extensions import admin_page, holdings_of, object_tools_of
from apps.tenancy.admin_base import OrganizationScopedAdmin
from apps.tenancy.models import Client, ClientAPIKey, EndUser, Organization, StaffMembership
from apps.tenancy.services import api_key_create, client_create, client_revoke_keys


def _superusers_only(model_admin, request, obj=None):
    return request.user.is_superuser


@admin.register(Organization)
class OrganizationAdmin(OrganizationScopedAdmin):
    organization_path = "self"
    list_display = ["name", "created_at"]
    search_fields = ["name"]
    has_add_permission = has_delete_permission = _superusers_only


class ClientAPIKeyInline(admin.TabularInline):
    model = ClientAPIKey
    fields = ["prefix", "created_at", "last_used_at", "revoked_at"]
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None):
        return False


# What a client may do, listed and edited alike.
CLIENT_SETTINGS = [
    "status",
    "write_scope",
    "read_scopes",
    "can_erase",
    "can_export",
    "can_manage_webhooks",
    "requests_per_minute",
]


@admin.register(Client)
class ClientAdmin(OrganizationScopedAdmin):
    list_display = ["name", "organization", *CLIENT_SETTINGS, "created_at"]
    list_filter = ["status", "can_erase", "can_export", "can_manage_webhooks"]
    list_select_related = ["organization"]
    search_fields = ["name", "write_scope"]
    fields = ["organization", "name", *CLIENT_SETTINGS]
    inlines = [ClientAPIKeyInline]
    actions = ["revoke_keys", "issue_new_key"]

    def get_readonly_fields(self, request, obj=None):
        return ["organization"] if obj else []

    def save_model(self, request, obj, form, change):
        if change:
            super().save_model(request, obj, form, change)
            return
        chosen = {name: getattr(obj, name) for name in CLIENT_SETTINGS if name not in ("status", "read_scopes")}
        client, raw_key = client_create(
            organization=obj.organization, name=obj.name, read_scopes=obj.read_scopes or None, **chosen
        )
        obj.pk = client.pk
        obj._state.adding = False
        request.issued_api_keys = [(client, raw_key)]

    def response_add(self, request, obj, post_url_continue=None):
        """The new key is the answer to the POST, never a message: messages travel in a cookie or the session table."""
        return self._issued_keys_page(request, request.issued_api_keys)

    @admin.action(description="Revoke all API keys of the selected clients")
    def revoke_keys(self, request, queryset):
        revoked = sum(client_revoke_keys(client=client) for client in queryset)
        self.message_user(request, f"Revoked {revoked} API key(s).")

    @admin.action(description="Issue a new API key (shown once)")
    def issue_new_key(self, request, queryset):
        return self._issued_keys_page(
            request, [(client, api_key_create(client=client)[1]) for client in queryset.select_related("organization")]
        )

    def _issued_keys_page(self, request, issued):
        response = admin_page(
            self, request, "admin/tenancy/client/api_keys_issued.html", title="API keys issued", issued=issued
        )
        add_never_cache_headers(response)  # no browser or proxy keeps a copy of the page
        return response


@admin.register(EndUser)
class EndUserAdmin(OrganizationScopedAdmin):
    """A person's page lists what the other apps hold about them (they register it: core.extensions). Nobody
    deletes one here: a row delete would cascade turns and sessions and leave skills quoting the person, with
    no erasure recorded; the erasure (apps.privacy registers "Erase this person") removes and verifies it all."""

    list_display = ["user_id", "organization", "created_at"]
    list_select_related = ["organization"]
    search_fields = ["user_id"]
    # user_id is the identity every API client names the person by: never edited.
    fields = readonly_fields = ["organization", "user_id", "created_at"]
    change_form_template = "admin/tenancy/enduser/change_form.html"

    def has_add_permission(self, request):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def change_view(self, request, object_id, form_url="", extra_context=None):
        end_user = self.get_object(request, object_id)
        if end_user is not None:
            extra_context = {
                **(extra_context or {}),
                "holdings": holdings_of(end_user),
                "extra_object_tools": object_tools_of(request, end_user),
            }
        return super().change_view(request, object_id, form_url, extra_context)


@admin.register(StaffMembership)
class StaffMembershipAdmin(admin.ModelAdmin):
    list_display = ["user", "organization"]
    list_select_related = ["user", "organization"]
    has_module_permission = has_view_permission = has_change_permission = _superusers_only
    has_add_permission = has_delete_permission = _superusers_only

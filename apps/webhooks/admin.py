"""Staff views of webhook endpoints and their delivery log (organisation-scoped like every admin)."""

from django.contrib import admin

from apps.tenancy.admin_base import OrganizationScopedAdmin, ReadOnlyAdmin
from apps.webhooks.models import WebhookDelivery, WebhookEndpoint
from apps.webhooks.services import endpoint_update


@admin.register(WebhookEndpoint)
class WebhookEndpointAdmin(OrganizationScopedAdmin):
    list_display = ["url", "organization", "active", "include_content", "consecutive_failures", "disabled_at"]
    list_filter = ["active", "include_content"]
    list_select_related = ["organization"]
    search_fields = ["url", "description"]
    # The secret is never shown: it was shown once to the client that created the endpoint.
    fields = [
        "organization",
        "url",
        "description",
        "events",
        "include_content",
        "active",
        "consecutive_failures",
        "disabled_at",
        "disabled_reason",
        "registered_by",
    ]
    # The URL is changed through the API, which validates it as deliveries will use it.
    readonly_fields = ["organization", "url", "consecutive_failures", "disabled_at", "disabled_reason", "registered_by"]
    actions = ["enable"]

    def has_add_permission(self, request):
        return False  # created through the API, which shows the secret once

    @admin.action(description="Enable (and forget the failures in a row)")
    def enable(self, request, queryset):
        for endpoint in queryset:
            endpoint_update(endpoint=endpoint, changes={"active": True})
        self.message_user(request, f"{queryset.count()} endpoint(s) enabled.")


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(ReadOnlyAdmin):
    list_display = ["event_type", "endpoint", "status", "attempts", "last_status_code", "last_error", "created_at"]
    list_filter = ["status", "event_type"]
    list_select_related = ["endpoint", "organization"]
    search_fields = ["event_id"]

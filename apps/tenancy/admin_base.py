"""Admin base class: staff see and act only on their own organisation's rows; superusers see all.
Its admins also carry the actions other apps register for their model (core.extensions)."""

from django.contrib import admin
from django.contrib.admin.options import IS_POPUP_VAR

from apps.core.extensions import ADMIN_ACTIONS
from apps.tenancy.models import Client, Organization
from apps.tenancy.selectors import organization_for_staff


def staff_organization(request):
    return None if request.user.is_superuser else organization_for_staff(user=request.user)


class ScopeFilter(admin.SimpleListFilter):
    """Scopes named by the organisation's clients: DISTINCT over a large table of memories would scan every row."""

    title = "scope"
    parameter_name = "scope"

    def lookups(self, request, model_admin):
        clients = Client.objects.exclude(write_scope__isnull=True)
        if not request.user.is_superuser:
            clients = clients.filter(organization=staff_organization(request))
        return [(scope, scope) for scope in sorted(set(clients.values_list("write_scope", flat=True)))]

    def queryset(self, request, queryset):
        return queryset.filter(scope=self.value()) if self.value() else queryset


class OrganizationScopedAdmin(admin.ModelAdmin):
    """`organization_path` is the lookup from the model to its Organization."""

    organization_path = "organization"

    def get_queryset(self, request):
        queryset = super().get_queryset(request)
        if request.user.is_superuser:
            return queryset
        organization = organization_for_staff(user=request.user)
        if organization is None:
            return queryset.none()
        lookup = "pk" if self.organization_path == "self" else self.organization_path
        return queryset.filter(**{lookup: organization.pk})

    def get_actions(self, request):
        actions = super().get_actions(request)
        if self.actions is None or IS_POPUP_VAR in request.GET:
            return actions  # Django shows no actions there
        for function in ADMIN_ACTIONS.get(self.model._meta.label, ()):
            permissions = getattr(function, "allowed_permissions", ())
            if all(getattr(self, f"has_{permission}_permission")(request) for permission in permissions):
                function, name, description = self.get_action(function)
                actions[name] = (function, name, description)
        return actions

    def get_list_filter(self, request):
        filters = list(super().get_list_filter(request))
        if request.user.is_superuser and self.organization_path not in ("self", None):
            filters.append(self.organization_path)
        return filters

    def formfield_for_foreignkey(self, db_field, request, **kwargs):
        organization = staff_organization(request)
        if not request.user.is_superuser:
            related = db_field.related_model
            if related is Organization:
                kwargs["queryset"] = Organization.objects.filter(pk=getattr(organization, "pk", None))
            elif any(field.name == "organization" for field in related._meta.get_fields()):
                kwargs["queryset"] = related._default_manager.filter(organization=organization)
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def has_module_permission(self, request):
        if not request.user.is_superuser and staff_organization(request) is None:
            return False
        return super().has_module_permission(request)


class NoAddOrChange:
    """Rows only the platform writes: nobody adds or changes them in the admin."""

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False


class ReadOnlyAdmin(NoAddOrChange, OrganizationScopedAdmin):
    """Staff read the rows (and delete them, unless the admin says otherwise)."""


class HistoryInline(NoAddOrChange, admin.TabularInline):
    """Rows recording an object's history, listed under it: read, never added, changed or deleted there."""

    extra = 0
    can_delete = False

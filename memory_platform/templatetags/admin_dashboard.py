"""`{% admin_dashboard as groups %}` on the admin index: the dashboard for the signed-in person."""

from django import template

from apps.tenancy.admin_base import staff_organization
from memory_platform.dashboard import dashboard_tiles

register = template.Library()


@register.simple_tag(takes_context=True)
def admin_dashboard(context):
    request = context["request"]
    organization = staff_organization(request)
    if not request.user.is_superuser and organization is None:
        return []
    return dashboard_tiles(user=request.user, organization=organization)

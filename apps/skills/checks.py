"""`manage.py check` (and every server start) refuses a SKILL_SHARE_MIN_USERS below 1."""

from django.conf import settings
from django.core.checks import Error, register


@register()
def share_min_users_check(app_configs, **kwargs):
    if settings.SKILL_SHARE_MIN_USERS < 1:
        return [
            Error(
                f"SKILL_SHARE_MIN_USERS must be 1 or more (1: share at once), not {settings.SKILL_SHARE_MIN_USERS}.",
                id="skills.E001",
            )
        ]
    return []

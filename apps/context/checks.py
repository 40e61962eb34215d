"""`manage.py check` (and every server start) refuses context settings out of range."""

from django.conf import settings
from django.core.checks import Error, register

from apps.context.serializers import MIN_MAX_TOKENS


@register()
def context_settings_check(app_configs, **kwargs):
    errors = []
    if not MIN_MAX_TOKENS <= settings.CONTEXT_MAX_TOKENS <= 100_000:
        errors.append(
            Error(
                f"CONTEXT_MAX_TOKENS must be between {MIN_MAX_TOKENS} and 100000, not {settings.CONTEXT_MAX_TOKENS}.",
                id="context.E001",
            )
        )
    if not 1 <= settings.CONTEXT_CANDIDATES <= 100:
        errors.append(
            Error(
                f"CONTEXT_CANDIDATES must be between 1 and 100, not {settings.CONTEXT_CANDIDATES}.", id="context.E002"
            )
        )
    return errors

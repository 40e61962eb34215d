"""`manage.py check` (and every server start) refuses context settings out of range."""

from django.conf import settings
from django.core.checks import Error, register

from apps.context.serializers import MIN_MAX_TOKENS


@register()
def context_settings_check(app_configs, **kwargs):
    ranges = (
        ("CONTEXT_MAX_TOKENS", MIN_MAX_TOKENS, 100_000, "context.E001"),
        ("CONTEXT_CANDIDATES", 1, 100, "context.E002"),
    )
    return [
        Error(f"{name} must be between {low} and {high}, not {getattr(settings, name)}.", id=code)
        for name, low, high, code in ranges
        if not low <= getattr(settings, name) <= high
    ]

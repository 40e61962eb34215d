"""System check of webhooks: the networks an operator lets deliveries reach (choices and ranges:
memory_platform.checks)."""

import ipaddress

from django.conf import settings
from django.core.checks import Error, register


@register()
def allowed_networks_check(app_configs, **kwargs):
    """Each WEBHOOK_ALLOWED_NETWORKS entry must be a network in CIDR notation (or one address)."""
    errors = []
    for entry in settings.WEBHOOK_ALLOWED_NETWORKS:
        try:
            ipaddress.ip_network(entry.strip(), strict=False)
        except ValueError:
            errors.append(
                Error(
                    f"WEBHOOK_ALLOWED_NETWORKS: {entry!r} is not a network; use CIDR notation, e.g. "
                    "WEBHOOK_ALLOWED_NETWORKS=10.0.0.0/8,fd00::/8 (empty: deliveries reach public addresses only).",
                    id="webhooks.E001",
                )
            )
    return errors

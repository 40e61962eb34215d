from django.apps import AppConfig
from django.db.models.signals import post_delete, post_save, pre_delete, pre_save


class TenancyConfig(AppConfig):
    name = "apps.tenancy"
    verbose_name = "Tenancy"

    def ready(self):
        # Cache invalidation only: a change to who may do what drops every process's cached API keys.
        from apps.tenancy import keycache
        from apps.tenancy.models import Client, ClientAPIKey, Organization

        receivers = (
            (pre_save, keycache.before_tenancy_change, "pre-save"),
            (pre_delete, keycache.before_tenancy_change, "pre-delete"),
            (post_save, keycache.after_tenancy_change, "save"),
            (post_delete, keycache.after_tenancy_change, "delete"),
        )
        for model in (Organization, Client, ClientAPIKey):
            for signal, receiver, name in receivers:
                signal.connect(receiver, sender=model, dispatch_uid=f"keycache-{name}-{model.__name__}")

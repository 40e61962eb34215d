from django.apps import AppConfig
from django.db.models.signals import post_delete, post_save


class TenancyConfig(AppConfig):
    name = "apps.tenancy"
    label = "tenancy"
    verbose_name = "Tenancy"

    def ready(self):
        # Cache invalidation only: a change to who may do what drops every process's cached API keys.
        from apps.tenancy import keycache
        from apps.tenancy.models import Client, ClientAPIKey, Organization

        for model in (Organization, Client, ClientAPIKey):
            post_save.connect(keycache.on_tenancy_change, sender=model, dispatch_uid=f"keycache-save-{model.__name__}")
            post_delete.connect(
                keycache.on_tenancy_change, sender=model, dispatch_uid=f"keycache-delete-{model.__name__}"
            )

"""Which platform client an OAuth application's tokens act as."""

from django.conf import settings
from django.db import models

from apps.core.models import BaseModel
from apps.tenancy.models import Client


class ApplicationBinding(BaseModel):
    """Every token of `application` acts as `client`, never more; a token without a binding is refused."""

    application = models.OneToOneField(
        settings.OAUTH2_PROVIDER_APPLICATION_MODEL, on_delete=models.CASCADE, related_name="platform_binding"
    )
    client = models.ForeignKey(Client, on_delete=models.CASCADE, related_name="oauth_bindings")
    bound_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "OAuth application binding"

    def __str__(self):
        return f"{self.application} → {self.client}"

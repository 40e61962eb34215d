from django.apps import AppConfig


class ProvidersConfig(AppConfig):
    name = "apps.providers"
    verbose_name = "Model providers"

from django.apps import AppConfig


class MemoriesConfig(AppConfig):
    name = "apps.memories"
    label = "memories"
    verbose_name = "Episodic and semantic memories"

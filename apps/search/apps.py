from django.apps import AppConfig


class SearchConfig(AppConfig):
    name = "apps.search"
    label = "search"
    verbose_name = "Search"

    def ready(self):
        from apps.search import checks  # noqa: F401  (registers the reranker check)

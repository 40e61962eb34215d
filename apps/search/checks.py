"""System checks of search: a cross-encoder's model files, decomposition without an LLM, vectors of
another embedding model (choices and ranges: memory_platform.checks)."""

from django.conf import settings
from django.core.checks import Error, Tags, Warning, register
from django.db import DatabaseError


@register()
def decomposer_check(app_configs, **kwargs):
    if settings.QUERY_DECOMPOSER == "llm" and settings.LLM_PROVIDER == "rules":
        return [
            Warning(
                "QUERY_DECOMPOSER=llm needs an LLM (OPENAI_API_KEY or LLM_PROVIDER=openai); searches are not decomposed.",
                id="search.W001",
            )
        ]
    return []


@register()
def reranker_check(app_configs, **kwargs):
    if settings.RERANKER == "cross-encoder":
        from apps.search.cross_encoder import model_files

        if not settings.RERANKER_MODEL_PATH:
            return [
                Error(
                    "RERANKER=cross-encoder needs RERANKER_MODEL_PATH (model.onnx and tokenizer.json).",
                    id="search.E002",
                )
            ]
        missing = [str(file) for file in model_files(settings.RERANKER_MODEL_PATH) if not file.is_file()]
        if missing:
            return [Error(f"RERANKER_MODEL_PATH: {', '.join(missing)} missing.", id="search.E002")]
    return []


@register(Tags.database)
def embedding_model_check(app_configs, databases=None, **kwargs):
    """Runs with `check --database default`, `migrate`, and when a worker or beat starts."""
    if not databases:
        return []
    from apps.search.selectors import embedding_model_problem

    try:
        problem = embedding_model_problem()
    except DatabaseError:  # before `migrate` made the tables: nothing stored yet
        return []
    return [Warning(problem, id="search.W002")] if problem else []

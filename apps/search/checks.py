"""`manage.py check` (and every server start) refuses an unknown RERANKER or QUERY_DECOMPOSER or a missing reranker model."""

from django.conf import settings
from django.core.checks import Error, Warning, register

from apps.search.decompose import DECOMPOSERS
from apps.search.rerank import RERANKERS


@register()
def decomposer_check(app_configs, **kwargs):
    if settings.QUERY_DECOMPOSER not in DECOMPOSERS:
        return [Error(f"QUERY_DECOMPOSER={settings.QUERY_DECOMPOSER!r} is unknown; use any of {', '.join(DECOMPOSERS)}.", id="search.E003")]
    if settings.QUERY_DECOMPOSER == "llm" and settings.LLM_PROVIDER == "rules":
        return [Warning("QUERY_DECOMPOSER=llm needs an LLM (OPENAI_API_KEY or LLM_PROVIDER=openai); searches are not decomposed.", id="search.W001")]
    if not 1 <= settings.QUERY_DECOMPOSE_MAX <= 10:
        return [Error(f"QUERY_DECOMPOSE_MAX must be between 1 and 10, not {settings.QUERY_DECOMPOSE_MAX}.", id="search.E004")]
    return []


@register()
def reranker_check(app_configs, **kwargs):
    if settings.RERANKER not in RERANKERS:
        return [Error(f"RERANKER={settings.RERANKER!r} is unknown; use any of {', '.join(RERANKERS)}.", id="search.E001")]
    if settings.RERANKER == "cross-encoder":
        from apps.search.cross_encoder import model_files

        if not settings.RERANKER_MODEL_PATH:
            return [Error("RERANKER=cross-encoder needs RERANKER_MODEL_PATH (model.onnx and tokenizer.json).", id="search.E002")]
        missing = [str(file) for file in model_files(settings.RERANKER_MODEL_PATH) if not file.is_file()]
        if missing:
            return [Error(f"RERANKER_MODEL_PATH: {', '.join(missing)} missing.", id="search.E002")]
    return []

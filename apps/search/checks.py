"""`manage.py check` (and every server start) refuses an unknown RERANKER or a missing reranker model."""

from django.conf import settings
from django.core.checks import Error, register

from apps.search.rerank import RERANKERS


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

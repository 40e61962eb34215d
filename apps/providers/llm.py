"""The OpenAI-compatible client shared by the LLM and embedding providers."""

from functools import lru_cache

from django.conf import settings


@lru_cache(maxsize=1)
def openai_client():
    from openai import OpenAI

    return OpenAI(
        api_key=settings.OPENAI_API_KEY or "unset",
        base_url=settings.OPENAI_BASE_URL or None,
        timeout=settings.LLM_TIMEOUT_SECONDS,
        max_retries=settings.LLM_MAX_RETRIES,
    )

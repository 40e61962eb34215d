"""The LLM provider: the OpenAI-compatible client and JSON chat completions with usage accounting.

Retries with exponential backoff on 429, 5xx and connection errors come from the openai
SDK (`max_retries`); every completed call records its token usage.
"""

import json
import logging
from functools import lru_cache

from django.conf import settings

logger = logging.getLogger(__name__)

# LLM_PROVIDER: `rules` is the offline rule-based learning; `openai` is any OpenAI-compatible endpoint.
LLM_PROVIDERS = ("rules", "openai")


class LLMError(Exception):
    """The model endpoint could not be reached or failed after the SDK's retries."""


class LLMOutputError(LLMError):
    """The model answered, but not with a JSON object: callers treat it as "nothing learned"."""


@lru_cache(maxsize=1)
def openai_client():
    from openai import OpenAI

    return OpenAI(
        api_key=settings.OPENAI_API_KEY or "unset",
        base_url=settings.OPENAI_BASE_URL or None,
        timeout=settings.LLM_TIMEOUT_SECONDS,
        max_retries=settings.LLM_MAX_RETRIES,
    )


def llm_enabled() -> bool:
    """False selects the offline rule-based distiller and evolver."""
    return settings.LLM_PROVIDER != "rules"


def _record_usage(*, response, organization, task, purpose: str) -> None:
    from apps.providers.models import LLMUsage

    usage = getattr(response, "usage", None)
    LLMUsage.objects.create(
        organization=organization,
        task_id=getattr(task, "pk", task),
        purpose=purpose,
        model=getattr(response, "model", None) or settings.LLM_MODEL,
        prompt_tokens=getattr(usage, "prompt_tokens", 0) or 0,
        completion_tokens=getattr(usage, "completion_tokens", 0) or 0,
    )


def parse_json_object(text: str | None) -> dict:
    """The JSON object in a completion; tolerates a Markdown code fence around it."""
    text = (text or "").strip()
    if text.startswith("```"):
        text = text.strip("`")
        text = text[text.find("\n") + 1 :] if "\n" in text else text
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise LLMOutputError(f"The model's answer is not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise LLMOutputError(f"The model's answer is JSON but not an object ({type(value).__name__}).")
    return value


def chat_json(
    *,
    messages: list[dict],
    organization=None,
    task=None,
    purpose: str = "",
    usage: dict | None = None,
    timeout: float | None = None,
    max_retries: int | None = None,
) -> dict:
    """Sends a chat completion that must answer with a JSON object and returns that object
    (and, into `usage` when given, its prompt and completion token counts).

    Raises LLMError when the endpoint fails after the SDK's retries, LLMOutputError when the
    answer is not a JSON object; usage is recorded whenever the endpoint answered. `timeout` and
    `max_retries` override the settings for a caller that someone is waiting on (a search).
    """
    import openai

    client = openai_client()
    if timeout is not None or max_retries is not None:
        client = client.with_options(
            timeout=settings.LLM_TIMEOUT_SECONDS if timeout is None else timeout,
            max_retries=settings.LLM_MAX_RETRIES if max_retries is None else max_retries,
        )
    try:
        response = client.chat.completions.create(
            model=settings.LLM_MODEL,
            messages=messages,
            response_format={"type": "json_object"},
            temperature=0,
        )
    except openai.OpenAIError as exc:
        raise LLMError(f"{type(exc).__name__}: {exc}") from exc
    _record_usage(response=response, organization=organization, task=task, purpose=purpose)
    if usage is not None and getattr(response, "usage", None) is not None:
        usage["prompt_tokens"] = response.usage.prompt_tokens or 0
        usage["completion_tokens"] = response.usage.completion_tokens or 0
        usage["model"] = getattr(response, "model", None) or settings.LLM_MODEL
    if not response.choices:
        raise LLMOutputError("The model returned no choices.")
    return parse_json_object(response.choices[0].message.content)

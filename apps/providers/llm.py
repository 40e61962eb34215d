"""The LLM provider: JSON chat completions on an OpenAI-compatible endpoint (retries by the SDK), each
answer's shape sent as a JSON Schema, with token usage recorded."""

import json
import logging
from functools import lru_cache

from django.conf import settings
from pydantic import BaseModel, BeforeValidator, TypeAdapter, ValidationError

from apps.core.timing import timed
from apps.providers.tokens import fit_prompt

logger = logging.getLogger(__name__)

# LLM_PROVIDER: `rules` is the offline rule-based learning; `openai` is any OpenAI-compatible endpoint.
LLM_PROVIDERS = ("rules", "openai")
# LLM_STRUCTURED_OUTPUT: `json_schema` sends the answer's JSON Schema, `json_object` asks only for an
# object, `auto` sends the schema and falls back to `json_object` (for the process) when refused.
STRUCTURED_OUTPUT_MODES = ("auto", "json_schema", "json_object")
# Words in a 400 answer that show the endpoint refused the schema rather than the request.
_REFUSAL_WORDS = ("response_format", "json_schema", "schema")
_schema_refused = False


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


def _record_usage(*, response, organization, task, purpose: str, into: dict | None) -> None:
    """An LLMUsage row, and the same counts into `into` when given and the answer reports usage."""
    from apps.providers.models import LLMUsage

    usage = getattr(response, "usage", None)
    counts = {
        "prompt_tokens": getattr(usage, "prompt_tokens", 0) or 0,
        "completion_tokens": getattr(usage, "completion_tokens", 0) or 0,
        "model": getattr(response, "model", None) or settings.LLM_MODEL,
    }
    LLMUsage.objects.create(organization=organization, task_id=getattr(task, "pk", task), purpose=purpose, **counts)
    if into is not None and usage is not None:
        into.update(counts)


def parse_json_object(text: str | None) -> dict:
    """The JSON object in a completion; tolerates a Markdown code fence around it."""
    text = (text or "").strip()
    if text.startswith("```"):
        text = text.strip("`")
        text = text[text.find("\n") + 1 :]  # after the fence's language line; find is -1 without one
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise LLMOutputError(f"The model's answer is not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise LLMOutputError(f"The model's answer is JSON but not an object ({type(value).__name__}).")
    return value


def _subschemas(node: dict):
    """The schema and every schema inside it."""
    yield node
    children = [*node.get("properties", {}).values(), *node.get("$defs", {}).values()]
    children += [*node.get("anyOf", []), *node.get("oneOf", []), *node.get("allOf", [])]
    children += [node[key] for key in ("items", "additionalProperties") if isinstance(node.get(key), dict)]
    for child in children:
        yield from _subschemas(child)


def answer_schema(answer: type[BaseModel]) -> tuple[dict, bool]:
    """The answer model's JSON Schema as sent, and whether it can be strict: strict mode wants every object
    closed and fully required, so a free-form `dict` field makes the schema non-strict."""
    schema = answer.model_json_schema()
    nodes = list(_subschemas(schema))
    strict = all(
        node.get("type") != "object" or ("properties" in node and node.get("additionalProperties") in (None, False))
        for node in nodes
    )
    for node in nodes:
        node.pop("title", None)
        if "oneOf" in node:  # pydantic's discriminated union
            node["anyOf"] = node.pop("oneOf")
            node.pop("discriminator", None)
        if strict:
            node.pop("default", None)
            if node.get("type") == "object":
                node["required"] = list(node["properties"])
                node["additionalProperties"] = False
    return schema, strict


def _response_format(answer: type[BaseModel]) -> dict:
    mode = settings.LLM_STRUCTURED_OUTPUT
    if mode == "json_object" or (mode == "auto" and _schema_refused):
        return {"type": "json_object"}
    schema, strict = answer_schema(answer)
    json_schema = {"name": answer.__name__, "schema": schema} | ({"strict": True} if strict else {})
    return {"type": "json_schema", "json_schema": json_schema}


def _refuses_schema(exc: Exception) -> bool:
    import openai

    return isinstance(exc, openai.BadRequestError | openai.UnprocessableEntityError) and any(
        word in str(exc).lower() for word in _REFUSAL_WORDS
    )


def schema_refusal_forget() -> None:
    """Forgets that the endpoint refused JSON Schemas (for a test, or after changing endpoints)."""
    global _schema_refused
    _schema_refused = False


def parse_answer(answer: type[BaseModel], data: dict):
    """The answer as its model; LLMOutputError naming the fields that do not fit."""
    try:
        return answer.model_validate(data)
    except ValidationError as exc:
        raise LLMOutputError(f"The answer does not fit {answer.__name__}: {validation_problems(exc)}") from None


def validation_problems(exc: ValidationError) -> str:
    """Where and why a value did not fit (a scalar value is quoted, cut short)."""
    return "; ".join(
        f"{'.'.join(map(str, error['loc'])) or 'answer'}: {error['msg']}"
        + (f" (not {error['input']!r:.40})" if isinstance(error.get("input"), str | int | float) else "")
        for error in exc.errors()
    )[:300]


def kept(kind: type) -> BeforeValidator:
    """Keeps only a list's entries of this JSON type (bool is not a number): a stray one (from a
    schema-less endpoint) is left out rather than spoiling the answer."""

    def keep(values):
        if not isinstance(values, list):
            return values  # the model refuses it
        return [value for value in values if isinstance(value, kind) and not isinstance(value, bool)]

    return BeforeValidator(keep)


def parse_items(item, values) -> tuple[list[tuple[int, object]], list[tuple[int, str]]]:
    """Each value as `item`, one by one so a bad one spoils nothing: (index, item) and (index, problem) lists."""
    adapter = TypeAdapter(item)
    parsed, problems = [], []
    for index, value in enumerate(values):
        if not isinstance(value, dict):
            problems.append((index, "not an object"))
            continue
        try:
            parsed.append((index, adapter.validate_python(value)))
        except ValidationError as exc:
            problems.append((index, validation_problems(exc)))
    return parsed, problems


def _complete(client, messages: list[dict], response_format: dict):
    """One chat completion; an endpoint that refuses a JSON Schema answer format is asked again for a
    JSON object, and from then on only for that."""
    global _schema_refused
    import openai

    try:
        return client.chat.completions.create(
            model=settings.LLM_MODEL, messages=messages, response_format=response_format, temperature=0
        )
    except openai.OpenAIError as exc:
        if not (
            settings.LLM_STRUCTURED_OUTPUT == "auto"
            and response_format["type"] == "json_schema"
            and _refuses_schema(exc)
        ):
            raise
        response = client.chat.completions.create(
            model=settings.LLM_MODEL, messages=messages, response_format={"type": "json_object"}, temperature=0
        )
        _schema_refused = True
        logger.warning("The LLM endpoint refused a JSON Schema answer format; json_object is used from now on.")
        return response


def chat_json(
    *,
    messages: list[dict],
    answer: type[BaseModel],
    organization=None,
    task=None,
    purpose: str = "",
    usage: dict | None = None,
    timeout: float | None = None,
    max_retries: int | None = None,
) -> dict:
    """The JSON object a chat completion answers in the shape `answer` (token counts into `usage`);
    an over-long prompt loses the tail of its last message. `timeout`/`max_retries` override the settings."""
    import openai

    client = openai_client()
    if timeout is not None or max_retries is not None:
        client = client.with_options(
            timeout=settings.LLM_TIMEOUT_SECONDS if timeout is None else timeout,
            max_retries=settings.LLM_MAX_RETRIES if max_retries is None else max_retries,
        )
    messages, cut = fit_prompt(messages)
    if cut:
        logger.warning("A %s prompt was over LLM_MAX_PROMPT_TOKENS; about %s tokens were cut.", purpose, cut)
    try:
        with timed("llm"):
            response = _complete(client, messages, _response_format(answer))
    except openai.OpenAIError as exc:
        raise LLMError(f"{type(exc).__name__}: {exc}") from exc
    _record_usage(response=response, organization=organization, task=task, purpose=purpose, into=usage)
    if not response.choices:
        raise LLMOutputError("The model returned no choices.")
    return parse_json_object(response.choices[0].message.content)

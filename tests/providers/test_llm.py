import functools

import pytest
from pydantic import BaseModel

from apps.providers import llm
from apps.providers.embeddings import embed_texts, embedding_model_name
from apps.providers.llm import LLMError, LLMOutputError
from apps.providers.models import LLMUsage
from apps.providers.tokens import estimate_tokens, prompt_tokens
from tests.factories import OrganizationFactory

pytestmark = pytest.mark.django_db

MESSAGES = [{"role": "user", "content": "Say hello as JSON."}]


class Hello(BaseModel):
    hello: str
    name: str | None = None


class Loose(BaseModel):
    anything: dict


chat_json = functools.partial(llm.chat_json, answer=Hello)

HELLO_SCHEMA = {
    "type": "object",
    "properties": {"hello": {"type": "string"}, "name": {"anyOf": [{"type": "string"}, {"type": "null"}]}},
    "required": ["hello", "name"],
    "additionalProperties": False,
}


def test_chat_json_sends_the_answers_schema_and_records_usage_per_organization_and_task(fake_openai):
    organization = OrganizationFactory()
    task_id = "7d1c8a3e-8d2a-4c55-9b5e-9a3b2f0c1d2e"
    fake_openai.add_json({"hello": "world"}, prompt_tokens=11, completion_tokens=3)

    assert chat_json(messages=MESSAGES, organization=organization, task=task_id, purpose="test") == {"hello": "world"}

    (request,) = fake_openai.chat_requests()
    # Strict: every property required (the optional one nullable) and nothing else allowed.
    assert request["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "Hello", "schema": HELLO_SCHEMA, "strict": True},
    }
    assert request["model"] == "fake-model"
    assert request["messages"] == MESSAGES
    usage = LLMUsage.objects.get()
    assert (usage.organization, str(usage.task_id), usage.purpose) == (organization, task_id, "test")
    assert (usage.prompt_tokens, usage.completion_tokens, usage.model) == (11, 3, "fake-model")


def test_a_code_fence_around_the_json_is_tolerated(fake_openai):
    fake_openai.add_text('```json\n{"a": 1}\n```')
    assert chat_json(messages=MESSAGES) == {"a": 1}


@pytest.mark.parametrize("answer", ["not json at all", "[1, 2]", ""])
def test_an_answer_that_is_not_a_json_object_is_an_output_error(fake_openai, answer):
    fake_openai.add_text(answer)
    with pytest.raises(LLMOutputError):
        chat_json(messages=MESSAGES)
    assert LLMUsage.objects.count() == 1  # the tokens were spent all the same


@pytest.mark.parametrize("status", [429, 500, 503])
def test_rate_limits_and_server_errors_are_retried(fake_openai, status):
    fake_openai.add_error(status)
    fake_openai.add_json({"ok": True})
    assert chat_json(messages=MESSAGES) == {"ok": True}
    assert len(fake_openai.chat_requests()) == 2


def test_an_endpoint_that_keeps_failing_raises_after_the_retries(fake_openai):
    for _ in range(3):
        fake_openai.add_error(500)
    with pytest.raises(LLMError) as raised:
        chat_json(messages=MESSAGES)
    assert not isinstance(raised.value, LLMOutputError)
    assert len(fake_openai.chat_requests()) == 3  # one call and LLM_MAX_RETRIES=2 retries
    assert LLMUsage.objects.count() == 0


def test_a_client_error_is_not_retried(fake_openai):
    fake_openai.add_error(400, "bad request")
    with pytest.raises(LLMError):
        chat_json(messages=MESSAGES)
    assert len(fake_openai.chat_requests()) == 1


def test_openai_embeddings_go_through_the_same_client_in_one_batch(fake_openai, settings):
    settings.EMBEDDING_PROVIDER = "openai"
    settings.EMBEDDING_MODEL = "text-embedding-3-small"
    vectors = embed_texts(["first text", "second text"])
    assert len(vectors) == 2 and all(len(vector) == 384 for vector in vectors)
    assert vectors[0] != vectors[1]
    (request,) = [r for r in fake_openai.requests if r["path"].endswith("/embeddings")]
    assert request["body"]["input"] == ["first text", "second text"]
    assert request["body"]["dimensions"] == 384
    assert embedding_model_name() == "openai:text-embedding-3-small"


def test_a_schema_with_free_form_content_is_sent_without_strict(fake_openai):
    fake_openai.add_json({"anything": {"a": 1}})
    assert llm.chat_json(messages=MESSAGES, answer=Loose) == {"anything": {"a": 1}}
    (request,) = fake_openai.chat_requests()
    assert request["response_format"]["type"] == "json_schema"
    assert "strict" not in request["response_format"]["json_schema"]


def test_json_object_mode_sends_no_schema(fake_openai, settings):
    settings.LLM_STRUCTURED_OUTPUT = "json_object"
    fake_openai.add_json({"hello": "world"})
    assert chat_json(messages=MESSAGES) == {"hello": "world"}
    assert fake_openai.chat_requests()[0]["response_format"] == {"type": "json_object"}


def test_auto_falls_back_to_json_object_when_the_endpoint_refuses_a_schema_and_remembers_it(fake_openai):
    fake_openai.refuse_json_schema = True
    fake_openai.add_json({"hello": "first"})
    fake_openai.add_json({"hello": "second"})
    assert chat_json(messages=MESSAGES) == {"hello": "first"}
    assert chat_json(messages=MESSAGES) == {"hello": "second"}
    formats = [request["response_format"]["type"] for request in fake_openai.chat_requests()]
    assert formats == ["json_schema", "json_object", "json_object"]  # the refusal is asked once per process


def test_json_schema_mode_does_not_fall_back(fake_openai, settings):
    settings.LLM_STRUCTURED_OUTPUT = "json_schema"
    fake_openai.refuse_json_schema = True
    fake_openai.add_json({"hello": "world"})
    with pytest.raises(LLMError) as raised:
        chat_json(messages=MESSAGES)
    assert "json_schema" in str(raised.value) and len(fake_openai.chat_requests()) == 1


def test_answers_parse_through_their_model_naming_what_does_not_fit():
    assert llm.parse_answer(Hello, {"hello": "world"}).hello == "world"
    with pytest.raises(LLMOutputError, match="hello: Field required"):
        llm.parse_answer(Hello, {"name": "x"})
    parsed, problems = llm.parse_items(Hello, [{"hello": "a"}, "b", {"hello": 3}])
    assert [(index, item.hello) for index, item in parsed] == [(0, "a")]
    assert problems == [(1, "not an object"), (2, "hello: Input should be a valid string (not 3)")]


def test_a_prompt_over_the_budget_loses_the_tail_of_its_last_message(fake_openai, settings):
    settings.LLM_MAX_PROMPT_TOKENS = 2000
    fake_openai.add_json({"hello": "world"})
    long = [{"role": "system", "content": "Answer."}, {"role": "user", "content": "word " * 5000}]
    chat_json(messages=long)
    (request,) = fake_openai.chat_requests()
    assert prompt_tokens(request["messages"]) <= 2000 < prompt_tokens(long)
    assert request["messages"][0] == long[0] and request["messages"][1]["content"].endswith(" […]")
    assert estimate_tokens(request["messages"][1]["content"]) > 1900  # cut to the budget, not below it

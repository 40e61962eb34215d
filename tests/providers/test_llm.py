import pytest

from apps.providers.embeddings import embed_texts, embedding_model_name
from apps.providers.llm import LLMError, LLMOutputError, chat_json
from apps.providers.models import LLMUsage
from tests.factories import OrganizationFactory

pytestmark = pytest.mark.django_db

MESSAGES = [{"role": "user", "content": "Say hello as JSON."}]


def test_chat_json_asks_for_json_and_records_usage_per_organization_and_task(fake_openai):
    organization = OrganizationFactory()
    task_id = "7d1c8a3e-8d2a-4c55-9b5e-9a3b2f0c1d2e"
    fake_openai.add_json({"hello": "world"}, prompt_tokens=11, completion_tokens=3)

    assert chat_json(messages=MESSAGES, organization=organization, task=task_id, purpose="test") == {"hello": "world"}

    (request,) = fake_openai.chat_requests()
    assert request["response_format"] == {"type": "json_object"}
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

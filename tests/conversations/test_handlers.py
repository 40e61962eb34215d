import json
import time

import pytest

from apps.conversations.handlers import handle_embed_messages
from apps.conversations.models import Message, Session
from apps.pipeline.models import MemoryTask
from apps.pipeline.services import task_execute
from apps.providers.embeddings import embed_texts
from tests.conftest import api_for

pytestmark = pytest.mark.django_db


def test_embed_messages_fills_vectors_with_the_model_name_and_is_idempotent(client_a, add_messages):
    body = add_messages(client_a)
    task = MemoryTask.objects.get(pk=body["task_ids"][0])
    assert task_execute(task_id=task.pk, worker="test") == "succeeded"
    task.refresh_from_db()
    assert task.result == {"embedded": 2, "contexts": 2, "dated": 0, "model": "hash-384"}
    vectors = list(Message.objects.values_list("embedding", "embedding_model"))
    assert all(vector is not None and len(vector) == 384 and model == "hash-384" for vector, model in vectors)
    assert handle_embed_messages(task) == {
        "embedded": 0,
        "contexts": 0,
        "dated": 0,
        "model": "hash-384",
    }  # a re-run does nothing


def test_embedding_only_touches_its_own_range(client_a, add_messages):
    first = add_messages(client_a)
    add_messages(client_a, messages=[{"role": "user", "content": "later"}])
    task_execute(task_id=first["task_ids"][0], worker="test")
    session = Session.objects.get()
    assert list(Message.objects.filter(session=session, embedding__isnull=True).values_list("seq", flat=True)) == [3]


def test_neighbouring_turns_become_keyword_context_and_names_are_embedded(client_a, add_messages):
    first = add_messages(
        client_a,
        messages=[
            {"role": "user", "name": "Caroline", "content": "I went to the support group"},
            {"role": "assistant", "name": "Melanie", "content": "How was it?"},
        ],
    )
    second = add_messages(client_a, messages=[{"role": "user", "name": "Caroline", "content": "It was powerful"}])
    for body in (first, second):
        task_execute(task_id=body["task_ids"][0], worker="test")
    contexts = dict(Message.objects.values_list("seq", "context"))
    assert contexts[1] == "Melanie: How was it?"
    # The turn before the second batch learned about its new neighbour when that batch was indexed.
    assert contexts[2] == "Caroline: I went to the support group\nCaroline: It was powerful"
    assert contexts[3] == "Melanie: How was it?"
    from apps.search.engine import search

    hits = search(
        reader=client_a.reader, query="support group", memory_types=["message"], method="bm25", limit=5, filters={}
    )
    assert [hit.instance.seq for hit in hits][0] == 1  # the turn itself outranks its neighbours
    assert {hit.instance.seq for hit in hits} == {1, 2}
    named = search(
        reader=client_a.reader, query="Melanie", memory_types=["message"], method="bm25", limit=5, filters={}
    )
    assert named[0].instance.seq == 2


def _tool_turns(flights: list[dict]) -> list[dict]:
    call = {"id": "c1", "type": "function", "function": {"name": "search_direct_flight", "arguments": "{}"}}
    return [
        {"role": "user", "content": "Find me a direct flight from JFK to Seattle"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": json.dumps(flights)},
    ]


def test_a_long_tool_output_is_embedded_by_its_head_and_keys_and_found_whole_by_keyword(
    client_a, add_messages, settings
):
    settings.EMBEDDING_TOOL_OUTPUT_CHARS = 300
    flights = [{"flight_number": f"HAT{n:03d}", "origin": "JFK", "destination": "SEA"} for n in range(80)]
    flights[-1] = {"flight_number": "ZQX987", "origin": "JFK", "destination": "SEA", "fare_class": "basic"}
    body = add_messages(client_a, session_id="t1", messages=_tool_turns(flights), session_tag="task")
    task_execute(task_id=body["task_ids"][0], worker="test")

    output = Message.objects.get(role="tool")
    assert "ZQX987" in output.content and len(output.content) > 3000  # stored whole
    head = output.content[:300]
    assert "ZQX987" not in head
    # Only the head, and the keys of the JSON it cuts (the last record's new key too), are embedded.
    assert output.embedding_text() == f"{head} … keys: flight_number, origin, destination, fare_class"
    assert list(output.embedding) == pytest.approx(embed_texts([output.embedding_text()])[0], abs=1e-6)
    assert list(output.embedding) != pytest.approx(embed_texts([output.content])[0], abs=1e-6)

    from apps.search.engine import search

    for method in ("bm25", "fuzzy", "hybrid"):
        hits = search(
            reader=client_a.reader, query="ZQX987", memory_types=["message"], method=method, limit=3, filters={}
        )
        assert hits and hits[0].instance.pk == output.pk, method
    transcript = api_for(client_a).get("/api/v1/sessions/t1/", {"user_id": "user-1"}).json()
    assert any("ZQX987" in message["content"] for message in transcript["messages"])


def test_a_long_turn_of_any_role_is_embedded_by_its_head(client_a, add_messages, settings):
    settings.EMBEDDING_TURN_MAX_CHARS = 200
    policy = "The airline policy. " * 50
    body = add_messages(client_a, messages=[{"role": "system", "content": policy}, {"role": "user", "content": "hi"}])
    task_execute(task_id=body["task_ids"][0], worker="test")
    system = Message.objects.get(role="system")
    assert system.content == policy and system.embedding_text() == policy[:200]
    assert list(system.embedding) == pytest.approx(embed_texts([policy[:200]])[0], abs=1e-6)


@pytest.mark.django_db(transaction=True)
def test_a_real_worker_embeds_several_sessions_together_and_keeps_erasure_and_idempotency(add_messages, settings):
    from celery.contrib.testing.worker import start_worker

    from apps.privacy.models import ErasureRequest
    from apps.privacy.services.erasure import erasure_request
    from apps.privacy.services.subjects import subject_resolve
    from memory_platform.celery import app
    from tests.factories import ClientFactory

    settings.EMBEDDING_TOOL_OUTPUT_CHARS = 300
    client = ClientFactory()
    flights = [{"flight_number": f"HAT{n:03d}", "origin": "JFK", "destination": "SEA"} for n in range(80)]
    task_ids = []
    for user in ("ann", "bob", "cid"):  # three customers' task sessions, the same tool output in each
        for number in range(2):
            body = add_messages(client, user, f"{user}-{number}", _tool_turns(flights), session_tag="task", seal=False)
            task_ids += body["task_ids"]
    subject = subject_resolve(organization=client.organization, kind="user", subject_id="bob")
    erasure = erasure_request(subject=subject)
    with start_worker(app, pool="solo", perform_ping_check=False, shutdown_timeout=10):
        deadline = time.monotonic() + 180  # generous: a loaded machine runs workers slowly
        while MemoryTask.objects.filter(
            pk__in=[*task_ids, erasure.task_id], status__in=["queued", "running", "failed"]
        ).exists():
            assert time.monotonic() < deadline
            time.sleep(0.5)

    tasks = MemoryTask.objects.filter(pk__in=task_ids, task_type="embed_messages")
    assert {task.status for task in tasks} <= {"succeeded", "cancelled"}
    # Usually claimed and embedded together (the batch's seconds shared among them); how the worker's
    # messages fall decides which, so the batch itself is pinned in tests/pipeline/test_services.py.
    erasure.refresh_from_db()
    assert erasure.status == ErasureRequest.Status.SUCCEEDED
    assert not Message.objects.filter(end_user__user_id="bob").exists()
    kept = Message.objects.filter(end_user__user_id__in=["ann", "cid"])
    assert kept.count() == 12 and not kept.filter(embedding__isnull=True).exists()
    for message in kept:
        assert list(message.embedding) == pytest.approx(embed_texts([message.embedding_text()])[0], abs=1e-6)
    assert all(
        m.embedding_text().endswith("keys: flight_number, origin, destination") for m in kept.filter(role="tool")
    )
    # Each task is still idempotent on its own: run again, it embeds nothing.
    kept_sessions = {str(pk) for pk in kept.values_list("session_id", flat=True)}
    again = [task for task in tasks if task.payload.get("session") in kept_sessions]
    assert len(again) == 4 and all(handle_embed_messages(task)["embedded"] == 0 for task in again)

import pytest

from apps.conversations.handlers import handle_embed_messages
from apps.conversations.models import Message, Session
from apps.pipeline.models import MemoryTask
from apps.pipeline.services import task_execute

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

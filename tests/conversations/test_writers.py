"""A client erasure against the work that learns from the turns it deletes (apps/conversations/writers.py,
issue 39 finding 7): text a client wrote into another client's session was still found by
`memory/search` with `user_id` after that client's erasure succeeded.

The race: work on the session's user (compiling a page, extracting memories) read the client's turn,
the whole erasure ran and was verified while it waited (for the model, or for the CPU), and it then
stored what it derived. A client erasure took none of the locks that work takes (those are per user;
a client's subject names no user). Each test pauses real work between its read and its write (the
model answers only when told) in a second thread with its own connection, runs the erasure to
success in between, and lets the work finish."""

import threading

import pytest
from django.db import connection
from django.utils import timezone

from apps.conversations.models import Message
from apps.conversations.writers import writer_lock_key
from apps.pipeline.locks import advisory_locks
from apps.pipeline.models import MemoryTask
from apps.pipeline.services import task_execute
from apps.privacy.models import ErasureRequest
from apps.privacy.services.erasure import erasure_request, erasure_run
from apps.privacy.services.purge import subject_locks
from apps.privacy.services.subjects import subject_resolve
from apps.profiles.models import Entity, Mention, Profile
from apps.profiles.services.entities import COMPILE_PROFILE, session_project
from harness.fake_openai import fake_openai  # noqa: F401  (the scripted LLM server fixture)
from harness.provenance_world import residue
from tests.conftest import api_for
from tests.factories import ClientFactory
from tests.profiles.conftest import conversation, run_tasks  # noqa: F401  (shared fixtures)

pytestmark = pytest.mark.django_db(transaction=True)

WORD = "vorpalwick"  # only client two ever writes it


def in_thread(function, outcome: dict, name: str) -> threading.Thread:
    def run():
        try:
            outcome[name] = function()
        except BaseException as exc:  # reported by the test
            outcome[name] = exc
        finally:
            connection.close()  # each thread has its own connection

    thread = threading.Thread(target=run, name=name)
    thread.start()
    return thread


@pytest.fixture
def two(conversation, client_a, add_messages):  # noqa: F811
    """A second client of the scope writes one turn into Caroline's session, which client a opened."""
    two = ClientFactory(organization=client_a.organization, name="agent-two")
    add_messages(
        two,
        user_id="caroline",
        session_id="chat-1",
        messages=[{"role": "user", "content": f"I really love the {WORD} orchard near the harbour."}],
    )
    return two


def paused_model(fake_openai):
    """The model answers a request only once `answer` is set; `asked` is set when one arrives."""
    asked, answer = threading.Event(), threading.Event()
    fake_openai.on_request = lambda path: (asked.set(), answer.wait(20))
    return asked, answer


def erase(client) -> ErasureRequest:
    subject = subject_resolve(organization=client.organization, kind="client", subject_id=str(client.pk))
    erasure = erasure_request(subject=subject, requested_by=None, requested_by_staff="admin:test")
    erasure_run(erasure=ErasureRequest.objects.get(pk=erasure.pk))
    return ErasureRequest.objects.get(pk=erasure.pk)


def found_by_search(client_a) -> list:
    response = api_for(client_a).post(
        "/api/v1/memory/search",
        {"query": WORD, "user_id": "caroline", "memory_types": ["message", "episodic", "semantic", "profile", "topic"]},
        format="json",
    )
    assert response.status_code == 200, response.content
    return [hit for hit in response.json()["results"] if WORD in str(hit).lower()]


def test_a_page_compiled_from_a_turn_whose_writer_was_erased_meanwhile_is_not_stored(
    conversation,  # noqa: F811
    two,
    client_a,
    fake_openai,  # noqa: F811
    settings,
    run_tasks,  # noqa: F811
):
    settings.LLM_PROVIDER = "rules"
    session_project(session=conversation)
    entity = Entity.objects.get(name="Caroline", end_user=conversation.end_user)
    turn = Message.objects.get(created_by=two)
    assert Mention.objects.filter(entity=entity, item_id=turn.pk).exists(), "the page's evidence holds the turn"
    settings.LLM_PROVIDER = "openai"
    fake_openai.add_json({"markdown": f"# Caroline\n- loves the {WORD} orchard [1]", "used": [1]})
    asked, answer = paused_model(fake_openai)
    MemoryTask.objects.all().delete()
    task = MemoryTask.objects.create(
        task_type=COMPILE_PROFILE, organization=entity.organization, payload={"entity": str(entity.pk)}
    )
    outcome: dict = {}

    compiling = in_thread(lambda: task_execute(task_id=task.pk, worker="test"), outcome, "compile")
    assert asked.wait(10), "the compile read the evidence and waits for the model"
    erasure = erase(two)
    assert erasure.status == ErasureRequest.Status.SUCCEEDED, erasure.residual
    answer.set()
    compiling.join(30)

    assert found_by_search(client_a) == []
    assert residue(WORD) == {}
    # The compile found a turn it read gone: it stored nothing and waits to run again (on what is left).
    assert outcome["compile"] == "deferred", outcome["compile"]
    assert MemoryTask.objects.get(pk=task.pk).status == MemoryTask.Status.QUEUED
    settings.LLM_PROVIDER = "rules"
    fake_openai.on_request = None
    assert {done.status for done in run_tasks(COMPILE_PROFILE)} == {"succeeded"}
    assert residue(WORD) == {}
    assert Profile.objects.get(entity=entity).markdown, "the page is compiled from what is left"


def test_memories_extracted_from_a_turn_whose_writer_was_erased_meanwhile_are_not_stored(
    conversation,  # noqa: F811
    two,
    client_a,
    fake_openai,  # noqa: F811
    settings,
):
    settings.LLM_PROVIDER = "openai"
    spoken = Message.objects.filter(session=conversation, role__in=["user", "assistant"]).count()
    fake_openai.add_json(
        {
            "episodic": [],
            "semantic": [
                {
                    "operation": "add",
                    "name": "Caroline",
                    "summary": f"Caroline loves the {WORD} orchard near the harbour.",
                    "turns": list(range(1, spoken + 1)),
                }
            ],
        }
    )
    asked, answer = paused_model(fake_openai)
    MemoryTask.objects.all().delete()
    task = MemoryTask.objects.create(
        task_type="extract_memories", organization=conversation.organization, payload={"session": str(conversation.pk)}
    )
    outcome: dict = {}

    extracting = in_thread(lambda: task_execute(task_id=task.pk, worker="test"), outcome, "extract")
    assert asked.wait(10), "the extraction read the turns and waits for the model"
    erasure = erase(two)
    assert erasure.status == ErasureRequest.Status.SUCCEEDED, erasure.residual
    answer.set()
    extracting.join(30)

    assert found_by_search(client_a) == []
    assert residue(WORD) == {}
    assert outcome["extract"] == "deferred", outcome["extract"]
    # The turns client a wrote are still there, not learned from yet: the retry learns from them.
    assert Message.objects.filter(session=conversation, learned_at__isnull=True).exists()


def test_work_that_would_store_what_it_learned_from_a_client_being_erased_waits_for_the_erasure(
    conversation,  # noqa: F811
    two,
    settings,
):
    """The erasure holds the client's writer lock from its first step to its last: a projection of
    the session then stores nothing (it waits in the queue and runs again)."""
    settings.LLM_PROVIDER = "rules"
    subject = subject_resolve(organization=two.organization, kind="client", subject_id=str(two.pk))
    key = writer_lock_key(organization_id=two.organization_id, client_id=two.pk)
    assert key in subject_locks(subject)
    held, release = threading.Event(), threading.Event()

    def hold():
        with advisory_locks(subject_locks(subject)):
            held.set()
            release.wait(20)

    outcome: dict = {}
    holder = in_thread(hold, outcome, "erasure")
    assert held.wait(10)
    MemoryTask.objects.all().delete()
    task = MemoryTask.objects.create(
        task_type="project_entities", organization=conversation.organization, payload={"session": str(conversation.pk)}
    )
    try:
        assert task_execute(task_id=task.pk, worker="test") == "deferred"
        assert not Entity.objects.exists() and not Mention.objects.exists()
    finally:
        release.set()
        holder.join(30)
    MemoryTask.objects.filter(pk=task.pk).update(run_after=timezone.now())
    assert task_execute(task_id=task.pk, worker="test") == "succeeded"
    assert Mention.objects.filter(item_id=Message.objects.get(created_by=two).pk).exists()

"""End to end through the pipeline: an add queues projection, projection queues compiles, and the
page is searchable; the lint beat job and erasure queue lint as their own task type."""

from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone
from django_celery_beat.models import PeriodicTask

from apps.pipeline.models import MemoryTask
from apps.pipeline.services import task_execute
from apps.privacy.services.erasure import erasure_request
from apps.privacy.services.subjects import subject_resolve
from apps.profiles.models import Entity, Profile
from apps.profiles.services.entities import profile_compile_enqueue
from apps.profiles.tasks import enqueue_lint
from tests.profiles.makers import conversation_messages

pytestmark = pytest.mark.django_db


def test_projection_waits_for_the_extraction_of_its_session(client_a, add_messages, rules, settings):
    """Projection reads the memories extraction writes: due before the extraction has run, it goes
    back to the queue until just after the extraction is due, without spending an attempt."""
    settings.EXTRACTION_DEBOUNCE_SECONDS = 30
    add_messages(client_a, user_id="caroline", session_id="chat-1", messages=conversation_messages())
    projection = MemoryTask.objects.get(task_type="project_entities")
    extraction = MemoryTask.objects.get(task_type="extract_memories")
    MemoryTask.objects.filter(pk=projection.pk).update(run_after=timezone.now())

    assert task_execute(task_id=projection.pk, worker="test") == "deferred"

    projection.refresh_from_db()
    assert (projection.status, projection.attempts) == ("queued", 0)
    assert extraction.run_after < projection.run_after <= extraction.run_after + timedelta(seconds=1.5)
    assert not Entity.objects.exists()
    for task in (extraction, projection):
        MemoryTask.objects.filter(pk=task.pk).update(run_after=timezone.now())
        assert task_execute(task_id=task.pk, worker="test") == "succeeded"
    assert Entity.objects.filter(name="Melanie").exists()


def test_a_compile_gives_way_to_a_pending_projection_of_its_owner(client_a, add_messages, run_tasks, rules):
    """A page compiled while a projection of its owner's sessions is due would hold the owner's lock
    against it and then be compiled again: it waits, without spending an attempt."""
    add_messages(client_a, user_id="caroline", session_id="chat-1", messages=conversation_messages(), seal=True)
    run_tasks()
    melanie = Entity.objects.get(name="Melanie")
    add_messages(client_a, user_id="caroline", session_id="chat-2", messages=conversation_messages()[:4], seal=True)
    compile_task = profile_compile_enqueue(entity_id=melanie.pk, organization=melanie.organization, scope=melanie.scope)
    MemoryTask.objects.filter(pk=compile_task.pk).update(run_after=timezone.now())

    assert task_execute(task_id=compile_task.pk, worker="test") == "deferred"

    run_tasks("embed_messages", "extract_memories", "project_entities")
    MemoryTask.objects.filter(pk=compile_task.pk).update(run_after=timezone.now())
    assert task_execute(task_id=compile_task.pk, worker="test") == "succeeded"
    compile_task.refresh_from_db()
    assert compile_task.attempts == 1


def test_an_add_ends_in_searchable_profiles(api, run_tasks, rules):
    response = api.post(
        "/api/v1/memory/add",
        {"user_id": "caroline", "session_id": "chat-1", "messages": conversation_messages()},
        format="json",
    )
    assert response.status_code == 202, response.content

    done = run_tasks()

    assert {task.task_type for task in done} >= {
        "embed_messages",
        "extract_memories",
        "project_entities",
        "compile_profile",
    }
    assert all(task.status == "succeeded" for task in done), [(task.task_type, task.error) for task in done]
    assert set(Profile.objects.values_list("name", flat=True)) == {"Caroline", "Melanie", "Jon", "Yosemite"}
    hits = api.get(
        "/api/v1/memory/search", {"user_id": "caroline", "query": "gluten", "memory_types": "profile"}
    ).json()["results"]
    assert [hit["name"] for hit in hits][:1] == ["Melanie"]

    # Compiling again without new evidence changes nothing: no new revision.
    for entity in Entity.objects.select_related("organization"):
        profile_compile_enqueue(entity_id=entity.pk, organization=entity.organization, scope=entity.scope)
    run_tasks()
    assert set(Profile.objects.values_list("revision", flat=True)) == {1}


def test_beat_and_erasure_queue_lint_through_the_pipeline(client_a, add_messages, run_tasks, rules):
    first = MemoryTask.objects.get(pk=enqueue_lint())
    assert MemoryTask.objects.get(pk=enqueue_lint()) == first  # one at a time
    run_tasks("lint_profiles")
    first.refresh_from_db()
    assert first.status == "succeeded" and set(first.result) == {
        "stale",
        "orphan",
        "contradiction",
        "recompiles",
        "issues",
        "issues_total",
    }

    add_messages(client_a, user_id="gone", session_id="s", messages=conversation_messages())
    erasure_request(subject=subject_resolve(organization=client_a.organization, kind="user", subject_id="gone"))
    run_tasks("erase_subject")
    assert MemoryTask.objects.filter(
        task_type="lint_profiles", payload={"organization": str(client_a.organization_id)}, status="queued"
    ).exists()


def test_lint_runs_on_a_beat_schedule():
    call_command("setup_schedules", verbosity=0)
    assert PeriodicTask.objects.filter(task="profiles.enqueue_lint", enabled=True).exists()


def test_a_waiting_compile_runs_at_once_when_enough_new_mentions_have_gathered(client_a, settings):
    from datetime import timedelta

    from django.utils import timezone

    from apps.tenancy.models import EndUser

    settings.PROFILE_COMPILE_DEBOUNCE_SECONDS = 600
    settings.PROFILE_COMPILE_AFTER_MENTIONS = 5
    end_user = EndUser.objects.create(organization=client_a.organization, user_id="u")
    entity = Entity.objects.create(
        organization=client_a.organization,
        scope=client_a.write_scope,
        end_user=end_user,
        name="Melanie",
        aliases=["melanie"],
    )

    def enqueue(count):
        return profile_compile_enqueue(
            entity_id=entity.pk, organization=entity.organization, scope=entity.scope, new_mentions=count
        )

    first = enqueue(2)
    assert first.run_after > timezone.now() + timedelta(seconds=500)  # waits for the debounce
    second = enqueue(2)
    assert second.pk == first.pk and second.payload["new_mentions"] == 4
    assert MemoryTask.objects.get(pk=first.pk).run_after > timezone.now() + timedelta(seconds=500)

    third = enqueue(1)  # the fifth new mention: no more waiting

    stored = MemoryTask.objects.get(pk=first.pk)
    assert third.pk == first.pk and stored.payload == {"entity": str(entity.pk), "new_mentions": 5}
    assert stored.run_after <= timezone.now()
    assert MemoryTask.objects.filter(task_type="compile_profile").count() == 1

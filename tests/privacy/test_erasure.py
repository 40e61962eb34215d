"""A user erasure through the pipeline: nothing of the subject is left anywhere, nobody else loses
anything, shared skills are unlinked and back in review, and running it again changes nothing."""

import json

import pytest
import redis
from django.conf import settings

from apps.conversations.models import Checkpoint, CheckpointWrite, IngestRequest, Message, Session
from apps.memories.models import EpisodicMemory, EpisodicMemoryChange, SemanticMemory, SemanticMemoryChange
from apps.pipeline.models import MemoryTask
from apps.pipeline.services import task_execute
from apps.privacy.models import ErasureRequest
from apps.privacy.services.erasure import erasure_request, erasure_run
from apps.privacy.services.subjects import subject_resolve
from apps.privacy.services.verify import subject_verify
from apps.providers.models import LLMUsage
from apps.search.engine import search
from apps.search.registry import METHODS, SOURCES
from apps.skills.models import Skill, SkillExperience, SkillVersion
from tests.conftest import api_for
from tests.privacy.conftest import ALICE, ALICE_ERROR, ALICE_REQUEST, ALICE_WORD, BOB, BOB_REQUEST

pytestmark = pytest.mark.django_db


def erase_user(world, user_id=ALICE) -> ErasureRequest:
    response = api_for(world.client_a).delete(f"/api/v1/users/{user_id}/memories")
    assert response.status_code == 202, response.content
    body = response.json()
    assert task_execute(task_id=body["task_id"], worker="test") == "succeeded"
    return ErasureRequest.objects.get(pk=body["erasure_id"])


def rows_of(world, user_id) -> dict:
    """Every row of a user, by table, with the text it holds: what "untouched" compares."""
    end_user = world.end_user(user_id)
    memories = {
        model._meta.label: sorted(model.objects.filter(end_user=end_user).values_list("pk", "summary", "deleted_at"))
        for model in (EpisodicMemory, SemanticMemory)
    }
    history = {
        model._meta.label: sorted(
            model.objects.filter(memory__end_user=end_user).values_list("pk", "new_value"), key=str
        )
        for model in (EpisodicMemoryChange, SemanticMemoryChange)
    }
    return {
        "sessions": sorted(Session.objects.filter(end_user=end_user).values_list("pk", "message_count")),
        "messages": sorted(Message.objects.filter(end_user=end_user).values_list("pk", "content", "embedding_model")),
        "experiences": sorted(SkillExperience.objects.filter(end_user=end_user).values_list("pk", "content", "status")),
        "ingest": sorted(IngestRequest.objects.filter(response__user_id=user_id).values_list("pk", flat=True)),
        **memories,
        **history,
    }


def alice_subject(world):
    return subject_resolve(organization=world.organization, kind="user", subject_id=ALICE)


def test_a_user_erasure_leaves_nothing_of_the_user_in_any_table(world):
    before = subject_verify(subject=alice_subject(world))
    assert all(
        before["tables"][table] > 0
        for table in (
            "tenancy.EndUser",
            "conversations.Session",
            "conversations.Message",
            "conversations.IngestRequest",
            "skills.SkillExperience",
            "skills.Skill",
            "skills.SkillVersion",
            "skills.SkillVersion.experiences",
            "memories.EpisodicMemory",
            "memories.EpisodicMemoryChange",
            "memories.SemanticMemory",
            "memories.SemanticMemoryChange",
            "pipeline.MemoryTask",
            "providers.LLMUsage",
            "profiles.Entity",
            "profiles.Profile",
            "profiles.Mention",
            "profiles.ProfileSource",
            "profiles.ProfileRevision",
        )
    ), before

    # The broker's database holds at least one entry to scan, whichever tests ran before this one.
    broker = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    broker.set("test-erasure-unrelated-key", "nothing of the subject")
    try:
        erasure = erase_user(world)
    finally:
        broker.delete("test-erasure-unrelated-key")
        broker.close()

    assert erasure.status == "succeeded" and erasure.finished_at is not None
    assert erasure.residual["total"] == 0 and set(erasure.residual["tables"].values()) == {0}
    assert "error" not in erasure.residual["redis"] and erasure.residual["redis"]["keys_scanned"] > 0
    assert subject_verify(subject=alice_subject(world))["total"] == 0
    assert erasure.counts["conversations.Message"] == before["tables"]["conversations.Message"]
    assert erasure.counts["memories.SemanticMemoryChange"] == 2 and erasure.counts["providers.LLMUsage"] == 1
    # The audit trail holds counts and ids, never content.
    assert ALICE_WORD not in json.dumps([erasure.counts, erasure.residual, erasure.error]).lower()


def test_waiting_tasks_are_cancelled_with_empty_payloads_and_finished_ones_deleted(world):
    session_ids = {
        str(pk)
        for pk in Session.objects.filter(end_user__user_id=ALICE, organization=world.organization).values_list(
            "pk", flat=True
        )
    }
    tasks = MemoryTask.objects.filter(payload__session__in=session_ids)
    waiting = set(tasks.filter(status="queued").values_list("pk", flat=True))
    finished = set(tasks.filter(status="succeeded").values_list("pk", flat=True))
    assert waiting and finished

    erase_user(world)

    assert not MemoryTask.objects.filter(pk__in=finished).exists()
    cancelled = MemoryTask.objects.filter(pk__in=waiting)
    assert {(task.status, json.dumps(task.payload), task.idempotency_key) for task in cancelled} == {
        ("cancelled", "{}", None)
    }
    assert not LLMUsage.objects.filter(task_id__in=finished).exists()
    for task in cancelled:
        assert task_execute(task_id=task.pk, worker="test") == "not-claimed"


def test_the_other_users_data_is_untouched(world):
    before = rows_of(world, BOB)
    foreign_before = Message.objects.filter(organization=world.foreign_client.organization).count()

    erase_user(world)

    assert rows_of(world, BOB) == before
    assert Message.objects.filter(organization=world.foreign_client.organization).count() == foreign_before == 1


def test_a_shared_skill_loses_the_erased_lineage_and_text_and_goes_back_to_review(world):
    skill = world.shared_skill
    bob_experiences = set(
        SkillExperience.objects.filter(end_user__user_id=BOB, organization=world.organization).values_list(
            "pk", flat=True
        )
    )
    assert ALICE_REQUEST in skill.triggers and ALICE_ERROR in skill.instructions

    erasure = erase_user(world)

    skill.refresh_from_db()
    assert skill.status == "pending_review"
    latest = skill.versions.order_by("-version").first()
    assert latest.reason == "source erased" and latest.actor == f"privacy:erasure:{erasure.pk}"
    assert latest.snapshot["status"] == "pending_review"
    lineage = set(
        SkillVersion.experiences.through.objects.filter(skillversion__skill=skill).values_list(
            "skillexperience_id", flat=True
        )
    )
    assert lineage and lineage <= bob_experiences
    # What Bob contributed stays; nothing the erased user said is quoted any more, in the skill or its history.
    assert skill.triggers == [BOB_REQUEST] and [example["request"] for example in skill.examples] == [BOB_REQUEST]
    for text in (
        skill.description,
        skill.instructions,
        json.dumps(list(skill.versions.values_list("snapshot", "reason"))),
    ):
        assert ALICE_WORD not in text.lower()
    assert "Steps:\n1. search_flights(seat)" in skill.instructions


def test_skills_only_the_user_taught_and_their_personal_skills_are_deleted(world):
    ids = [world.alice_only_skill.pk, world.alice_personal_skill.pk]
    erasure = erase_user(world)
    assert not Skill.objects.filter(pk__in=ids).exists()
    assert not SkillVersion.objects.filter(skill_id__in=ids).exists()
    assert erasure.counts["skills.Skill"] == 2 and erasure.counts["skills.Skill (returned to review)"] == 1


@pytest.mark.parametrize("method", METHODS)
def test_search_finds_nothing_of_the_user_afterwards(world, method):
    assert set(SOURCES) >= {"message", "procedural", "experience", "episodic", "semantic", "profile"}
    readers = [world.client_a, world.reader]

    def alice_hits():
        hits = []
        for client in readers:
            for memory_type in SOURCES:
                for query in (ALICE_WORD, f"holidays {ALICE_WORD} flight", ALICE_REQUEST):
                    found = search(
                        reader=client.reader,
                        query=query,
                        memory_types=[memory_type],
                        method=method,
                        limit=50,
                        filters={},
                    )
                    hits += [
                        hit
                        for hit in found
                        if ALICE_WORD in json.dumps(hit.source.to_item(hit.instance), default=str).lower()
                    ]
        return hits

    assert alice_hits()  # the test can fail: before the erasure her data is found
    erase_user(world)
    assert alice_hits() == []


def test_every_former_id_is_a_404_afterwards(world):
    api = api_for(world.client_a)
    alice = world.end_user(ALICE)
    message = Message.objects.filter(end_user=alice).first()
    urls = [
        ("get", "/api/v1/sessions/chat-1/?user_id=alice"),
        ("get", "/api/v1/sessions/task-1/?user_id=alice"),
        ("delete", f"/api/v1/memory/message/{message.pk}"),
        ("get", f"/api/v1/skills/{world.alice_only_skill.pk}/"),
        ("get", f"/api/v1/skills/{world.alice_personal_skill.pk}/"),
        ("delete", f"/api/v1/memory/episodic/{EpisodicMemory.objects.get(end_user=alice).pk}"),
        ("delete", f"/api/v1/memory/semantic/{SemanticMemory.objects.get(end_user=alice).pk}"),
        *[
            ("get", f"/api/v1/tasks/{pk}/")
            for pk in MemoryTask.objects.filter(
                status="succeeded",
                payload__session__in=[
                    str(pk) for pk in Session.objects.filter(end_user=alice).values_list("pk", flat=True)
                ],
            ).values_list("pk", flat=True)
        ],
        ("delete", "/api/v1/users/alice/memories"),
    ]
    assert all(getattr(api, method)(url).status_code != 404 for method, url in urls if method == "get")

    erase_user(world)

    missing = api.get("/api/v1/sessions/never-was/?user_id=alice").content
    for method, url in urls:
        response = getattr(api, method)(url)
        assert response.status_code == 404 and response.content == missing, url
    assert api.get("/api/v1/experiences/?user_id=alice").json()["results"] == []
    assert api.get("/api/v1/sessions/?user_id=alice").json()["results"] == []


def test_running_the_erasure_again_is_a_no_op(world):
    erasure = erase_user(world)
    counts = dict(erasure.counts)
    bob = rows_of(world, BOB)
    skill_version = Skill.objects.get(pk=world.shared_skill.pk).version

    erasure_run(erasure=ErasureRequest.objects.get(pk=erasure.pk))

    erasure.refresh_from_db()
    assert erasure.status == "succeeded" and erasure.counts == counts and erasure.residual["total"] == 0
    assert rows_of(world, BOB) == bob
    assert Skill.objects.get(pk=world.shared_skill.pk).version == skill_version


def test_a_second_request_while_one_is_queued_returns_the_first(world):
    subject = alice_subject(world)
    first = erasure_request(subject=subject, requested_by=world.client_a)
    assert erasure_request(subject=subject, requested_by=world.client_a).pk == first.pk
    assert MemoryTask.objects.filter(task_type="erase_subject").count() == 1
    assert MemoryTask.objects.get(task_type="erase_subject").payload == {"erasure": str(first.pk)}


def test_purging_runs_in_bounded_batches(world, settings):
    settings.ERASURE_BATCH_SIZE = 3
    erasure = erase_user(world)
    assert erasure.status == "succeeded" and erasure.counts["conversations.Message"] > 3
    assert subject_verify(subject=alice_subject(world))["total"] == 0


def test_the_users_checkpoints_and_their_writes_go_and_anothers_stay(world):
    api = api_for(world.client_a)
    for user_id in (ALICE, BOB):
        body = {
            "user_id": user_id,
            "thread_id": "t",
            "checkpoint_id": "c",
            "checkpoint": {"type": "json", "data": "e30="},
        }
        assert api.post("/api/v1/checkpoints/", body, format="json").status_code == 201
        write = {"idx": 0, "channel": "c", "value": {"type": "json", "data": "e30="}}
        writes = {"user_id": user_id, "thread_id": "t", "checkpoint_id": "c", "task_id": "k", "writes": [write]}
        assert api.post("/api/v1/checkpoints/writes", writes, format="json").status_code == 200

    erasure = erase_user(world)

    assert erasure.counts["conversations.Checkpoint"] == 1 and erasure.counts["conversations.CheckpointWrite"] == 1
    assert not Checkpoint.objects.filter(end_user__user_id=ALICE).exists()
    assert not CheckpointWrite.objects.filter(end_user__user_id=ALICE).exists()
    assert (
        Checkpoint.objects.filter(end_user__user_id=BOB).count()
        == CheckpointWrite.objects.filter(end_user__user_id=BOB).count()
        == 1
    )

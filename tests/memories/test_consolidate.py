"""POST memory/consolidate and `manage.py consolidate` (apps/memories/services/consolidate.py): duplicates merged
with history and lineage kept, conflicts flagged offline and resolved by the model, dry runs that
report exactly what a run does and change nothing."""

import json
import threading
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.db import connection

from apps.conversations.models import Message
from apps.memories.models import EpisodicMemory, EpisodicMemoryChange, SemanticMemory, SemanticMemoryChange
from apps.memories.services.consolidate import CONSOLIDATE_MEMORIES
from apps.memories.services.extract import EXTRACT_LOCKS
from apps.pipeline.locks import advisory_lock
from apps.pipeline.models import MemoryTask
from apps.profiles.models import Entity, ItemType, LintFinding, ProfileSource
from apps.profiles.services.compile import profile_compile
from apps.profiles.services.entities import session_project
from harness.fake_openai import fake_openai  # noqa: F401  (the scripted LLM server fixture)
from tests.factories import ClientFactory
from tests.memories.makers import semantic
from tests.profiles.conftest import conversation, pages, rules, run_tasks  # noqa: F401  (shared fixtures)

pytestmark = pytest.mark.django_db


def store(api, memory_type, **fields):
    response = api.post(f"/api/v1/memory/{memory_type}/", {"user_id": "alice", **fields}, format="json")
    assert response.status_code == 201, response.content
    return response.json()["id"]


@pytest.fixture
def memories(api, client_a, add_messages):
    """Alice's memories: a fact stated twice (learned from two turns), a third wording of it on another
    subject, its negation, an unrelated fact, an event told twice on one day and once on another."""
    add_messages(
        client_a,
        user_id="alice",
        session_id="chat-1",
        messages=[
            {"role": "user", "content": "I love hiking in the Alps."},
            {"role": "user", "content": "Hiking in the Alps is what I love."},
        ],
    )
    first_turn, second_turn = Message.objects.order_by("seq").values_list("pk", flat=True)
    ids = {
        "hiking": store(api, "semantic", name="Alice", summary="Alice loves hiking in the Alps."),
        "hiking_again": store(
            api, "semantic", name="alice", summary="alice loves hiking in the alps", details="Every summer."
        ),
        "not_hiking": store(api, "semantic", name="Alice", summary="Alice does not love hiking in the Alps."),
        "nurse": store(api, "semantic", name="Alice", summary="Alice works as a nurse in Lyon."),
        "other_subject": store(api, "semantic", name="Bob", summary="Alice loves hiking in the Alps."),
        "trip": store(
            api, "episodic", summary="Alice flew to Lisbon for a conference.", occurred_at="2024-05-03T10:00Z"
        ),
        "trip_again": store(
            api, "episodic", summary="Alice flew to Lisbon for a conference", occurred_at="2024-05-03T18:00Z"
        ),
        "trip_later": store(
            api, "episodic", summary="Alice flew to Lisbon for a conference.", occurred_at="2024-09-12T10:00Z"
        ),
    }
    SemanticMemory.objects.filter(pk=ids["hiking"]).update(source_message_ids=[first_turn])
    SemanticMemory.objects.filter(pk=ids["hiking_again"]).update(source_message_ids=[second_turn])
    MemoryTask.objects.exclude(task_type=CONSOLIDATE_MEMORIES).delete()
    return ids


def rows():
    """Every column of every memory and history row: what "changed nothing" compares."""
    return [
        sorted(map(repr, model.objects.order_by("pk").values()))
        for model in (SemanticMemory, EpisodicMemory, SemanticMemoryChange, EpisodicMemoryChange)
    ]


def consolidate(api, run_tasks, **body) -> dict:
    response = api.post("/api/v1/memory/consolidate", body, format="json")
    assert response.status_code == 202, response.content
    answer = response.json()
    assert answer["scope"] == "default" and answer["status"] == "queued"
    run_tasks(CONSOLIDATE_MEMORIES)
    task = api.get(f"/api/v1/tasks/{answer['task_id']}/").json()
    assert task["status"] == "succeeded", task
    return task["result"]


def test_a_dry_run_reports_what_the_run_then_does_and_changes_nothing(api, memories, rules, run_tasks):
    before = rows()
    planned = consolidate(api, run_tasks, user_id="alice", dry_run=True)
    assert rows() == before

    assert planned["dry_run"] is True
    assert (planned["users"], planned["examined"], planned["merged"], planned["retired"]) == (1, 8, 2, 0)
    assert sorted((merge["survivor"], tuple(merge["merged"])) for merge in planned["merges"]) == sorted(
        [
            (memories["hiking_again"], (memories["hiking"],)),  # the fuller text (it has details) survives
            (memories["trip"], (memories["trip_again"],)),
        ]
    )
    # The negation is never merged: offline it is flagged, both ways round the same pair once.
    assert {frozenset(flag["ids"]) for flag in planned["flags"]} == {
        frozenset((memories["hiking"], memories["not_hiking"])),
        frozenset((memories["hiking_again"], memories["not_hiking"])),
    }
    assert planned["flagged"] == 2 and all(flag["reason"] == "one of them is negated" for flag in planned["flags"])

    done = consolidate(api, run_tasks, user_id="alice")
    assert done["dry_run"] is False
    assert {key: done[key] for key in ("merges", "retirements", "flags", "merged", "examined")} == {
        key: planned[key] for key in ("merges", "retirements", "flags", "merged", "examined")
    }


def test_a_merge_keeps_history_sources_and_details(api, memories, rules, run_tasks):
    consolidate(api, run_tasks, user_id="alice")

    survivor = SemanticMemory.objects.get(pk=memories["hiking_again"])
    merged = SemanticMemory.objects.get(pk=memories["hiking"])
    assert survivor.deleted_at is None and merged.deleted_at is not None
    assert set(survivor.source_message_ids) == set(Message.objects.values_list("pk", flat=True))
    assert survivor.details == "Every summer."
    history = api.get(f"/api/v1/memory/semantic/{survivor.pk}/history").json()["changes"]
    assert [change["operation"] for change in history] == ["add", "update"]
    assert history[-1]["actor"] == "consolidation" and memories["hiking"] in history[-1]["reason"]
    gone = api.get(f"/api/v1/memory/semantic/{merged.pk}/history").json()["changes"]
    assert [change["operation"] for change in gone] == ["add", "delete"]
    assert str(survivor.pk) in gone[-1]["reason"]
    # Only live memories are listed and searched.
    listed = api.get("/api/v1/memory/semantic/?user_id=alice").json()["results"]
    assert memories["hiking"] not in {item["id"] for item in listed}
    assert memories["hiking_again"] in {item["id"] for item in listed}
    # Untouched: another subject, the negation, the unrelated fact, the event of another day.
    for key in ("other_subject", "not_hiking", "nurse"):
        assert SemanticMemory.objects.get(pk=memories[key]).deleted_at is None
    assert EpisodicMemory.objects.get(pk=memories["trip_later"]).deleted_at is None
    assert EpisodicMemory.objects.get(pk=memories["trip_again"]).deleted_at is not None
    # A second run finds nothing left to merge.
    again = consolidate(api, run_tasks, user_id="alice")
    assert (again["merged"], again["examined"]) == (0, 6)


def test_what_was_derived_from_a_merged_memory_follows(api, client_a, memories, rules, run_tasks):
    """Mentions are projected again from the survivor's sessions; pages quoting a merged memory are
    linted (stale, recompiled), as after an edit or a delete."""
    session_project(session=Message.objects.first().session)
    for entity in Entity.objects.all():
        profile_compile(entity=entity)
    quoted = ProfileSource.objects.filter(item_type=ItemType.SEMANTIC, item_id=memories["hiking"])
    assert quoted.exists(), "the page of Alice quotes the memory about to be merged"
    MemoryTask.objects.all().delete()

    consolidate(api, run_tasks, user_id="alice")

    follow_ups = set(MemoryTask.objects.values_list("task_type", flat=True))
    assert {"project_entities", "lint_profiles"} <= follow_ups
    run_tasks("lint_profiles")
    page = quoted.first().profile
    assert LintFinding.objects.filter(profile=page, kind="stale").exists()


def test_deleting_a_survivor_takes_the_memories_merged_into_it(api, memories, rules, run_tasks):
    """A merged duplicate is kept, soft-deleted and readable by id, for DELETED_MEMORY_RETENTION_DAYS:
    deleting the survivor must not leave it (issue 39, finding 3)."""
    consolidate(api, run_tasks, user_id="alice")
    survivor, merged = memories["hiking_again"], memories["hiking"]
    assert api.get(f"/api/v1/memory/semantic/{merged}").status_code == 200

    assert api.delete(f"/api/v1/memory/semantic/{survivor}").status_code == 204

    for pk in (survivor, merged):
        assert api.get(f"/api/v1/memory/semantic/{pk}").status_code == 404
        assert not SemanticMemory.objects.filter(pk=pk).exists()
        assert not SemanticMemoryChange.objects.filter(memory_id=pk).exists()
    for key in ("other_subject", "not_hiking", "nurse"):
        assert SemanticMemory.objects.filter(pk=memories[key], deleted_at__isnull=True).exists()
    assert EpisodicMemory.objects.count() == 3


def test_deleting_a_merged_memory_takes_the_survivor_that_holds_it(api, memories, rules, run_tasks):
    """Consolidation judged them one memory and the survivor keeps the duplicate's sources and details:
    the delete of either takes both."""
    consolidate(api, run_tasks, user_id="alice")
    merged = EpisodicMemory.objects.get(pk=memories["trip_again"])
    assert merged.deleted_at is not None and EpisodicMemory.objects.get(pk=memories["trip"]).deleted_at is None

    assert api.delete(f"/api/v1/memory/episodic/{merged.pk}").status_code == 204

    assert [str(pk) for pk in EpisodicMemory.objects.values_list("pk", flat=True)] == [memories["trip_later"]]
    assert not EpisodicMemoryChange.objects.filter(memory_id__in=[memories["trip"], merged.pk]).exists()
    assert SemanticMemory.objects.count() == 5


def test_with_a_model_a_contradiction_is_resolved_and_the_superseded_fact_retired(
    api,
    memories,
    fake_openai,
    run_tasks,  # noqa: F811
):
    fake_openai.add_json(
        {"pairs": [{"pair": 1, "verdict": "contradiction", "current": "B"}, {"pair": 2, "verdict": "compatible"}]}
    )
    result = consolidate(api, run_tasks, user_id="alice")

    (request,) = fake_openai.chat_requests()
    prompt = request["messages"][1]["content"]
    assert "[1] A (" in prompt and "does not love hiking" in prompt and "[3]" not in prompt
    assert result["llm_calls"] == 1 and result["flagged"] == 0
    # The superseded fact was also merged with its duplicate: the merged memory is what is retired.
    (retired,) = result["retirements"]
    assert (retired["id"], retired["superseded_by"]) == (memories["hiking_again"], memories["not_hiking"])
    superseded = SemanticMemory.objects.get(pk=retired["id"])
    assert superseded.deleted_at is not None
    assert superseded.history.order_by("-created_at").first().reason.startswith("consolidation: superseded by")


def test_a_failed_model_leaves_the_conflicts_flagged(api, memories, fake_openai, run_tasks, settings):  # noqa: F811
    settings.LLM_MAX_RETRIES = 0
    fake_openai.add_error(500)
    result = consolidate(api, run_tasks, user_id="alice")
    assert (result["flagged"], result["retired"], result["merged"]) == (2, 0, 2)


def test_scope_wide_consolidation_covers_every_user_of_the_write_scope_only(api, client_a, memories, rules, run_tasks):
    other_scope = ClientFactory(organization=client_a.organization, write_scope="elsewhere", read_scopes=["elsewhere"])
    for _ in range(2):
        semantic(client_a.organization, "default", "bob", "Bob", "Bob plays the cello.")
        semantic(other_scope.organization, "elsewhere", "carol", "Carol", "Carol plays the cello.")

    result = consolidate(api, run_tasks)

    assert (result["users"], result["merged"]) == (2, 3)
    assert SemanticMemory.objects.filter(scope="elsewhere", deleted_at__isnull=True).count() == 2


def test_bad_requests_are_refused_naming_what_was_wrong(api, client_a, memories):
    assert api.post("/api/v1/memory/consolidate", {"dry_run": "yes"}, format="json").status_code == 400
    assert api.generic("POST", "/api/v1/memory/consolidate", "null", content_type="application/json").status_code == 400
    response = api.post("/api/v1/memory/consolidate", {"user_id": "nobody"}, format="json")
    assert response.status_code == 404
    response = api.post("/api/v1/memory/consolidate", {"user_id": 5}, format="json")
    assert response.status_code == 400 and "user_id" in response.json()["error"]["message"]
    assert not MemoryTask.objects.filter(task_type=CONSOLIDATE_MEMORIES).exists()


def test_a_known_user_with_nothing_to_merge_is_not_missing(api, client_a, add_messages, rules, run_tasks):
    """Offline, a conversation yields no memories; its user is still known in the scope: 202, nothing merged.
    A user known only in another scope of the organisation stays as missing as one never seen."""
    add_messages(client_a, user_id="carol", session_id="chat-1", messages=[{"role": "user", "content": "Hi."}])
    add_messages(ClientFactory(organization=client_a.organization, write_scope="elsewhere"), user_id="dave")
    assert not SemanticMemory.objects.exists() and not EpisodicMemory.objects.exists()

    result = consolidate(api, run_tasks, user_id="carol")
    assert (result["merged"], result["retired"], result["flagged"]) == (0, 0, 0)
    assert api.post("/api/v1/memory/consolidate", {"user_id": "dave"}, format="json").status_code == 404


def test_a_repeat_while_one_waits_joins_it(api, memories):
    first = api.post("/api/v1/memory/consolidate", {"user_id": "alice"}, format="json").json()
    second = api.post("/api/v1/memory/consolidate", {"user_id": "alice"}, format="json").json()
    assert first["task_id"] == second["task_id"]


def test_the_command_records_a_task_and_prints_its_result(client_a, memories, rules):
    out = StringIO()
    call_command("consolidate", "--org", client_a.organization.name, "--user", "alice", "--json", stdout=out)
    (result,) = json.loads(out.getvalue())["results"]
    assert (result["scope"], result["merged"], result["flagged"]) == ("default", 2, 2)
    task = MemoryTask.objects.get(pk=result["task_id"])
    assert (task.task_type, task.status, task.result["merged"]) == (CONSOLIDATE_MEMORIES, "succeeded", 2)

    out = StringIO()
    call_command("consolidate", "--org", client_a.organization.name, "--dry-run", stdout=out)
    assert "scope default: examined 6 memories of 1 user(s); would merge 0" in out.getvalue()
    with pytest.raises(CommandError, match="No user 'nobody'"):
        call_command("consolidate", "--org", client_a.organization.name, "--user", "nobody")


def test_it_waits_for_the_users_extraction_lock(client_a, memories, rules):
    """Consolidation takes the user's extraction lock (which erasure takes too): busy, the command says so."""
    end_user = SemanticMemory.objects.get(pk=memories["hiking"]).end_user
    key = EXTRACT_LOCKS.key(organization_id=client_a.organization_id, end_user_id=end_user.pk)
    held, release = threading.Event(), threading.Event()

    def hold():
        with advisory_lock(key):
            held.set()
            release.wait(10)
        connection.close()

    holder = threading.Thread(target=hold)
    holder.start()
    held.wait(10)
    try:
        with pytest.raises(CommandError, match="try again"):
            call_command("consolidate", "--org", client_a.organization.name, "--user", "alice")
    finally:
        release.set()
        holder.join()
    assert MemoryTask.objects.get(task_type=CONSOLIDATE_MEMORIES).status == "dead"
    assert SemanticMemory.objects.filter(deleted_at__isnull=False).count() == 0

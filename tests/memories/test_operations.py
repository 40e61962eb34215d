"""Memory management: store directly, read, list per user, edit with history and re-embedding,
delete; edits and deletes reach what was derived from the memory."""

import pytest

from apps.memories.models import SemanticMemory
from apps.pipeline.models import MemoryTask
from apps.profiles.models import LintFinding, ProfileSource
from tests.conftest import api_for
from tests.factories import ClientFactory
from tests.memories.makers import episodic, semantic
from tests.profiles.conftest import conversation, pages, rules, run_tasks  # noqa: F401  (shared fixtures)

pytestmark = pytest.mark.django_db


def create(api, memory_type, **body):
    response = api.post(f"/api/v1/memory/{memory_type}/", {"user_id": "caroline", **body}, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def test_a_stated_fact_is_stored_embedded_and_recorded_with_the_client_as_actor(api, client_a):
    body = create(
        api,
        "semantic",
        name="Caroline",
        summary="Caroline is vegetarian.",
        source="stated by the user",
        reason="the user said so",
    )
    memory = SemanticMemory.objects.get(pk=body["id"])
    assert (memory.scope, memory.created_by, memory.end_user.user_id) == ("default", client_a, "caroline")
    assert memory.embedding is not None and memory.source_message_ids == []
    assert body["memory_type"] == "semantic" and body["name"] == "Caroline" and body["deleted_at"] is None
    assert api.get(f"/api/v1/memory/semantic/{memory.pk}").json() == body
    (change,) = api.get(f"/api/v1/memory/semantic/{memory.pk}/history").json()["changes"]
    assert (change["operation"], change["actor"], change["reason"]) == (
        "add",
        f"client:{client_a.pk}",
        "the user said so",
    )
    assert change["previous_value"] is None and change["new_value"]["summary"] == "Caroline is vegetarian."


def test_a_fact_stored_under_a_key_again_replaces_it_in_the_writers_scope_only(api, client_a):
    first = create(api, "semantic", name="diet", summary="Caroline is vegetarian.", key="diet")
    second = create(api, "semantic", name="diet", summary="Caroline is vegan.", key="diet", reason="she changed")
    beta = ClientFactory(organization=client_a.organization, write_scope="beta", read_scopes=["beta"])
    theirs = api_for(beta).post(
        "/api/v1/memory/semantic/",
        {"user_id": "caroline", "name": "diet", "summary": "x", "key": "diet"},
        format="json",
    )

    assert second["id"] == first["id"] and second["summary"] == "Caroline is vegan."
    changes = api.get(f"/api/v1/memory/semantic/{first['id']}/history").json()["changes"]
    assert sorted(change["operation"] for change in changes) == ["add", "update"]
    assert theirs.status_code == 201 and theirs.json()["id"] != first["id"]
    assert SemanticMemory.objects.filter(key="diet").count() == 2
    blank = api.post(
        "/api/v1/memory/semantic/", {"user_id": "caroline", "name": "d", "summary": "s", "key": ""}, format="json"
    )
    assert blank.status_code == 400 and "key" in str(blank.json())


def test_an_edit_is_re_embedded_and_kept_in_the_history(api, client_a):
    body = create(
        api,
        "episodic",
        summary="Caroline went to a support group.",
        occurred_at="2023-05-07T00:00:00Z",
        time_granularity="day",
        actor="Caroline",
    )
    from apps.memories.models import EpisodicMemory

    memory = EpisodicMemory.objects.get(pk=body["id"])
    old_vector = list(memory.embedding)
    response = api.patch(
        f"/api/v1/memory/episodic/{memory.pk}",
        {
            "summary": "Caroline went to an LGBTQ support group.",
            "occurred_at": "2023-05-08T10:00:00+02:00",
            "reason": "corrected by the user",
        },
        format="json",
    )
    assert response.status_code == 200, response.content
    assert response.json()["summary"] == "Caroline went to an LGBTQ support group."
    assert response.json()["occurred_at"] == "2023-05-08T08:00:00Z"
    memory.refresh_from_db()
    assert list(memory.embedding) != old_vector
    changes = api.get(f"/api/v1/memory/episodic/{memory.pk}/history").json()["changes"]
    assert [change["operation"] for change in changes] == ["add", "update"]
    update = changes[1]
    assert update["previous_value"]["summary"] == "Caroline went to a support group."
    assert update["new_value"]["summary"] == "Caroline went to an LGBTQ support group."
    assert (update["actor"], update["reason"]) == (f"client:{client_a.pk}", "corrected by the user")


@pytest.mark.parametrize(
    "memory_type,body,field",
    [
        ("semantic", {"summary": ""}, "summary"),
        ("semantic", {"occurred_at": "2023-01-01T00:00:00Z"}, "occurred_at: Unknown field"),
        ("episodic", {"name": "x"}, "name: Unknown field"),
        ("episodic", {"occurred_at": "9999-01-01T00:00:00Z"}, "occurred_at"),
        ("episodic", {"time_granularity": "decade"}, "time_granularity"),
    ],
)
def test_a_bad_edit_is_a_400_and_changes_nothing(api, client_a, memory_type, body, field):
    if memory_type == "semantic":
        memory = semantic(client_a.organization, "default", "caroline", "Caroline", "Caroline is from Sweden.")
    else:
        memory = episodic(client_a.organization, "default", "caroline", "Caroline went to a support group.")
    response = api.patch(f"/api/v1/memory/{memory_type}/{memory.pk}", body, format="json")
    assert response.status_code == 400 and field in response.json()["error"]["message"], response.content
    assert not memory.history.exists()


def test_an_edit_without_fields_changes_and_records_nothing(api, client_a):
    memory = semantic(client_a.organization, "default", "caroline", "Caroline", "Caroline is from Sweden.")
    for body in ({}, {"reason": "only a reason"}):
        response = api.patch(f"/api/v1/memory/semantic/{memory.pk}", body, format="json")
        assert response.status_code == 200 and response.json()["summary"] == "Caroline is from Sweden."
    assert not memory.history.exists()


def test_the_list_is_per_user_filtered_and_paged(api, client_a):
    for number in range(5):
        semantic(
            client_a.organization, "default", "caroline", "Caroline" if number % 2 else "Jon", f"fact number {number}"
        )
    semantic(client_a.organization, "default", "melanie", "Melanie", "fact about someone else")
    page = api.get("/api/v1/memory/semantic/", {"user_id": "caroline", "limit": 2}).json()
    assert page["count"] == 5 and len(page["results"]) == 2 and "offset=2" in page["next"]
    walked = page["results"] + api.get(page["next"]).json()["results"]
    walked += api.get("/api/v1/memory/semantic/", {"user_id": "caroline", "limit": 2, "offset": 4}).json()["results"]
    assert len({memory["id"] for memory in walked}) == 5
    assert api.get("/api/v1/memory/semantic/", {"user_id": "caroline", "subject": "jon"}).json()["count"] == 3
    assert api.get("/api/v1/memory/semantic/", {"user_id": "caroline", "q": "number 3"}).json()["count"] == 1
    assert (
        api.get("/api/v1/memory/semantic/", {"user_id": "caroline", "start": "2199-01-01T00:00:00Z"}).json()["count"]
        == 0
    )
    assert api.get("/api/v1/memory/semantic/").status_code == 400  # user_id is required


def test_episodes_list_by_when_they_happened(api, client_a):
    from datetime import datetime, timezone

    for day in (3, 1, 2):
        episodic(
            client_a.organization,
            "default",
            "caroline",
            f"event of day {day}",
            occurred_at=datetime(2023, 5, day, tzinfo=timezone.utc),
        )
    body = api.get("/api/v1/memory/episodic/", {"user_id": "caroline", "end": "2023-05-02T12:00:00Z"}).json()
    assert [memory["summary"] for memory in body["results"]] == ["event of day 2", "event of day 1"]


def test_read_only_and_other_scope_clients_cannot_write(client_a):
    memory = semantic(client_a.organization, "default", "caroline", "Caroline", "Caroline is from Sweden.")
    reader = api_for(ClientFactory(organization=client_a.organization, write_scope=None, read_scopes=["default"]))
    assert reader.get(f"/api/v1/memory/semantic/{memory.pk}").status_code == 200
    assert reader.patch(f"/api/v1/memory/semantic/{memory.pk}", {"summary": "x"}, format="json").status_code == 403
    assert (
        reader.post(
            "/api/v1/memory/semantic/", {"user_id": "c", "name": "a", "summary": "b"}, format="json"
        ).status_code
        == 403
    )
    neighbour = api_for(
        ClientFactory(organization=client_a.organization, write_scope="team", read_scopes=["team", "default"])
    )
    response = neighbour.patch(f"/api/v1/memory/semantic/{memory.pk}", {"summary": "x"}, format="json")
    assert response.status_code == 403 and "scope 'default'" in response.json()["error"]["message"]
    memory.refresh_from_db()
    assert memory.summary == "Caroline is from Sweden." and not memory.history.exists()


def test_an_edit_reaches_the_pages_that_quote_the_memory(pages, api, client_a):
    """A memory a page quotes is edited: the page gets a stale finding (readable through the API)
    and a recompile, and the sessions it was learned from are projected again."""
    from apps.conversations.models import Message

    turn = Message.objects.get(content__contains="Jon helped me")
    memory = semantic(
        client_a.organization,
        "default",
        "caroline",
        "Jon",
        "Jon helped Caroline with the adoption forms.",
        source_message_ids=[turn.pk],
    )
    page = pages["Jon"]
    ProfileSource.objects.create(profile=page, item_type="semantic", item_id=memory.pk, quote=memory.summary)
    MemoryTask.objects.all().delete()

    response = api.patch(
        f"/api/v1/memory/semantic/{memory.pk}", {"summary": "Jon helped Caroline with the forms."}, format="json"
    )
    assert response.status_code == 200, response.content
    assert set(MemoryTask.objects.values_list("task_type", flat=True)) == {"compile_profile", "project_entities"}
    (finding,) = api.get(f"/api/v1/profiles/{page.pk}/findings").json()["findings"]
    assert (finding["kind"], finding["status"]) == ("stale", "open") and "edited" in finding["detail"]
    assert LintFinding.objects.filter(profile__in=[p for name, p in pages.items() if name != "Jon"]).count() == 0


def test_a_delete_reaches_the_pages_that_quote_the_memory(pages, api, client_a, run_tasks):
    memory = semantic(
        client_a.organization, "default", "caroline", "Jon", "Jon helped Caroline with the adoption forms."
    )
    page = pages["Jon"]
    ProfileSource.objects.create(profile=page, item_type="semantic", item_id=memory.pk, quote=memory.summary)
    assert api.delete(f"/api/v1/memory/semantic/{memory.pk}").status_code == 204
    assert MemoryTask.objects.filter(task_type="lint_profiles", status="queued").exists()
    run_tasks("lint_profiles")
    findings = api.get(f"/api/v1/profiles/{page.pk}/findings").json()["findings"]
    assert [finding["kind"] for finding in findings] == ["stale"]
    assert api.get(f"/api/v1/memory/semantic/{memory.pk}").status_code == 404


@pytest.mark.parametrize("path", ["/api/v1/memory/context", "/api/v1/memory/episodic/", "/api/v1/memory/semantic/"])
@pytest.mark.parametrize("body", [[None, None], "text", 3])
def test_a_body_that_is_not_an_object_is_a_400(api, path, body):
    response = api.post(path, body, format="json")
    assert response.status_code == 400, response.content
    assert response.json()["error"]["code"] == "invalid"
    assert not SemanticMemory.objects.exists()

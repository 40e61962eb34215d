"""The erasure API: who may erase, identical 404s across organisations, status, client erasure."""

import uuid

import pytest

from apps.conversations.models import IngestRequest, Message, Session
from apps.memories.models import EpisodicMemory, SemanticMemory
from apps.pipeline.models import MemoryTask
from apps.pipeline.services import task_execute
from apps.privacy.models import ErasureRequest
from apps.privacy.services.subjects import subject_resolve
from apps.privacy.services.verify import subject_verify
from apps.profiles.models import Profile
from apps.profiles.services.compile import profile_compile
from apps.skills.models import SkillExperience
from apps.tenancy.models import Client, EndUser
from tests.conftest import api_for
from tests.privacy.conftest import ALICE, BOB, BOB_WORD

BOB_WORD_TITLE = BOB_WORD.title()

pytestmark = pytest.mark.django_db


def counts(organization) -> dict:
    return {
        "end_users": EndUser.objects.filter(organization=organization).count(),
        "sessions": Session.objects.filter(organization=organization).count(),
        "messages": Message.objects.filter(organization=organization).count(),
        "experiences": SkillExperience.objects.filter(organization=organization).count(),
        "episodic": EpisodicMemory.objects.filter(organization=organization).count(),
        "semantic": SemanticMemory.objects.filter(organization=organization).count(),
        "ingest": IngestRequest.objects.filter(client__organization=organization).count(),
        "active_clients": Client.objects.filter(organization=organization, status="active").count(),
    }


def test_a_user_erasure_is_accepted_with_the_request_and_task_ids(world):
    response = api_for(world.client_a).delete(f"/api/v1/users/{ALICE}/memories")
    assert response.status_code == 202
    body = response.json()
    assert set(body) == {"erasure_id", "status", "task_id"} and body["status"] == "queued"
    erasure = ErasureRequest.objects.get(pk=body["erasure_id"])
    assert (erasure.subject_kind, erasure.subject_id, erasure.requested_by, str(erasure.task_id)) == (
        "user",
        ALICE,
        world.client_a,
        body["task_id"],
    )


def test_the_erasure_status_shows_counts_once_it_ran(world):
    api = api_for(world.client_a)
    body = api.delete(f"/api/v1/users/{ALICE}/memories").json()
    assert api.get(f"/api/v1/erasures/{body['erasure_id']}/").json()["status"] == "queued"
    task_execute(task_id=body["task_id"], worker="test")
    status = api.get(f"/api/v1/erasures/{body['erasure_id']}/").json()
    assert status["status"] == "succeeded" and status["counts"]["conversations.Message"] > 0
    assert status["residual"]["total"] == 0 and status["finished_at"]


def test_read_only_clients_may_not_erase(world):
    api = api_for(world.reader)
    for url in (f"/api/v1/users/{ALICE}/memories", f"/api/v1/clients/{world.client_c.pk}/memories"):
        assert api.delete(url).status_code == 403
    assert not ErasureRequest.objects.exists()


def test_a_writer_without_can_erase_gets_the_platforms_403_and_nothing_is_erased(world):
    before = counts(world.organization)
    api = api_for(world.client_c)
    responses = [
        api.delete(f"/api/v1/users/{ALICE}/memories"),
        api.delete(f"/api/v1/clients/{world.client_a.pk}/memories"),
        api.delete(f"/api/v1/users/nobody-{uuid.uuid4().hex}/memories"),
    ]
    assert {response.status_code for response in responses} == {403}
    assert len({response.content for response in responses}) == 1, "refused before the subject is looked up"
    assert responses[0].json() == {
        "error": {
            "status": 403,
            "code": "permission_denied",
            "message": "This client may not erase: erasure needs the client's can_erase permission.",
        }
    }
    assert not ErasureRequest.objects.exists()
    assert counts(world.organization) == before
    assert api_for(world.client_c).get("/api/v1/me").json()["can_erase"] is False


def test_can_erase_alone_is_enough_and_is_recorded_on_the_request(world):
    from tests.factories import ClientFactory

    privacy_officer = ClientFactory(organization=world.organization, write_scope=None, read_scopes=[], can_erase=True)
    body = api_for(privacy_officer).delete(f"/api/v1/users/{BOB}/memories").json()
    erasure = ErasureRequest.objects.get(pk=body["erasure_id"])
    assert (erasure.requested_by, erasure.authorized_by) == (privacy_officer, "client_can_erase")
    shown = api_for(privacy_officer).get(f"/api/v1/erasures/{erasure.pk}/").json()
    assert (shown["requested_by"], shown["authorized_by"]) == (str(privacy_officer.pk), "client_can_erase")


def test_the_erasure_service_refuses_a_client_without_can_erase(world):
    from django.core.exceptions import PermissionDenied

    from apps.privacy.services.erasure import erasure_request

    subject = subject_resolve(organization=world.organization, kind="user", subject_id=ALICE)
    with pytest.raises(PermissionDenied):
        erasure_request(subject=subject, requested_by=world.client_c)
    assert not ErasureRequest.objects.exists()


def test_erasure_needs_an_api_key(world):
    from rest_framework.test import APIClient

    assert APIClient().delete(f"/api/v1/users/{ALICE}/memories").status_code == 401


def test_erasing_another_organisations_user_or_client_is_a_404_like_a_missing_one(world):
    """The foreign organisation has a user named alice too; none of this reaches it or ours."""
    foreign = world.foreign_client.organization
    before, foreign_before = counts(world.organization), counts(foreign)
    api = api_for(world.foreign_client)
    missing_user = api.delete(f"/api/v1/users/nobody-{uuid.uuid4().hex}/memories")
    missing_client = api.delete(f"/api/v1/clients/{uuid.uuid4()}/memories")
    for response in (
        api.delete(f"/api/v1/users/{BOB}/memories"),
        api.delete(f"/api/v1/clients/{world.client_c.pk}/memories"),
        api.delete(f"/api/v1/clients/{world.client_a.pk}/memories"),
        api.delete("/api/v1/clients/not-a-uuid/memories"),
        missing_user,
        missing_client,
    ):
        assert response.status_code == 404 and response.content == missing_user.content
    assert not ErasureRequest.objects.exists()
    assert counts(world.organization) == before and counts(foreign) == foreign_before


def test_another_organisations_erasure_status_is_a_404(world):
    body = api_for(world.client_a).delete(f"/api/v1/users/{ALICE}/memories").json()
    api = api_for(world.foreign_client)
    foreign = api.get(f"/api/v1/erasures/{body['erasure_id']}/")
    assert foreign.status_code == 404 and foreign.content == api.get(f"/api/v1/erasures/{uuid.uuid4()}/").content


def test_a_client_erasure_removes_what_it_created_and_revokes_its_keys(world):
    client_c = world.client_c
    api_c = api_for(client_c)
    assert api_c.get("/api/v1/me").status_code == 200
    subject = subject_resolve(organization=world.organization, kind="client", subject_id=str(client_c.pk))
    before = subject_verify(subject=subject, include_redis=False)["tables"]
    assert (
        before["conversations.Message"]
        and before["memories.SemanticMemory"]
        and before["tenancy.ClientAPIKey (not revoked)"]
    )
    assert before["profiles.ProfileSource"] and before["profiles.ProfileRevision"] and before["profiles.Mention"]
    bob_by_a = set(
        Message.objects.filter(end_user__user_id=BOB, created_by=world.client_a).values_list("pk", "content")
    )
    bob_page = Profile.objects.get(organization=world.organization, end_user__user_id=BOB, name=BOB)
    assert "aisle" in bob_page.markdown  # client C's turn is quoted on Bob's page

    body = api_for(world.client_a).delete(f"/api/v1/clients/{client_c.pk}/memories").json()
    assert task_execute(task_id=body["task_id"], worker="test") == "succeeded"

    erasure = ErasureRequest.objects.get(pk=body["erasure_id"])
    assert erasure.status == "succeeded" and erasure.residual["total"] == 0
    assert erasure.counts["tenancy.ClientAPIKey (revoked)"] == 1 and erasure.counts["tenancy.Client (disabled)"] == 1
    client_c.refresh_from_db()
    assert client_c.status == "disabled"  # the row stays: the audit trail has a subject
    assert api_c.get("/api/v1/me").status_code == 401
    assert (
        not Message.objects.filter(created_by=client_c).exists()
        and not Session.objects.filter(client=client_c).exists()
    )
    assert not IngestRequest.objects.filter(client=client_c).exists()
    assert (
        set(Message.objects.filter(end_user__user_id=BOB, created_by=world.client_a).values_list("pk", "content"))
        == bob_by_a
    )
    assert SemanticMemory.objects.filter(end_user__user_id=BOB, organization=world.organization).count() == 1
    # Bob's page lost every revision and line quoting client C, and is queued to be compiled again.
    bob_page.refresh_from_db()
    assert "aisle" not in bob_page.markdown
    assert not any("aisle" in revision.markdown for revision in bob_page.revisions.all())
    assert MemoryTask.objects.filter(
        task_type="compile_profile", payload__entity=str(bob_page.entity_id), status="queued"
    ).exists()
    (finding,) = bob_page.findings.all()
    assert (finding.kind, finding.status) == ("stale", "open") and str(erasure.pk) in finding.detail
    profile_compile(entity=bob_page.entity)  # what that task does once due
    bob_page.refresh_from_db()
    assert bob_page.markdown and "aisle" not in bob_page.markdown and BOB_WORD_TITLE in bob_page.markdown
    finding.refresh_from_db()
    assert finding.status == "resolved"

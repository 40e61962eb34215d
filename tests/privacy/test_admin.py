"""Admin: the erasure list is read-only and scoped; erasing shows the counts first and queues on confirm."""

import pytest
from django.contrib.auth.models import Permission, User

from apps.privacy.models import ErasureRequest
from apps.tenancy.models import StaffMembership
from tests.privacy.conftest import ALICE

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff(client, world):
    user = User.objects.create_user("dpo", password="pw", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(content_type__app_label__in=["privacy", "tenancy"]))
    StaffMembership.objects.create(user=user, organization=world.organization)
    client.force_login(user)
    return client


def test_the_user_action_leads_to_a_confirmation_with_counts_and_confirming_queues_the_erasure(staff, world):
    alice = world.end_user(ALICE)
    response = staff.post("/admin/tenancy/enduser/", {"action": "erase_user", "_selected_action": [alice.pk]})
    assert response.status_code == 302 and response.url == f"/admin/privacy/erasurerequest/erase/user/{alice.pk}/"

    page = staff.get(response.url)
    content = page.content.decode()
    assert page.status_code == 200 and "Erase user alice?" in content
    assert "conversations.Message" in content and "memories.EpisodicMemory" in content
    assert not ErasureRequest.objects.exists()  # looking is not erasing

    confirmed = staff.post(response.url)
    erasure = ErasureRequest.objects.get()
    assert confirmed.status_code == 302 and str(erasure.pk) in confirmed.url
    assert (erasure.subject_kind, erasure.subject_id, erasure.requested_by_staff, erasure.status) == (
        "user",
        ALICE,
        "dpo",
        "queued",
    )
    assert erasure.authorized_by == "staff"


def test_the_client_action_leads_to_its_confirmation(staff, world):
    response = staff.post("/admin/tenancy/client/", {"action": "erase_client", "_selected_action": [world.client_c.pk]})
    assert response.url == f"/admin/privacy/erasurerequest/erase/client/{world.client_c.pk}/"
    assert "tenancy.ClientAPIKey (not revoked)" in staff.get(response.url).content.decode()


def test_staff_cannot_erase_or_see_another_organisations_subjects(staff, world):
    from apps.privacy.services.erasure import erasure_request
    from apps.privacy.services.subjects import subject_resolve

    foreign_alice = world.foreign_client.organization.end_users.get(user_id=ALICE)
    assert staff.get(f"/admin/privacy/erasurerequest/erase/user/{foreign_alice.pk}/").status_code == 404
    assert staff.post(f"/admin/privacy/erasurerequest/erase/client/{world.foreign_client.pk}/").status_code == 404
    erasure_request(
        subject=subject_resolve(organization=world.foreign_client.organization, kind="user", subject_id=ALICE)
    )
    erasure_request(subject=subject_resolve(organization=world.organization, kind="user", subject_id="bob"))
    listing = staff.get("/admin/privacy/erasurerequest/").content.decode()
    assert ">bob<" in listing and ">alice<" not in listing
    assert ErasureRequest.objects.count() == 2


def test_staff_without_the_erasure_permission_cannot_erase(client, world):
    user = User.objects.create_user("viewer", password="pw", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(codename="view_erasurerequest"))
    StaffMembership.objects.create(user=user, organization=world.organization)
    client.force_login(user)
    assert client.post(f"/admin/privacy/erasurerequest/erase/user/{world.end_user(ALICE).pk}/").status_code == 403
    assert not ErasureRequest.objects.exists()


def test_can_erase_is_editable_on_the_client_and_off_by_default(staff, world):
    client_c = world.client_c
    assert client_c.can_erase is False
    page = staff.get(f"/admin/tenancy/client/{client_c.pk}/change/").content.decode()
    assert 'name="can_erase"' in page
    form = {
        "name": client_c.name,
        "status": "active",
        "write_scope": client_c.write_scope,
        "read_scopes": ",".join(client_c.read_scopes),
        "can_erase": "on",
        "api_keys-TOTAL_FORMS": "0",
        "api_keys-INITIAL_FORMS": "0",
    }
    response = staff.post(f"/admin/tenancy/client/{client_c.pk}/change/", form)
    assert response.status_code == 302, response.content.decode()[:2000]
    client_c.refresh_from_db()
    assert client_c.can_erase is True

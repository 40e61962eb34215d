"""Admin: staff see their organisation's endpoints and deliveries only, never a secret, in a
pinned number of queries; the enable action resets the failures."""

import pytest
from django.contrib.auth.models import Permission, User

from apps.tenancy.models import StaffMembership
from apps.webhooks.models import WebhookEndpoint
from apps.webhooks.services import endpoint_create, endpoint_send_test, endpoint_update
from tests.factories import ClientFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff(client, manager):
    user = User.objects.create_user("ops", password="pw", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(content_type__app_label="webhooks"))
    StaffMembership.objects.create(user=user, organization=manager.organization)
    client.force_login(user)
    return client


def _endpoint(client, url):
    endpoint, secret = endpoint_create(
        organization=client.organization, registered_by=client, url=url, events=["erasure.finished"]
    )
    return endpoint, secret


def test_staff_see_their_organisations_endpoints_and_deliveries_without_secrets(
    staff, manager, django_assert_max_num_queries
):
    ours, secret = _endpoint(manager, "https://ours.example.com/hook")
    theirs, _ = _endpoint(ClientFactory(name="elsewhere"), "https://theirs.example.com/hook")
    for _ in range(3):
        endpoint_send_test(endpoint=ours)
    endpoint_send_test(endpoint=theirs)

    with django_assert_max_num_queries(12):
        endpoints = staff.get("/admin/webhooks/webhookendpoint/").content.decode()
    with django_assert_max_num_queries(12):
        deliveries = staff.get("/admin/webhooks/webhookdelivery/").content.decode()
    detail = staff.get(f"/admin/webhooks/webhookendpoint/{ours.pk}/change/").content.decode()
    assert "ours.example.com" in endpoints and "theirs.example.com" not in endpoints
    assert deliveries.count("webhook.test") >= 3 and "theirs.example.com" not in deliveries
    assert secret not in endpoints + deliveries + detail
    assert staff.get(f"/admin/webhooks/webhookendpoint/{theirs.pk}/change/").status_code == 302  # not theirs


def test_the_enable_action_resets_a_disabled_endpoint(staff, manager):
    endpoint, _ = _endpoint(manager, "https://ours.example.com/hook")
    endpoint_update(endpoint=endpoint, changes={"active": False})
    WebhookEndpoint.objects.filter(pk=endpoint.pk).update(consecutive_failures=7)
    response = staff.post("/admin/webhooks/webhookendpoint/", {"action": "enable", "_selected_action": [endpoint.pk]})
    assert response.status_code == 302
    endpoint.refresh_from_db()
    assert endpoint.active and endpoint.consecutive_failures == 0 and endpoint.disabled_at is None

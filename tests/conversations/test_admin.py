import pytest
from django.contrib.auth import get_user_model

from apps.conversations.models import Session
from apps.tenancy.models import StaffMembership

pytestmark = pytest.mark.django_db


def test_transcript_page_shows_turns_and_tool_activity_to_own_staff_only(
    client, client_a, foreign_client, add_messages
):
    add_messages(
        client_a,
        messages=[
            {"role": "user", "content": "book it"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "c", "type": "function", "function": {"name": "book", "arguments": "{}"}}],
            },
            {"role": "tool", "tool_call_id": "c", "content": "Error: no seats"},
        ],
    )
    add_messages(foreign_client, session_id="theirs")
    staff = get_user_model().objects.create_user("staff", password="pw", is_staff=True, is_superuser=True)
    client.force_login(staff)
    own = Session.objects.get(organization=client_a.organization)
    page = client.get(f"/admin/conversations/session/{own.pk}/transcript/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "book it" in html and "[tool_call book({})]" in html and "[book] Error: no seats" in html

    staff.is_superuser = False
    staff.save()
    StaffMembership.objects.create(user=staff, organization=client_a.organization)
    from django.contrib.auth.models import Permission

    staff.user_permissions.add(*Permission.objects.filter(codename__in=["view_session", "change_session"]))
    theirs = Session.objects.get(organization=foreign_client.organization)
    assert client.get(f"/admin/conversations/session/{theirs.pk}/transcript/").status_code == 404
    listing = client.get("/admin/conversations/session/")
    assert listing.status_code == 200
    assert "theirs" not in listing.content.decode() and own.session_id in listing.content.decode()

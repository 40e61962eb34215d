"""The compiled-memory admin: revisions as diffs, sources linked to turns, findings as a review queue."""

import pytest
from django.contrib.auth.models import Permission

from apps.profiles.models import Entity, LintFinding, Profile
from apps.profiles.services.compile import profile_compile
from apps.profiles.services.entities import session_project
from tests.admin.makers import staff_user
from tests.profiles.makers import conversation_messages

pytestmark = pytest.mark.django_db


@pytest.fixture
def melanie(conversation, add_messages, client_a, rules):
    session_project(session=conversation)
    entity = Entity.objects.get(name="Melanie")
    profile_compile(entity=entity)
    add_messages(
        client_a,
        user_id="caroline",
        session_id="chat-2",
        messages=[
            {"role": "assistant", "name": "Melanie", "content": "I adore pottery now."},
        ],
    )
    from apps.conversations.models import Session

    session_project(session=Session.objects.get(session_id="chat-2"))
    profile_compile(entity=entity)
    return Profile.objects.get(entity=entity)


def test_a_profile_page_shows_each_revision_as_a_diff_and_links_sources_to_turns(admin_client, melanie):
    page = admin_client.get(f"/admin/profiles/profile/{melanie.pk}/change/").content.decode()

    assert "Revision 2 · rules" in page and "Revision 1 · rules" in page
    assert page.index("Revision 2") < page.index("Revision 1")
    assert "background:#dcffe4" in page and "I adore pottery now." in page  # the inserted line
    turn = melanie.sources.filter(quote__contains="pottery").get()
    from apps.conversations.models import Message

    message = Message.objects.get(pk=turn.item_id)
    assert f"/admin/conversations/session/{message.session_id}/transcript/#turn-{message.seq}" in page


def test_findings_are_resolved_from_the_review_queue_with_the_actor(admin_client, melanie):
    finding = LintFinding.objects.create(profile=melanie, kind="stale", detail="1 of 4 items are gone")
    queue = admin_client.get("/admin/profiles/lintfinding/?status__exact=open").content.decode()
    assert "1 of 4 items are gone" in queue

    admin_client.post("/admin/profiles/lintfinding/", {"action": "resolve", "_selected_action": [finding.pk]})

    finding.refresh_from_db()
    assert finding.status == "resolved" and finding.resolved_by == "admin:admin" and finding.resolved_at


def test_staff_see_only_their_organisations_pages(client, melanie, foreign_client, add_messages, rules):
    add_messages(foreign_client, user_id="theirs", session_id="t", messages=conversation_messages())
    from apps.conversations.models import Session

    session_project(session=Session.objects.get(session_id="t"))
    theirs = Entity.objects.filter(organization=foreign_client.organization).first()
    profile_compile(entity=theirs)
    foreign_page = Profile.objects.get(entity=theirs)

    staff = staff_user(melanie.organization)
    staff.user_permissions.add(*Permission.objects.filter(content_type__app_label="profiles"))
    client.force_login(staff)
    listing = client.get("/admin/profiles/profile/").content.decode()
    assert f"/admin/profiles/profile/{melanie.pk}/change/" in listing
    assert f"/admin/profiles/profile/{foreign_page.pk}/change/" not in listing
    assert client.get(f"/admin/profiles/profile/{foreign_page.pk}/change/").status_code in (302, 404)

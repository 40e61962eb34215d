"""The end user's admin page: what the platform holds about the person, `user_id` read-only, and no plain
delete; removing a person is the erasure ("Erase this person"), which leaves none of their words anywhere."""

import pytest
from django.contrib.auth.models import Permission, User
from django.urls import reverse

from apps.conversations.models import Session
from apps.pipeline.services import task_execute
from apps.privacy.models import ErasureRequest
from apps.privacy.services.subjects import subject_resolve
from apps.privacy.services.verify import subject_fingerprint, subject_verify
from apps.skills.models import Skill
from apps.tenancy.models import EndUser, StaffMembership
from tests.privacy.conftest import ALICE, ALICE_WORD, world  # noqa: F401  (the seeded organisation)

pytestmark = pytest.mark.django_db


@pytest.fixture
def dpo(client, world):  # noqa: F811
    """Staff of the world's organisation who may view everything and erase."""
    user = User.objects.create_user("dpo", password="pw", is_staff=True)
    user.user_permissions.set(Permission.objects.all())
    StaffMembership.objects.create(user=user, organization=world.organization)
    client.force_login(user)
    return client


def alice_subject(world):  # noqa: F811
    return subject_resolve(organization=world.organization, kind="user", subject_id=ALICE)


def test_the_page_shows_what_is_held_about_the_person_with_links(dpo, world, django_assert_max_num_queries):  # noqa: F811
    alice = world.end_user(ALICE)
    with django_assert_max_num_queries(26):  # two per holding, whatever the person holds
        page = dpo.get(reverse("admin:tenancy_enduser_change", args=[alice.pk]))
    content = page.content.decode()
    assert page.status_code == 200
    for session in Session.objects.filter(end_user=alice):
        assert reverse("admin:conversations_session_change", args=[session.pk]) in content
    assert f"/admin/conversations/session/?end_user={alice.pk}" not in content  # all of them are listed already
    for skill in (world.shared_skill, world.alice_only_skill, world.alice_personal_skill):
        assert reverse("admin:skills_skill_change", args=[skill.pk]) in content
    assert "Episodic memories (1)" in content and "Semantic memories (1)" in content
    assert "/admin/memories/episodicmemory/" in content and "/admin/profiles/profile/" in content
    assert reverse("admin:privacy_erase_user", args=[alice.pk]) in content
    # Nothing of the other organisation's user of the same name.
    foreign = EndUser.objects.get(organization=world.foreign_client.organization, user_id=ALICE)
    foreign_session = Session.objects.get(end_user=foreign)
    assert reverse("admin:conversations_session_change", args=[foreign_session.pk]) not in content


def test_user_id_cannot_be_edited(dpo, world):  # noqa: F811
    alice = world.end_user(ALICE)
    url = reverse("admin:tenancy_enduser_change", args=[alice.pk])
    assert 'name="user_id"' not in dpo.get(url).content.decode()
    dpo.post(url, {"user_id": "mallory"})
    alice.refresh_from_db()
    assert alice.user_id == ALICE


def test_no_plain_delete_is_offered_one_by_one_or_in_bulk(dpo, world):  # noqa: F811
    alice = world.end_user(ALICE)
    page = dpo.get(reverse("admin:tenancy_enduser_change", args=[alice.pk])).content.decode()
    delete_url = reverse("admin:tenancy_enduser_delete", args=[alice.pk])
    assert delete_url not in page
    assert dpo.get(delete_url).status_code == 403
    assert dpo.post(delete_url, {"post": "yes"}).status_code == 403

    changelist = reverse("admin:tenancy_enduser_changelist")
    assert 'value="delete_selected"' not in dpo.get(changelist).content.decode()
    dpo.post(changelist, {"action": "delete_selected", "_selected_action": [alice.pk], "post": "yes"})
    assert EndUser.objects.filter(pk=alice.pk).exists()


def test_erasing_from_the_person_page_leaves_none_of_their_words_in_any_table(dpo, world):  # noqa: F811
    """A user taught skills; the curator removes the person from the admin: 0 words left, an erasure recorded."""
    alice = world.end_user(ALICE)
    assert Skill.objects.filter(description__icontains=ALICE_WORD).exists()
    fingerprint = subject_fingerprint(alice_subject(world))
    assert subject_verify(subject=alice_subject(world), fingerprint=fingerprint, include_redis=False)["total"] > 0

    erase_url = reverse("admin:privacy_erase_user", args=[alice.pk])
    confirmed = dpo.post(erase_url)
    assert confirmed.status_code == 302
    erasure = ErasureRequest.objects.get()
    assert (erasure.subject_id, erasure.authorized_by, erasure.requested_by_staff) == (ALICE, "staff", "dpo")
    assert task_execute(task_id=erasure.task_id, worker="test") == "succeeded"

    erasure.refresh_from_db()
    assert erasure.status == "succeeded" and erasure.residual["total"] == 0
    residual = subject_verify(subject=alice_subject(world), fingerprint=fingerprint)
    assert residual["total"] == 0 and residual["text"]["fingerprint"] > 0
    assert not EndUser.objects.filter(pk=alice.pk).exists()
    assert not Skill.objects.filter(description__icontains=ALICE_WORD).exists()

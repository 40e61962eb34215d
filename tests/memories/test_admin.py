import pytest
from django.contrib.auth.models import Permission, User

from apps.memories.services.memories import memory_update
from apps.tenancy.models import StaffMembership
from tests.factories import OrganizationFactory
from tests.memories.makers import episodic, semantic

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff_client(client, organization):
    user = User.objects.create_user("curator", password="pw", is_staff=True, is_superuser=False)
    user.user_permissions.set(Permission.objects.filter(content_type__app_label="memories"))
    StaffMembership.objects.create(user=user, organization=organization)
    client.force_login(user)
    return client


@pytest.mark.parametrize(
    "path,make",
    [
        ("episodicmemory", lambda organization, text: episodic(organization, "default", "caroline", text)),
        ("semanticmemory", lambda organization, text: semantic(organization, "default", "caroline", "Caroline", text)),
    ],
)
def test_changelists_show_only_the_staff_organisation_in_few_queries(
    staff_client, organization, django_assert_max_num_queries, path, make
):
    for index in range(8):
        make(organization, f"mine-{index}")
    make(OrganizationFactory(), "foreign-memory")
    with django_assert_max_num_queries(12):
        response = staff_client.get(f"/admin/memories/{path}/")
    assert response.status_code == 200
    content = response.content.decode()
    assert "mine-7" in content and "foreign-memory" not in content


def test_the_memory_page_shows_its_history(staff_client, organization):
    memory = episodic(organization, "default", "caroline", "Caroline went to a support group.")
    memory_update(
        memory=memory,
        fields={"details": "It was powerful."},
        source_message_ids=[],
        embedding=None,
        actor="extraction:llm:test",
        reason="more detail",
    )
    response = staff_client.get(f"/admin/memories/episodicmemory/{memory.pk}/change/")
    assert response.status_code == 200
    content = response.content.decode()
    assert "extraction:llm:test" in content and "more detail" in content and "It was powerful." in content

import pytest
from django.contrib.auth.models import User

from apps.tenancy.models import StaffMembership
from tests.skills.factories import ExperienceFactory, SkillFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff_client(client, organization):
    user = User.objects.create_user("curator", password="pw", is_staff=True, is_superuser=False)
    from django.contrib.auth.models import Permission

    user.user_permissions.set(Permission.objects.filter(content_type__app_label="skills"))
    StaffMembership.objects.create(user=user, organization=organization)
    client.force_login(user)
    return client


def test_the_skill_changelist_shows_only_the_staff_organisation_in_few_queries(
    staff_client, organization, django_assert_max_num_queries
):
    for index in range(8):
        SkillFactory(organization=organization, name=f"mine-{index}")
    SkillFactory(name="foreign-skill")
    with django_assert_max_num_queries(12):
        response = staff_client.get("/admin/skills/skill/")
    assert response.status_code == 200
    content = response.content.decode()
    assert "mine-7" in content and "foreign-skill" not in content


def test_the_skill_page_shows_its_versions(staff_client, organization, client_a, rules):
    from apps.skills.services.evolve.run import skills_evolve

    ExperienceFactory(
        organization=organization,
        content="Request: fly to Denver\nSteps:\n1. book_reservation()",
        action_signature=["book_reservation"],
    )
    skills_evolve(organization=organization, scope="default")
    from apps.skills.models import Skill

    skill = Skill.objects.get()
    response = staff_client.get(f"/admin/skills/skill/{skill.pk}/change/")
    assert response.status_code == 200
    assert "evolution:rules" in response.content.decode()


def test_the_experience_changelist_loads(staff_client, organization):
    ExperienceFactory(organization=organization, title="Check seat availability first")
    response = staff_client.get("/admin/skills/skillexperience/")
    assert response.status_code == 200 and "Check seat availability first" in response.content.decode()


def test_the_review_queue_lists_the_skills_that_would_answer_other_users_with_their_count(
    staff_client, organization, client_a, rules
):
    from apps.skills.models import SkillWithheld
    from apps.tenancy.services import end_user_get_or_create

    private = SkillFactory(organization=organization, name="private-workflow", shared=False)
    SkillFactory(organization=organization, name="already-shared", shared=True)
    for user_id in ("bob", "cat", "dan"):
        end_user = end_user_get_or_create(organization=organization, user_id=user_id)
        SkillWithheld.objects.create(organization=organization, scope=private.scope, skill=private, end_user=end_user)

    response = staff_client.get("/admin/skills/skill/review/?withheld=yes")
    assert response.status_code == 200
    content = response.content.decode()
    assert "private-workflow" in content and "already-shared" not in content
    assert 'class="field-withheld_from">3<' in content
    assert "Would answer other users" in content

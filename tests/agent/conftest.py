import pytest

from apps.profiles.models import Entity
from apps.profiles.services.compile import profile_compile
from apps.profiles.services.entities import session_project
from tests.profiles.conftest import conversation, rules, run_tasks  # noqa: F401  (shared fixtures)


@pytest.fixture
def pages(conversation, rules):  # noqa: F811
    """Caroline's conversation projected and every page compiled, offline."""
    session_project(session=conversation)
    for entity in Entity.objects.all():
        profile_compile(entity=entity)
    return {entity.name: entity.profile for entity in Entity.objects.select_related("profile")}

import pytest
from django.utils import timezone

from apps.pipeline.models import MemoryTask
from apps.pipeline.services import task_execute
from apps.profiles.models import Entity
from apps.profiles.services.compile import profile_compile
from apps.profiles.services.entities import session_project
from harness.fake_openai import fake_openai  # noqa: F401  (the scripted LLM server fixture)
from tests.profiles.makers import conversation_messages


@pytest.fixture
def rules(settings):
    settings.LLM_PROVIDER = "rules"


@pytest.fixture
def run_tasks():
    """Runs the queued tasks (of these types, or all) now, in this process, as a worker would."""

    def run(*task_types) -> list[MemoryTask]:
        done = []
        while True:
            queued = MemoryTask.objects.filter(status__in=MemoryTask.CLAIMABLE_STATUSES)
            if task_types:
                queued = queued.filter(task_type__in=task_types)
            pending = list(queued.order_by("created_at"))
            if not pending:
                return done
            MemoryTask.objects.filter(pk__in=[task.pk for task in pending]).update(run_after=timezone.now())
            for task in pending:
                task_execute(task_id=task.pk, worker="test")
                task.refresh_from_db()
                done.append(task)

    return run


@pytest.fixture
def conversation(client_a, add_messages):
    """Caroline's conversation with Melanie, as one session of user `caroline`."""
    add_messages(client_a, user_id="caroline", session_id="chat-1", messages=conversation_messages())
    from apps.conversations.models import Session

    return Session.objects.select_related("organization", "end_user").get(session_id="chat-1")


@pytest.fixture
def pages(conversation, rules):
    """Caroline's conversation projected and every page compiled, offline."""
    session_project(session=conversation)
    for entity in Entity.objects.all():
        profile_compile(entity=entity)
    return {entity.name: entity.profile for entity in Entity.objects.select_related("profile")}

"""The admin home page (memory_platform/dashboard.py and the cards the apps register): what needs a person, counted per organisation."""

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from apps.pipeline.models import MemoryTask, ProcessHeartbeat
from apps.pipeline.services import heartbeat_record
from apps.skills.services.review import skill_approve
from tests.admin.makers import TASK_MESSAGES, pending_skill
from tests.skills.factories import ExperienceFactory, task_session

pytestmark = pytest.mark.django_db


def tiles(response) -> dict:
    return {
        (group, tile.label): (tile.count, tile.url)
        for group, group_tiles in response.context["groups"]
        for tile in group_tiles
    }


@pytest.fixture
def scene(organization, client_a, client_b):
    for name in ("one", "two", "three"):
        pending_skill(organization, name)
    skill_approve(skill=pending_skill(organization, "live"), actor="admin:ann")
    ExperienceFactory(organization=organization)
    ExperienceFactory(organization=organization, status="consumed")
    task_session(client_a, messages=TASK_MESSAGES, session_id="waiting")
    task_session(client_a, messages=TASK_MESSAGES, session_id="open", seal=False)
    MemoryTask.objects.create(
        task_type="distill_session", organization=organization, status="dead", idempotency_key="x"
    )
    MemoryTask.objects.create(
        task_type="distill_session", organization=organization, status="failed", idempotency_key="y"
    )
    # Another organisation's backlog must not show up.
    pending_skill(client_b.organization, "theirs")
    ExperienceFactory(organization=client_b.organization)
    task_session(client_b, messages=TASK_MESSAGES, session_id="theirs")
    MemoryTask.objects.create(
        task_type="distill_session", organization=client_b.organization, status="dead", idempotency_key="z"
    )


def test_the_index_counts_the_staff_organisations_backlog_with_links(
    curator_client, scene, django_assert_max_num_queries
):
    with django_assert_max_num_queries(13):  # two read the beat and worker heartbeats and the task backlog
        response = curator_client.get("/admin/")
    counts = tiles(response)
    assert counts[("Skills", "Pending review")] == (3, "/admin/skills/skill/review/")
    assert counts[("Skills", "Active")] == (1, "/admin/skills/skill/?status__exact=active")
    assert counts[("Skills", "Archived")][0] == 0
    assert counts[("Experiences", "Pending evolution")] == (1, "/admin/skills/skillexperience/?status__exact=pending")
    awaiting_count, awaiting_url = counts[("Sessions", "Awaiting distillation")]
    assert awaiting_count == 1
    assert counts[("Tasks", "Dead")] == (1, "/admin/pipeline/memorytask/?status__exact=dead")
    assert counts[("Tasks", "Failed, retrying")][0] == 1
    assert 'data-tile="skills-pending-review"' in response.content.decode()

    # Every link opens a list filtered to what was counted.
    listed = curator_client.get(awaiting_url).context["cl"]
    assert [session.session_id for session in listed.result_list] == ["waiting"]
    assert curator_client.get("/admin/pipeline/memorytask/?status__exact=dead").context["cl"].result_count == 1


def test_a_superuser_sees_every_organisation(client, scene):
    client.force_login(get_user_model().objects.create_superuser("root", password="x"))
    counts = tiles(client.get("/admin/"))
    assert counts[("Skills", "Pending review")][0] == 4
    assert counts[("Sessions", "Awaiting distillation")][0] == 2


def test_staff_without_an_organisation_see_no_dashboard(client, scene):
    user = get_user_model().objects.create_user("drifter", password="x", is_staff=True)
    client.force_login(user)
    response = client.get("/admin/")
    assert response.status_code == 200 and response.context["groups"] == []


def test_the_index_shows_the_backlog_and_flags_a_task_due_too_long(admin_client, settings, organization):
    settings.PROCESS_STALE_AFTER_SECONDS = 60
    MemoryTask.objects.create(
        task_type="test_noop", organization=organization, run_after=timezone.now() - timedelta(minutes=3)
    )
    MemoryTask.objects.create(
        task_type="test_noop", organization=organization, run_after=timezone.now() + timedelta(hours=1)
    )

    _, _, due, oldest = dict(admin_client.get("/admin/").context["groups"])["Machinery"]

    assert (due.count, oldest.count) == (1, "3 min ago"), "the task waiting for its time is not due"
    assert due.attention and oldest.attention
    assert admin_client.get(due.url).status_code == 200


def test_the_index_warns_when_beat_or_the_workers_are_silent(admin_client, settings):
    settings.PROCESS_STALE_AFTER_SECONDS = 60
    counts = tiles(admin_client.get("/admin/"))
    assert counts[("Machinery", "Beat: last tick")] == ("never", "/admin/django_celery_beat/periodictask/")
    page = admin_client.get("/admin/").content.decode()
    assert 'class="tile attention" href="/admin/django_celery_beat/periodictask/"' in page

    heartbeat_record(kind="beat", hostname="beat-host", started_at=timezone.now())
    heartbeat_record(kind="worker", hostname="celery@a", started_at=timezone.now())
    ProcessHeartbeat.objects.filter(kind="worker").update(seen_at=timezone.now() - timedelta(minutes=3))
    groups = dict(admin_client.get("/admin/").context["groups"])
    beat, worker, due, oldest = groups["Machinery"]
    assert (due.count, due.attention, oldest.count) == (0, False, "none waiting")
    assert not beat.attention and beat.count.endswith("s ago")
    assert worker.attention and worker.count == "3 min ago" and worker.label.startswith("Workers alive: 0")
    assert admin_client.get(worker.url).status_code == 200

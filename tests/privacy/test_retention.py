"""Retention: only turns learned from before the window go; undistilled turns never; 0 disables it."""

from datetime import timedelta

import pytest
from django.utils import timezone

from apps.conversations.models import Message, Session
from apps.core.schedules import SCHEDULES
from apps.pipeline.models import MemoryTask
from apps.pipeline.services import task_execute
from apps.privacy.services.retention import retention_prune
from apps.privacy.tasks import enqueue_retention
from apps.profiles.models import Entity, Profile
from apps.profiles.services.compile import profile_compile
from apps.profiles.services.entities import session_project
from apps.skills.models import Skill, SkillExperience
from tests.privacy.conftest import run_tasks, tool_messages
from tests.skills.factories import task_session

pytestmark = pytest.mark.django_db


def _learned(session, *, days_ago, column="distilled_at"):
    """Marks a session and its turns as learned from `days_ago` days ago."""
    when = timezone.now() - timedelta(days=days_ago)
    Session.objects.filter(pk=session.pk).update(**{column: when})
    Message.objects.filter(session=session).update(learned_at=when)


@pytest.fixture
def sessions(client_a, add_messages, settings):
    settings.LLM_PROVIDER = "rules"
    old = task_session(
        client_a,
        session_id="old",
        messages=tool_messages("Book a flight to Lisbon for the conference", ["search_flights"]),
    )
    recent = task_session(
        client_a,
        session_id="recent",
        messages=tool_messages("Book a flight to Porto for the weekend", ["search_flights"]),
    )
    add_messages(
        client_a,
        "user-1",
        "chat-old",
        [{"role": "user", "content": "I moved to Lisbon"}, {"role": "assistant", "content": "Nice"}],
    )
    chat = Session.objects.get(session_id="chat-old")
    run_tasks(task_type="distill_session")
    _learned(old, days_ago=40)
    _learned(recent, days_ago=10)
    _learned(chat, days_ago=40, column="extracted_at")
    # A turn added after the last extraction: nothing learned from it yet.
    add_messages(client_a, "user-1", "chat-old", [{"role": "user", "content": "And I adopted a cat"}])
    return {"old": old, "recent": recent, "chat": chat}


def test_only_turns_learned_from_before_the_window_are_pruned_and_undistilled_ones_never(sessions, settings):
    settings.CONVERSATION_RETENTION_DAYS = 30
    kept_recent = set(Message.objects.filter(session=sessions["recent"]).values_list("pk", flat=True))
    experiences = SkillExperience.objects.count()

    task_id = enqueue_retention()
    assert task_execute(task_id=task_id, worker="test") == "succeeded"

    result = MemoryTask.objects.get(pk=task_id).result
    assert result["enabled"] and result["messages"] == 2 + len(tool_messages("x", ["search_flights"]))
    assert result["per_organization"] == {str(sessions["old"].organization_id): result["messages"]}
    assert not Message.objects.filter(session=sessions["old"]).exists()
    assert set(Message.objects.filter(session=sessions["recent"]).values_list("pk", flat=True)) == kept_recent
    assert list(Message.objects.filter(session=sessions["chat"]).values_list("content", flat=True)) == [
        "And I adopted a cat"
    ]
    assert Session.objects.get(pk=sessions["chat"].pk).message_count == 1
    assert Session.objects.get(pk=sessions["old"].pk).message_count == 0
    assert SkillExperience.objects.count() == experiences  # the lessons learned stay


def test_zero_keeps_transcripts_forever(sessions, settings):
    settings.CONVERSATION_RETENTION_DAYS = 0
    messages = Message.objects.count()
    assert retention_prune() == {"enabled": False}
    assert Message.objects.count() == messages


def test_evidence_quotes_are_cut_to_the_limit_and_the_skill_change_is_a_version(sessions, settings):
    settings.EVIDENCE_MAX_CHARS = 12
    from apps.skills.services.evolve.run import skills_evolve

    skills_evolve(organization=sessions["old"].organization, scope="default")
    skill = Skill.objects.get()
    assert any(len(example["request"]) > 12 for example in skill.examples)

    result = retention_prune()

    assert result["experience_quotes_truncated"] >= 2 and result["skills_examples_truncated"] == 1
    assert all(len(quote) <= 12 for quote in SkillExperience.objects.values_list("evidence__quote", flat=True))
    skill.refresh_from_db()
    assert all(len(example["request"]) <= 12 for example in skill.examples)
    assert skill.versions.order_by("-version").first().actor == "retention"
    assert retention_prune()["skills_examples_truncated"] == 0


def test_retention_runs_daily_from_beat():
    assert SCHEDULES["privacy: prune transcripts past retention"] == ("privacy.enqueue_retention", 86400)


def test_a_page_quoting_a_pruned_turn_gets_its_finding_in_the_same_run(sessions, settings):
    settings.CONVERSATION_RETENTION_DAYS = 30
    session_project(session=sessions["chat"])
    (entity,) = Entity.objects.filter(is_user=True)
    profile_compile(entity=entity)
    page = Profile.objects.get(entity=entity)
    assert "I moved to Lisbon" in page.markdown and "I adopted a cat" in page.markdown

    result = retention_prune()

    assert result["messages"] and result["profiles_lint"]["stale"] == 1
    (finding,) = page.findings.all()
    assert finding.kind == "stale" and finding.status == "open"
    assert MemoryTask.objects.filter(
        task_type="compile_profile", payload={"entity": str(entity.pk)}, status="queued"
    ).exists()

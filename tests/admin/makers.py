"""Curation scenes for the admin tests: staff of one organisation, skills with versions and
lineage made through the real services."""

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission

from apps.conversations.models import Message
from apps.skills.models import Skill, SkillExperience
from apps.skills.services.skills import skill_create, skill_update
from apps.tenancy.models import StaffMembership
from tests.skills.factories import task_session

PASSWORD = "curate-with-care"
STAFF_PERMISSIONS = {
    "skills": None,  # every skills permission
    "conversations": ["view_session", "change_session"],
    "pipeline": ["view_memorytask"],
}

TASK_MESSAGES = [
    {"role": "user", "content": "Please book me a flight from NYC to Seattle on May 3."},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "search_flights", "arguments": '{"date": "05-03"}'}},
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "Error: date must be YYYY-MM-DD"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "c2",
                "type": "function",
                "function": {"name": "search_flights", "arguments": '{"date": "2024-05-03"}'},
            },
        ],
    },
    {"role": "tool", "tool_call_id": "c2", "content": "HAT001 08:00 $120"},
    {"role": "user", "content": "Great, that works, thanks!"},
]


def staff_user(organization, username="curator"):
    user = get_user_model().objects.create_user(username, password=PASSWORD, is_staff=True)
    for app_label, codenames in STAFF_PERMISSIONS.items():
        permissions = Permission.objects.filter(content_type__app_label=app_label)
        if codenames is not None:
            permissions = permissions.filter(codename__in=codenames)
        user.user_permissions.add(*permissions)
    StaffMembership.objects.create(user=user, organization=organization)
    return user


def pending_skill(organization, name: str, **fields) -> Skill:
    return skill_create(
        organization=organization,
        scope="default",
        fields={
            "name": name,
            "description": f"How to {name.replace('-', ' ')}.",
            "instructions": "1. search_flights(date)\n2. book_reservation(flight)",
            "entry_type": "workflow",
            **fields,
        },
        actor="evolution:rules",
        reason="test",
        status=Skill.Status.PENDING_REVIEW,
    )


def skill_with_lineage(client) -> tuple[Skill, SkillExperience, Message]:
    """A pending skill created from an experience whose evidence is the tool-error turn of a real
    task session, then edited by evolution (so it has two versions with a diff)."""
    session = task_session(client, messages=TASK_MESSAGES, session_id="book-seattle")
    error_turn = Message.objects.get(session=session, content__contains="YYYY-MM-DD")
    experience = SkillExperience.objects.create(
        organization=client.organization,
        scope="default",
        end_user=session.end_user,
        session=session,
        source_message_ids=[error_turn.pk],
        experience_type="worth_avoiding",
        title="Dates must be ISO formatted for search_flights",
        content="Pass dates as YYYY-MM-DD.",
        importance=0.8,
        credibility=0.9,
        evidence={"quote": "Error: date must be YYYY-MM-DD", "signal_type": "tool_error"},
        created_by=client,
        action_signature=["search_flights"],
    )
    skill = pending_skill(client.organization, "book-a-flight")
    skill = skill_update(
        skill=skill,
        changes={"instructions": "1. search_flights(date as YYYY-MM-DD)\n2. book_reservation(flight)"},
        actor="evolution:rules",
        reason="caveat from a tool error",
        experiences=[experience],
        status=Skill.Status.PENDING_REVIEW,
    )
    return skill, experience, error_turn

import json

import pytest
from django.core.management import CommandError, call_command

from apps.conversations.models import Session
from apps.skills.models import Skill, SkillExperience
from tests.fixtures import tau_trajectories
from tests.skills.factories import tau_session

pytestmark = pytest.mark.django_db


def _successes(count):
    return [item for item in tau_trajectories() if item["reward"] >= 1.0 and item["info"]["task"]["actions"]][:count]


def test_distill_all_sealed_with_evolution_as_json(client_a, rules, capsys):
    for trajectory in _successes(3):
        tau_session(client_a, trajectory)

    call_command("distill", "--all-sealed", "--evolve", "--json")

    summary = json.loads(capsys.readouterr().out)
    assert summary["sessions"] == 3 and summary["errors"] == 0
    assert summary["experiences"] == SkillExperience.objects.count() > 0
    assert not Session.objects.filter(distilled_at__isnull=True).exists()
    assert summary["evolutions"] and Skill.objects.exists()
    assert not SkillExperience.objects.filter(status="pending").exists()


def test_distill_one_session_by_session_id_and_user(client_a, rules, capsys):
    (trajectory,) = _successes(1)
    session = tau_session(client_a, trajectory, session_id="one", user_id="mia")
    call_command("distill", "--session", "one", "--user", "mia")
    assert "Distilled 1 sessions" in capsys.readouterr().out
    session.refresh_from_db()
    assert session.distilled_at is not None
    call_command("distill", "--session", str(session.pk), "--json")
    assert json.loads(capsys.readouterr().out)["results"][0]["skipped"] == "already distilled"


def test_distill_reports_unknown_sessions_and_open_ones(client_a, rules, add_messages, capsys):
    with pytest.raises(CommandError):
        call_command("distill", "--session", "missing", "--user", "nobody")
    with pytest.raises(CommandError):
        call_command("distill", "--session", "not-a-uuid")
    add_messages(client_a, user_id="u", session_id="open", session_tag="task")
    call_command("distill", "--session", "open", "--user", "u", "--json")
    assert "not sealed" in json.loads(capsys.readouterr().out)["results"][0]["error"]

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from apps.conversations.models import Message, Session
from tests.fixtures import tau_trajectories

pytestmark = pytest.mark.django_db


def test_import_sessions_ingests_tau_trajectories_as_sealed_task_sessions(client_a, tmp_path):
    trajectories = tau_trajectories()[:3]
    path = tmp_path / "tau.json"
    path.write_text(json.dumps(trajectories))
    out = StringIO()
    call_command(
        "import_sessions",
        str(path),
        "--org",
        client_a.organization.name,
        "--client",
        client_a.name,
        "--tag",
        "task",
        "--json",
        stdout=out,
    )
    result = json.loads(out.getvalue())
    assert result == {"sessions": 3, "skipped": 0, "messages": sum(len(item["traj"]) for item in trajectories)}
    sessions = Session.objects.order_by("session_id")
    assert {session.status for session in sessions} == {"sealed"}
    assert {session.session_tag for session in sessions} == {"task"}
    expected = {
        f"tau-{item['task_id']}-{item['trial']}": ("success" if item["reward"] == 1.0 else "failure")
        for item in trajectories
    }
    assert {session.session_id: session.outcome for session in sessions} == expected
    assert Message.objects.filter(role="tool").exclude(content__startswith="[").count() == 0

    # Re-importing skips the sealed sessions instead of failing or duplicating.
    call_command(
        "import_sessions",
        str(path),
        "--org",
        client_a.organization.name,
        "--client",
        client_a.name,
        "--json",
        stdout=StringIO(),
        stderr=StringIO(),
    )
    assert Message.objects.count() == result["messages"]


def test_import_sessions_errors(client_a, tmp_path):
    with pytest.raises(CommandError, match="No client"):
        call_command("import_sessions", "x.json", "--org", "nope", "--client", "nope")
    with pytest.raises(CommandError, match="Cannot read"):
        call_command(
            "import_sessions",
            str(tmp_path / "missing.json"),
            "--org",
            client_a.organization.name,
            "--client",
            client_a.name,
        )

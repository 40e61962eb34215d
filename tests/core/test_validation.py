"""The validation rules beyond the API's edge: the import command, the admin and the services
that tasks and the admin call refuse what cannot be stored, with an error that names the field."""

import json
from io import StringIO

import pytest
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command

from apps.conversations.models import Message, Session
from apps.conversations.turns import TurnError, normalise_messages
from apps.core.validation import InputError, loads, parse_datetime_strict
from apps.skills.models import Skill
from apps.skills.services.skills import skill_update
from tests.admin.makers import pending_skill, staff_user


@pytest.mark.parametrize(
    "text,problem",
    [
        ('{"a": NaN}', "NaN"),
        ('{"a": -Infinity}', "Infinity"),
        ('{"a": 1e999}', "out of range"),
        ('{"a": "\\u0000"}', "a: Must not contain NUL"),
        ('{"a": ["\\udfff"]}', "a.0: Must not contain unpaired"),
        ("[" * 50 + "]" * 50, "nested deeper than 32"),
        ("[" * 100000, "nested deeper than 32"),
        ("{", "Not valid JSON"),
        (b'"\xff"', "Not UTF-8"),
    ],
)
def test_loads_refuses_what_cannot_be_stored(text, problem):
    with pytest.raises(InputError) as caught:
        loads(text)
    assert problem in str(caught.value)


@pytest.mark.parametrize(
    "text,stored",
    [
        ("1900-01-01T00:00:00+23:59", "1899-12-31T00:01:00+00:00"),
        ("2199-12-31T23:59:59-23:59", "2200-01-01T23:58:59+00:00"),
        ("2024-02-29T12:00:00", "2024-02-29T12:00:00+00:00"),
        ("2024-06-01 08:30:00.123456+02:00", "2024-06-01T06:30:00.123456+00:00"),
    ],
)
def test_dates_in_the_window_are_stored_as_utc(text, stored):
    assert parse_datetime_strict(text, field="at").isoformat() == stored


def test_normalise_messages_names_the_message_and_field():
    with pytest.raises(TurnError) as caught:
        normalise_messages(
            [{"role": "user", "content": "fine"}, {"role": "user", "content": "x", "metadata": {"k": "\x00"}}],
            max_chars=100,
            default_occurred_at=parse_datetime_strict("2024-01-01T00:00:00Z", field=""),
        )
    assert caught.value.errors == {1: {"metadata.k": ["Must not contain NUL characters (\\u0000)."]}}


@pytest.mark.django_db
def test_import_sessions_skips_a_session_it_cannot_store_and_says_why(tmp_path, client_a):
    path = tmp_path / "sessions.json"
    path.write_text(
        json.dumps(
            [
                {"session_id": "good", "user_id": "u1", "messages": [{"role": "user", "content": "hello"}]},
                {"session_id": "nul", "user_id": "u1", "messages": [{"role": "user", "content": "a\x00b"}]},
                {
                    "session_id": "dates",
                    "user_id": "u1",
                    "messages": [{"role": "user", "content": "x", "occurred_at": "0001-01-01T00:00:00+05:00"}],
                },
                {"session_id": "bad id!", "user_id": "u1", "messages": [{"role": "user", "content": "x"}]},
                {"session_id": "user", "user_id": "u\x00", "messages": [{"role": "user", "content": "x"}]},
            ]
        )
    )
    out, err = StringIO(), StringIO()
    call_command(
        "import_sessions",
        str(path),
        "--org",
        client_a.organization.name,
        "--client",
        client_a.name,
        "--json",
        stdout=out,
        stderr=err,
    )
    assert json.loads(out.getvalue()) == {"sessions": 1, "skipped": 4, "messages": 1}
    assert "'nul'" in err.getvalue() and "content" in err.getvalue()
    assert "years 1900 to 2199" in err.getvalue()
    assert "session_id: Use 1-64 letters" in err.getvalue() and "user_id: Must not contain NUL" in err.getvalue()
    assert list(Session.objects.values_list("session_id", flat=True)) == ["good"]
    assert Message.objects.count() == 1


@pytest.mark.django_db
@pytest.mark.parametrize("content", ['[{"role": "user", "content": NaN}]', "[" * 5000, '{"traj": 5}', "[5]"])
def test_import_sessions_refuses_a_file_it_cannot_read(tmp_path, client_a, content):
    path = tmp_path / "sessions.json"
    path.write_text(content)
    with pytest.raises(CommandError):
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
    assert Session.objects.count() == 0


@pytest.mark.django_db
def test_the_skill_services_refuse_unstorable_fields(organization):
    skill = pending_skill(organization, "seat-change")
    with pytest.raises(ValidationError) as caught:
        skill_update(skill=skill, changes={"instructions": "a\x00b"}, actor="test", reason="")
    assert caught.value.message_dict == {"instructions": ["Must not contain NUL characters (\\u0000)."]}
    with pytest.raises(ValidationError):
        skill_update(skill=skill, changes={"triggers": [float("nan")]}, actor="test", reason="")
    skill.refresh_from_db()
    assert skill.version == 1


@pytest.mark.django_db
@pytest.mark.parametrize(
    "field,value,problem",
    [
        ("triggers", '["a", NaN]', "NaN"),
        ("triggers", "[" * 3000 + "]" * 3000, "nested deeper than 32"),
        ("examples", '["\\u0000"]', "0: Must not contain NUL"),
        ("instructions", "step\x00one", "Null characters are not allowed."),
    ],
)
def test_the_admin_form_refuses_unstorable_fields(client, organization, field, value, problem):
    client.force_login(staff_user(organization))
    skill = pending_skill(organization, "seat-change")
    form = {
        "name": "seat-change",
        "entry_type": "guide",
        "description": skill.description,
        "instructions": skill.instructions,
        "triggers": "[]",
        "examples": "[]",
        "change_reason": "",
        "versions-TOTAL_FORMS": "0",
        "versions-INITIAL_FORMS": "1",
        "versions-MIN_NUM_FORMS": "0",
        "versions-MAX_NUM_FORMS": "0",
        field: value,
    }
    response = client.post(f"/admin/skills/skill/{skill.pk}/change/", form)
    assert response.status_code == 200
    errors = response.context["adminform"].form.errors
    assert problem in " ".join(errors[field])
    assert Skill.objects.get(pk=skill.pk).version == 1


@pytest.mark.django_db
@pytest.mark.parametrize(
    "page",
    [
        "/admin/conversations/session/?outcome__exact=%00",
        "/admin/skills/skill/?status__exact=a%00",
        "/admin/skills/skill/?q=a%00b",
        "/admin/pipeline/memorytask/?status__exact=%00",
        "/admin/?next=%00",
    ],
)
def test_admin_pages_refuse_a_nul_in_the_query_string(admin_client, page):
    response = admin_client.get(page)
    assert response.status_code == 400
    assert "must not contain NUL" in response.content.decode()
    assert admin_client.get(page.split("?")[0]).status_code == 200

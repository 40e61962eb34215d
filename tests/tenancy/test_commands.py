import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from apps.tenancy.models import Client, ClientAPIKey, Organization
from apps.tenancy.selectors import client_for_api_key

pytestmark = pytest.mark.django_db


def run(*args) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def test_create_organization_client_and_revoke_with_json():
    org = json.loads(run("create_organization", "Acme", "--json"))
    assert Organization.objects.get(pk=org["id"]).name == "Acme"

    created = json.loads(
        run(
            "create_client",
            "--org",
            "Acme",
            "--name",
            "bot",
            "--write-scope",
            "team-a",
            "--read-scopes",
            "team-a,shared",
            "--json",
        )
    )
    assert created["read_scopes"] == ["team-a", "shared"] and created["can_erase"] is False
    client, _ = client_for_api_key(raw_key=created["api_key"])
    assert client.name == "bot" and client.write_scope == "team-a"

    prefix = created["api_key"].split("_")[1]
    revoked = json.loads(run("revoke_api_key", prefix, "--json"))
    assert revoked["prefix"] == prefix
    assert ClientAPIKey.objects.get(prefix=prefix).revoked_at is not None
    assert client_for_api_key(raw_key=created["api_key"]) is None


def test_can_erase_is_off_unless_asked_for():
    run("create_organization", "Acme")
    run("create_client", "--org", "Acme", "--name", "bot", "--write-scope", "team-a")
    out = run("create_client", "--org", "Acme", "--name", "dpo", "--can-erase")
    assert "can erase: yes" in out
    assert {client.name: client.can_erase for client in Client.objects.all()} == {"bot": False, "dpo": True}


def test_managing_webhooks_is_off_unless_asked_for():
    run("create_organization", "Acme")
    run("create_client", "--org", "Acme", "--name", "bot", "--write-scope", "team-a")
    out = run("create_client", "--org", "Acme", "--name", "ops", "--can-manage-webhooks", "--json")
    assert json.loads(out)["can_manage_webhooks"] is True
    assert {client.name: client.can_manage_webhooks for client in Client.objects.all()} == {"bot": False, "ops": True}


def test_read_only_client_defaults_to_no_read_scopes_and_human_output():
    run("create_organization", "Acme")
    out = run("create_client", "--org", "Acme", "--name", "reader")
    assert "API key (shown once" in out
    client = Client.objects.get(name="reader")
    assert client.write_scope is None and client.read_scopes == []


def test_errors_are_clear():
    with pytest.raises(CommandError, match="No organisation named 'Nope'"):
        run("create_client", "--org", "Nope", "--name", "x")
    run("create_organization", "Acme")
    with pytest.raises(CommandError, match="already exists"):
        run("create_organization", "Acme")
    with pytest.raises(CommandError, match="Invalid scope"):
        run("create_client", "--org", "Acme", "--name", "x", "--write-scope", "has space")
    with pytest.raises(CommandError, match="No API key with prefix"):
        run("revoke_api_key", "zzzzzzzz")

"""Vectors made by another model than the configured one are reported, never silently mixed:
`manage.py check --database default` (and migrate, and a starting worker or beat) and /readyz."""

from io import StringIO

import pytest
from django.core.checks import run_checks
from django.core.management import call_command

from apps.search.selectors import foreign_embedding_models
from tests.search.makers import MAKERS

pytestmark = pytest.mark.django_db


@pytest.fixture
def stored(client_a, add_messages):
    """A turn and a skill embedded by the suite's model (hash-384)."""
    MAKERS["message"](client_a, "alice", "we went camping in Yosemite", add_messages)
    MAKERS["procedural"](client_a, "alice", "book a flight after checking the profile")


def test_one_model_everywhere_is_not_reported(stored, client):
    assert foreign_embedding_models() == {}
    assert [message for message in run_checks(databases=["default"]) if message.id == "search.W002"] == []
    assert client.get("/readyz").json()["embeddings"] == "ok"


def test_vectors_of_another_model_are_reported_with_the_command_that_moves_them(stored, client, settings):
    settings.EMBEDDING_PROVIDER, settings.EMBEDDING_MODEL = "e5", "multilingual-e5-small-q4"
    assert foreign_embedding_models() == {"message": ["hash-384"], "procedural": ["hash-384"]}

    (warning,) = [message for message in run_checks(databases=["default"]) if message.id == "search.W002"]
    assert warning.msg == (
        "Stored vectors were made by another model than the configured e5:multilingual-e5-small-q4 "
        "(message: hash-384; procedural: hash-384); searches find those items by keywords only. "
        "Run `python manage.py reembed` to move them."
    )
    output = StringIO()
    call_command("check", databases=["default"], stdout=output, stderr=output)
    assert "python manage.py reembed" in output.getvalue()
    # Plain `check` runs no database checks (Django's rule), so it stays usable without a database.
    assert [message for message in run_checks() if message.id == "search.W002"] == []

    response = client.get("/readyz")
    assert response.status_code == 200  # searches still answer; the operator is told
    assert "python manage.py reembed" in response.json()["embeddings"]

"""Export: the archive format, and a person's archive is exactly what erasing them would delete."""

import hashlib
import json
import zipfile
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from apps.conversations.models import Message
from apps.portability.archive import FORMAT, FORMAT_VERSION, vector_decode
from apps.portability.kinds import KINDS
from apps.portability.services.export import Selection, archive_export
from apps.privacy.services.subjects import subject_resolve
from apps.privacy.services.verify import subject_checks
from apps.profiles.models import Profile
from apps.profiles.services.compile import page_store
from apps.providers.embeddings import embedding_model_name
from tests.factories import ClientFactory
from tests.portability.conftest import archive_rows, manifest_of
from tests.privacy.conftest import ALICE, ALICE_WORD, BOB, BOB_WORD

pytestmark = pytest.mark.django_db


def export(*args) -> dict:
    out = StringIO()
    call_command("export", *args, "--json", stdout=out)
    return json.loads(out.getvalue())


def test_the_manifest_names_the_format_model_counts_and_checksums(world, out, settings):
    manifest = export("--org", world.organization.name, "--out", str(out))
    assert manifest == manifest_of(out) | {"path": str(out)}
    assert manifest["format"] == FORMAT and manifest["format_version"] == FORMAT_VERSION
    assert (
        manifest["embedding_model"] == embedding_model_name()
        and manifest["embedding_dimensions"] == settings.EMBEDDING_DIMENSIONS
    )
    assert manifest["platform_version"] and manifest["selection"] == {
        "kind": "organization",
        "organization": world.organization.name,
    }
    with zipfile.ZipFile(out) as archive:
        for name, entry in manifest["files"].items():
            body = archive.read(name)
            assert entry == {"rows": body.count(b"\n"), "bytes": len(body), "sha256": hashlib.sha256(body).hexdigest()}
    rows = archive_rows(out)
    assert len(rows["messages"]) == Message.objects.filter(organization=world.organization).count()
    # Vectors travel as base64 float32 and decode to the stored ones.
    row = next(row for row in rows["messages"] if row["embedding"])
    stored = Message.objects.get(pk=row["id"]).embedding
    assert vector_decode(row["embedding"], dimensions=settings.EMBEDDING_DIMENSIONS) == pytest.approx(
        list(stored), abs=1e-6
    )
    # Nothing of the other organisation, no secrets, no generated columns.
    assert "Foreign" not in out.read_bytes().decode("latin-1")
    assert all("search_vector" not in row and "hashed_key" not in row for kind in rows.values() for row in kind)


def test_a_scope_export_holds_that_scope_only(world, out, add_messages):
    other = ClientFactory(
        organization=world.organization, name="other-scope", write_scope="other", read_scopes=["other"]
    )
    add_messages(other, "carol", "elsewhere", [{"role": "user", "content": "kept in another scope"}])
    export("--org", world.organization.name, "--scope", "default", "--out", str(out))
    rows = archive_rows(out)
    assert rows["sessions"] and {row["scope"] for kind in rows.values() for row in kind if "scope" in row} == {
        "default"
    }
    assert "carol" not in {row["user_id"] for row in rows["end_users"]}
    export("--org", world.organization.name, "--scope", "other", "--out", str(out))
    rows = archive_rows(out)
    assert [row["content"] for row in rows["messages"]] == ["kept in another scope"]
    assert [row["user_id"] for row in rows["end_users"]] == ["carol"] and [row["name"] for row in rows["clients"]] == [
        "other-scope"
    ]


@pytest.mark.parametrize("kind, who", [("user", ALICE), ("client", "client_c")])
def test_a_subjects_archive_holds_every_row_erasing_them_would_delete(world, out, kind, who):
    """Fails when a table that erasure covers (apps.privacy.services.verify.subject_checks) is left
    out of the archive, or when any of its rows is."""
    subject_id = who if kind == "user" else str(world.client_c.pk)
    subject = subject_resolve(organization=world.organization, kind=kind, subject_id=subject_id)
    archive_export(selection=Selection(organization=world.organization, kind=kind, subject=subject), path=out)
    rows = archive_rows(out)
    by_model = {spec.model: spec.name for spec in KINDS}
    for label, queryset in subject_checks(subject):
        assert queryset.model in by_model, f"{label}: erasure covers it, the export has no file for it"
        exported = {str(row["id"]) for row in rows[by_model[queryset.model]]}
        missing = {str(pk) for pk in queryset.values_list("pk", flat=True)} - exported
        assert not missing, f"{label}: {len(missing)} row(s) erasure would delete are not in the archive"
    assert sum(len(kind_rows) for kind_rows in rows.values()) > 10


def test_a_persons_archive_carries_no_other_persons_rows(world, out):
    export("--org", world.organization.name, "--user", ALICE, "--out", str(out))
    rows = archive_rows(out)
    alice = str(world.end_user(ALICE).pk)
    assert [row["user_id"] for row in rows["end_users"]] == [ALICE]
    owned = [row for kind in rows.values() for row in kind if "end_user_id" in row]
    assert owned and {row["end_user_id"] for row in owned} <= {alice, None}
    with zipfile.ZipFile(out) as archive:
        text = b"".join(archive.read(name) for name in archive.namelist()).decode()
    assert ALICE_WORD in text.lower() and BOB_WORD not in text.lower() and BOB not in text


def test_pages_that_quote_another_person_carry_none_of_their_words_into_a_persons_archive(world, out):
    """Alice's page quotes a turn of Bob's (a group conversation) and Bob's page quotes one of Alice's.
    Her archive keeps her page's text and its citation of Bob's turn as a bare reference (type and id),
    and lists Bob's revision (erasing her deletes it) with her words only: no quote of Bob, no text of his page."""
    alice, bob = world.end_user(ALICE), world.end_user(BOB)
    alice_turn = Message.objects.get(end_user=alice, session__session_id="chat-1", role="user")
    bob_turn = Message.objects.get(end_user=bob, session__session_id="chat-1", role="user")
    alice_page, bob_page = Profile.objects.filter(end_user=alice).first(), Profile.objects.filter(end_user=bob).first()

    def store(page, markdown, *turns):
        sources = {
            ("message", str(t.pk)): {"item_type": "message", "item_id": str(t.pk), "quote": t.content} for t in turns
        }
        page_store(
            profile=page,
            candidate=Profile(name=page.name, markdown=markdown),
            sources=sources,
            model="rules",
            usage={},
            reason="group conversation",
        )

    store(alice_page, "Went on a group trip.", alice_turn, bob_turn)
    store(bob_page, f"Hiked near {BOB_WORD.title()}, with Alice.", bob_turn, alice_turn)
    export("--org", world.organization.name, "--user", ALICE, "--out", str(out))
    rows = archive_rows(out)
    with zipfile.ZipFile(out) as archive:
        text = b"".join(archive.read(name) for name in archive.namelist()).decode()
    assert BOB_WORD not in text.lower() and bob_turn.content not in text and alice_turn.content in text

    own = next(
        row
        for row in rows["profile_revisions"]
        if row["profile_id"] == str(alice_page.pk) and row["number"] == alice_page.revision
    )
    assert own["markdown"] == "Went on a group trip."
    assert own["sources"] == [
        {"item_type": "message", "item_id": str(alice_turn.pk), "quote": alice_turn.content},
        {"item_type": "message", "item_id": str(bob_turn.pk)},
    ]
    assert {
        row["item_id"]: row["quote"] for row in rows["profile_sources"] if row["profile_id"] == str(alice_page.pk)
    } == {
        str(alice_turn.pk): alice_turn.content,
        str(bob_turn.pk): "",
    }
    (bobs,) = [row for row in rows["profile_revisions"] if row["profile_id"] == str(bob_page.pk)]
    assert bobs["markdown"] == "" and bobs["sources"] == [
        {"item_type": "message", "item_id": str(bob_turn.pk)},
        {"item_type": "message", "item_id": str(alice_turn.pk), "quote": alice_turn.content},
    ]
    assert str(bob_page.pk) not in {row["id"] for row in rows["profiles"]}
    assert str(bob_turn.pk) not in {row["id"] for row in rows["messages"]}


def test_the_command_shows_progress_and_refuses_what_it_cannot_find(world, out, capsys):
    call_command("export", "--org", world.organization.name, "--out", str(out), stdout=StringIO())
    assert "messages" in capsys.readouterr().err
    with pytest.raises(CommandError, match="No organisation"):
        call_command("export", "--org", "nope", "--out", str(out))
    with pytest.raises(CommandError, match="No end user"):
        call_command("export", "--org", world.organization.name, "--user", "nobody", "--out", str(out))
    with pytest.raises(CommandError, match="Invalid scope"):
        call_command("export", "--org", world.organization.name, "--scope", "bad scope", "--out", str(out))

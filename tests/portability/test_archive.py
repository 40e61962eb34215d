"""The archive file: what a reader refuses before it inflates anything (sizes against the manifest
and the IMPORT_MAX_* caps, zip bombs), corrupt data named as such, and archives written 0600."""

import hashlib
import json
import os
import stat
import zipfile
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from apps.portability.archive import FORMAT, FORMAT_VERSION, MANIFEST, ArchiveWriter
from apps.portability.services.importer import archive_import
from apps.tenancy.models import Organization

pytestmark = pytest.mark.django_db

BOMB_BYTES = 60 * 1024 * 1024


def _manifest(files: dict[str, bytes]) -> dict:
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "files": {
            name: {"rows": body.count(b"\n"), "bytes": len(body), "sha256": hashlib.sha256(body).hexdigest()}
            for name, body in files.items()
        },
    }


def _archive(path, files: dict[str, bytes], *, manifest: dict | bytes | None = None, compression=zipfile.ZIP_DEFLATED):
    manifest = _manifest(files) if manifest is None else manifest
    with zipfile.ZipFile(path, "w", compression=compression, compresslevel=9 if compression else None) as archive:
        for name, body in files.items():
            archive.writestr(name, body)
        archive.writestr(MANIFEST, manifest if isinstance(manifest, bytes) else json.dumps(manifest))
    return path


@pytest.fixture
def target(db):
    return Organization.objects.create(name="target")


def _refused(path, target) -> str:
    with pytest.raises(CommandError) as refused:
        call_command("import", str(path), "--org", target.name, "--json", stdout=StringIO())
    assert "nothing was stored" in str(refused.value)
    return str(refused.value)


def test_a_zip_bomb_is_refused_from_the_zip_directory(tmp_path, target):
    """60 MB of one byte deflate to about 60 KB; the manifest states the true size and checksum, so
    only the ratio gives it away (measured in the report: refused in milliseconds of CPU)."""
    bomb = _archive(tmp_path / "bomb.zip", {"messages.jsonl": b"0" * BOMB_BYTES})
    assert os.path.getsize(bomb) < 100_000
    assert "refused as a zip bomb" in _refused(bomb, target)


def test_a_manifest_bomb_is_refused_before_it_is_read(tmp_path, target):
    bomb = _archive(tmp_path / "bomb.zip", {}, manifest=b" " * BOMB_BYTES + b"{}")
    assert f"{MANIFEST}: {BOMB_BYTES + 2} bytes: a manifest is at most" in _refused(bomb, target)


def test_the_caps_are_settings(tmp_path, target, settings):
    body = b'{"id": 1}\n' * 2000  # 20,000 bytes, compressing well below the ratio check's floor
    archive = _archive(tmp_path / "a.zip", {"end_users.jsonl": body})
    settings.IMPORT_MAX_FILE_BYTES = 10_000
    assert "end_users.jsonl: 20000 bytes uncompressed, above IMPORT_MAX_FILE_BYTES (10000)" in _refused(archive, target)
    settings.IMPORT_MAX_FILE_BYTES = 100_000
    settings.IMPORT_MAX_BYTES = 15_000
    assert "above IMPORT_MAX_BYTES (15000)" in _refused(archive, target)
    settings.IMPORT_MAX_BYTES = settings.IMPORT_MAX_FILE_BYTES = 10_000_000
    settings.IMPORT_MAX_COMPRESSION_RATIO = 10
    ratio = _archive(tmp_path / "r.zip", {"end_users.jsonl": b'{"id": 1}\n' * 200_000})  # 2 MB, ratio ~ 200
    assert "(IMPORT_MAX_COMPRESSION_RATIO is 10): refused as a zip bomb" in _refused(ratio, target)


def test_every_file_must_have_the_size_the_manifest_states(tmp_path, target):
    body = b'{"id": 1}\n'
    manifest = _manifest({"end_users.jsonl": body})
    manifest["files"]["end_users.jsonl"]["bytes"] = 5
    archive = _archive(tmp_path / "a.zip", {"end_users.jsonl": body}, manifest=manifest)
    assert "end_users.jsonl: The zip holds 10 bytes, the manifest says 5." in _refused(archive, target)
    del manifest["files"]["end_users.jsonl"]["bytes"]
    archive = _archive(tmp_path / "a.zip", {"end_users.jsonl": body}, manifest=manifest)
    assert "files.end_users.jsonl: Needs rows and bytes (integers) and sha256." in _refused(archive, target)


def test_corrupt_data_is_refused_naming_the_file(tmp_path, target):
    body = b'{"user_id": "alice"}\n'
    path = _archive(tmp_path / "a.zip", {"end_users.jsonl": body}, compression=zipfile.ZIP_STORED)
    raw = path.read_bytes()
    path.write_bytes(raw.replace(b'"alice"', b'"alicf"', 1))  # the stated CRC no longer matches
    assert "end_users.jsonl: Corrupt data (BadZipFile)." in _refused(path, target)


def test_archives_are_written_readable_by_their_owner_only(tmp_path, target):
    path = tmp_path / "out.zip"
    path.write_bytes(b"an older file, world-readable")
    path.chmod(0o644)
    writer = ArchiveWriter(path)
    writer.write_rows("end_users.jsonl", [])
    writer.close({"format": FORMAT, "format_version": FORMAT_VERSION})
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    fresh = tmp_path / "fresh.zip"
    call_command("export", "--org", target.name, "--out", str(fresh), "--json", stdout=StringIO())
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o600
    assert archive_import(path=fresh, organization=target)["rows"] == {}

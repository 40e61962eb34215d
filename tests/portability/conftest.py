"""The erasure tests' seeded organisation (every table holds rows of two users and two clients),
and helpers to read archives back."""

import json
import zipfile

import pytest

from tests.privacy.conftest import world  # noqa: F401  (the fixture, shared)


def archive_rows(path) -> dict[str, list[dict]]:
    """Every row of an archive, per file stem."""
    with zipfile.ZipFile(path) as archive:
        return {
            name[: -len(".jsonl")]: [json.loads(line) for line in archive.read(name).decode().splitlines()]
            for name in archive.namelist()
            if name.endswith(".jsonl")
        }


def manifest_of(path) -> dict:
    with zipfile.ZipFile(path) as archive:
        return json.loads(archive.read("manifest.json"))


@pytest.fixture
def out(tmp_path):
    return tmp_path / "archive.zip"


def rewrite(path, name, change, *, fix_manifest=True):
    """Rewrites one file of an archive with `change(lines) -> lines` (decoded JSON rows or raw text
    lines) and, unless told otherwise, states the new checksum and count in the manifest."""
    import hashlib

    with zipfile.ZipFile(path) as archive:
        members = {member: archive.read(member) for member in archive.namelist()}
    lines = change(members[name].decode().splitlines())
    body = "".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines).encode()
    members[name] = body
    if fix_manifest:
        manifest = json.loads(members["manifest.json"])
        manifest["files"][name] = {"rows": len(lines), "bytes": len(body), "sha256": hashlib.sha256(body).hexdigest()}
        members["manifest.json"] = json.dumps(manifest).encode()
    with zipfile.ZipFile(path, "w") as archive:
        for member, data in members.items():
            archive.writestr(member, data)

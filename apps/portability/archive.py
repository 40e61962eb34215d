"""The archive format: a zip of JSON Lines files, one per kind of row, and a manifest.

`manifest.json` names the format and its version, the platform version, the embedding model and
dimensions the vectors were computed with, what was selected, and for every file its row count,
size and SHA-256. Rows are written as they are read (bounded memory), and read back the same way.
docs/api.md ("Archive format") is the reference.
"""

import base64
import hashlib
import json
import zipfile
from datetime import date, datetime
from importlib.metadata import PackageNotFoundError, version
from uuid import UUID

import numpy as np

from apps.core.validation import InputError, loads

FORMAT = "memory-platform-archive"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
# A longer line is refused before it is parsed (the largest legitimate row is a long turn with its vector).
MAX_LINE_BYTES = 8 * 1024 * 1024


def platform_version() -> str:
    try:
        return version("memory-platform")
    except PackageNotFoundError:
        return "unknown"


def vector_encode(vector) -> str:
    """A vector as base64 of little-endian float32: a quarter of its size as a JSON list of numbers."""
    return base64.b64encode(np.asarray(vector, dtype="<f4").tobytes()).decode("ascii")


def vector_decode(text: str, *, dimensions: int) -> list[float]:
    raw = base64.b64decode(text, validate=True)
    if len(raw) != 4 * dimensions:
        raise ValueError(f"Expected {dimensions} float32 values, found {len(raw) / 4:g}.")
    vector = np.frombuffer(raw, dtype="<f4")
    if not np.isfinite(vector).all():
        raise ValueError("Vector values must be finite.")
    return vector.tolist()


def _default(value):
    if isinstance(value, UUID):
        return str(value)
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    raise TypeError(f"Cannot write {type(value).__name__} to an archive.")


class ArchiveWriter:
    """Writes one file per kind into a zip, hashing and counting as it goes; the manifest last."""

    def __init__(self, path):
        self.zip = zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1)
        self.files: dict[str, dict] = {}

    def write_rows(self, name: str, rows) -> int:
        digest, count, size = hashlib.sha256(), 0, 0
        with self.zip.open(name, "w", force_zip64=True) as member:
            for row in rows:
                line = (json.dumps(row, default=_default, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
                member.write(line)
                digest.update(line)
                count += 1
                size += len(line)
        self.files[name] = {"rows": count, "bytes": size, "sha256": digest.hexdigest()}
        return count

    def close(self, manifest: dict) -> dict:
        manifest = {**manifest, "files": self.files}
        self.zip.writestr(MANIFEST, json.dumps(manifest, indent=2, sort_keys=True))
        self.zip.close()
        return manifest


class ArchiveError(ValueError):
    """A refused archive: `location` names the file (and line, and field) that was wrong."""

    def __init__(self, location: str, message: str):
        super().__init__(f"{location}: {message}" if location else message)
        self.location = location
        self.message = message


class ArchiveReader:
    """Opens an archive, checks its manifest and every file's size, count and checksum before a row is used."""

    def __init__(self, path):
        try:
            self.zip = zipfile.ZipFile(path)
        except (OSError, zipfile.BadZipFile) as exc:
            raise ArchiveError(str(path), f"Not a readable zip archive ({type(exc).__name__}).") from None
        self.manifest = self._manifest()

    def _manifest(self) -> dict:
        try:
            raw = self.zip.read(MANIFEST)
        except KeyError:
            raise ArchiveError(MANIFEST, "Missing: this is not a memory platform archive.") from None
        try:
            manifest = loads(raw, field=MANIFEST)
        except InputError as exc:
            raise ArchiveError(MANIFEST, exc.message) from None
        if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
            raise ArchiveError(MANIFEST, f"Not a {FORMAT} manifest.")
        if manifest.get("format_version") != FORMAT_VERSION:
            raise ArchiveError(
                MANIFEST,
                f"Format version {manifest.get('format_version')!r} is not supported (this platform reads {FORMAT_VERSION}).",
            )
        files = manifest.get("files")
        if not isinstance(files, dict):
            raise ArchiveError(f"{MANIFEST}: files", "Must be an object naming every file of the archive.")
        members = set(self.zip.namelist()) - {MANIFEST}
        if members != set(files):
            unexpected, missing = sorted(members - set(files)), sorted(set(files) - members)
            raise ArchiveError(MANIFEST, f"Files and manifest disagree (not listed: {unexpected}, missing: {missing}).")
        for name, entry in files.items():
            if not (
                isinstance(entry, dict) and isinstance(entry.get("rows"), int) and isinstance(entry.get("sha256"), str)
            ):
                raise ArchiveError(f"{MANIFEST}: files.{name}", "Needs rows (an integer) and sha256.")
        return manifest

    def verify(self) -> None:
        """Every file's checksum and row count, as the manifest states them."""
        for name, entry in self.manifest["files"].items():
            digest, rows = hashlib.sha256(), 0
            for _, line in self._lines(name):
                digest.update(line)
                rows += 1
            if digest.hexdigest() != entry["sha256"]:
                raise ArchiveError(name, "Checksum mismatch: the file is not the one the manifest describes.")
            if rows != entry["rows"]:
                raise ArchiveError(name, f"{rows} rows, the manifest says {entry['rows']}.")

    def _lines(self, name: str):
        with self.zip.open(name) as member:
            number = 0
            while True:
                line = member.readline(MAX_LINE_BYTES + 1)
                if not line:
                    return
                number += 1
                if len(line) > MAX_LINE_BYTES:
                    raise ArchiveError(f"{name}:{number}", f"Line longer than {MAX_LINE_BYTES} bytes.")
                yield number, line

    def rows(self, name: str):
        """(line number, decoded object) of a file, refusing anything but a JSON object per line."""
        if name not in self.manifest["files"]:
            return
        for number, line in self._lines(name):
            try:
                row = loads(line)
            except InputError as exc:
                field = f": {exc.field}" if exc.field else ""
                raise ArchiveError(f"{name}:{number}{field}", exc.message) from None
            if not isinstance(row, dict):
                raise ArchiveError(f"{name}:{number}", "Each line must be a JSON object.")
            yield number, row

    def close(self):
        self.zip.close()

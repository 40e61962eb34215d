"""The archive format: a zip of JSON Lines files, one per kind of row, and a manifest.
docs/api.md ("Archive format") is the reference."""

import base64
import hashlib
import json
import os
import zipfile
import zlib
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
# The manifest is read before the caps it states can be checked: it has a small cap of its own.
MAX_MANIFEST_BYTES = 1024 * 1024
# Smaller files are not held to IMPORT_MAX_COMPRESSION_RATIO: a few repetitive rows compress well, harmlessly.
RATIO_CHECKED_FROM_BYTES = 1024 * 1024
MAX_MEMBERS = 64


def platform_version() -> str:
    try:
        return version("memory-platform")
    except PackageNotFoundError:
        return "unknown"


def vector_encode(vector) -> str:
    """Base64 of little-endian float32: a quarter of its size as a JSON list of numbers."""
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
    def __init__(self, path):
        # An archive holds people's data: 0600, an existing file's mode included.
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.fchmod(descriptor, 0o600)
        self.file = os.fdopen(descriptor, "wb")
        try:
            self.zip = zipfile.ZipFile(self.file, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1)
        except BaseException:
            self.file.close()
            raise
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
        self.file.close()
        return manifest

    def abort(self) -> None:
        """Closes without a manifest (the caller deletes the file)."""
        self.zip.close()
        self.file.close()


class ArchiveError(ValueError):
    """`location` names the file (and line, and field) that was wrong."""

    def __init__(self, location: str, message: str):
        super().__init__(f"{location}: {message}" if location else message)
        self.location = location
        self.message = message


class ArchiveReader:
    """Checks the zip's stated sizes before a byte is inflated: zipfile reads no more than a file's stated size,
    so this refuses a zip bomb at the cost of reading its directory. `verify` checks checksums and counts."""

    def __init__(self, path, *, max_bytes: int, max_file_bytes: int, max_ratio: float):
        self.path = str(path)
        try:
            self.zip = zipfile.ZipFile(path)
            self.archive_bytes = os.path.getsize(path)
        except (OSError, zipfile.BadZipFile) as exc:
            raise ArchiveError(self.path, f"Not a readable zip archive ({type(exc).__name__}).") from None
        try:
            self._check_sizes(max_bytes=max_bytes, max_file_bytes=max_file_bytes, max_ratio=max_ratio)
            self.manifest = self._manifest()
        except BaseException:
            self.zip.close()
            raise

    def _check_sizes(self, *, max_bytes: int, max_file_bytes: int, max_ratio: float) -> None:
        members = self.zip.infolist()
        if len(members) > MAX_MEMBERS:
            raise ArchiveError(self.path, f"{len(members)} files: an archive holds at most {MAX_MEMBERS}.")
        names = [member.filename for member in members]
        if len(set(names)) != len(names):
            raise ArchiveError(self.path, "A file name appears twice in the zip.")
        total = 0
        for member in members:
            name, size = member.filename, member.file_size
            if name == MANIFEST and size > MAX_MANIFEST_BYTES:
                raise ArchiveError(MANIFEST, f"{size} bytes: a manifest is at most {MAX_MANIFEST_BYTES}.")
            if size > max_file_bytes:
                raise ArchiveError(name, f"{size} bytes uncompressed, above IMPORT_MAX_FILE_BYTES ({max_file_bytes}).")
            if member.compress_size > self.archive_bytes:
                raise ArchiveError(name, "The zip states a compressed size larger than the archive.")
            _check_ratio(name, size, member.compress_size, max_ratio, "times")
            total += size
        if total > max_bytes:
            raise ArchiveError(self.path, f"{total} bytes uncompressed, above IMPORT_MAX_BYTES ({max_bytes}).")
        _check_ratio(self.path, total, self.archive_bytes, max_ratio, "times its size")

    def _manifest(self) -> dict:
        try:
            raw = self._read(MANIFEST)
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
                isinstance(entry, dict)
                and _count(entry.get("rows"))
                and _count(entry.get("bytes"))
                and isinstance(entry.get("sha256"), str)
            ):
                raise ArchiveError(f"{MANIFEST}: files.{name}", "Needs rows and bytes (integers) and sha256.")
            stated = self.zip.getinfo(name).file_size
            if stated != entry["bytes"]:
                raise ArchiveError(name, f"The zip holds {stated} bytes, the manifest says {entry['bytes']}.")
        return manifest

    def _read(self, name: str) -> bytes:
        with self._open(name) as member:
            try:
                return member.read()
            except (zipfile.BadZipFile, zlib.error, EOFError, OSError) as exc:
                raise ArchiveError(name, f"Corrupt data ({type(exc).__name__}).") from None

    def _open(self, name: str):
        try:
            return self.zip.open(name)
        except (NotImplementedError, RuntimeError, zipfile.BadZipFile) as exc:  # compression, encryption, header
            raise ArchiveError(name, f"Cannot be read ({type(exc).__name__}).") from None

    def verify(self) -> None:
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
        with self._open(name) as member:
            number = 0
            while True:
                try:
                    line = member.readline(MAX_LINE_BYTES + 1)
                except (zipfile.BadZipFile, zlib.error, EOFError, OSError) as exc:  # a bad CRC, corrupt data
                    raise ArchiveError(name, f"Corrupt data ({type(exc).__name__}).") from None
                if not line:
                    return
                number += 1
                if len(line) > MAX_LINE_BYTES:
                    raise ArchiveError(f"{name}:{number}", f"Line longer than {MAX_LINE_BYTES} bytes.")
                yield number, line

    def rows(self, name: str):
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


def _check_ratio(location: str, size: int, compressed: int, max_ratio: float, times: str) -> None:
    if size >= RATIO_CHECKED_FROM_BYTES and size > max_ratio * max(compressed, 1):
        raise ArchiveError(
            location,
            f"Inflates {size / max(compressed, 1):.0f} {times} (IMPORT_MAX_COMPRESSION_RATIO is {max_ratio:g}): "
            "refused as a zip bomb.",
        )


def _count(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0

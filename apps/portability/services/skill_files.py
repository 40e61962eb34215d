"""Skills as files: a scope's active skills as a folder of `<name>/SKILL.md` files (YAML front matter, the
instructions as the body) and back, so skills can live in a repository and be reviewed as diffs."""

from pathlib import Path

import yaml
from django.core.exceptions import ValidationError
from django.db import transaction

from apps.core.validation import InputError, check_json
from apps.portability.archive import ArchiveError
from apps.skills.models import SKILL_NAME_MAX_LENGTH, Skill
from apps.skills.services.skills import skill_create, skill_slug, skill_update
from apps.tenancy.models import Organization

FILE_NAME = "SKILL.md"
ACTOR = "import:skill-files"
MAX_FILE_BYTES = 1024 * 1024


def skill_file_text(skill: Skill) -> str:
    front = {
        "name": skill.name,
        "description": skill.description,
        "triggers": list(skill.triggers or []),
        "version": skill.version,
        "entry_type": skill.entry_type,
    }
    if skill.examples:
        front["examples"] = skill.examples
    header = yaml.safe_dump(front, sort_keys=False, allow_unicode=True, width=100)
    return f"---\n{header}---\n\n{skill.instructions.strip()}\n"


def skills_export_files(*, organization: Organization, scope: str, directory: Path) -> list[Path]:
    """Skills served to all the scope's users only: a person's own skill is theirs. Returns the files written."""
    written = []
    skills = Skill.objects.filter(
        organization=organization, scope=scope, status=Skill.Status.ACTIVE, end_user__isnull=True
    )
    for skill in skills.order_by("name"):
        path = Path(directory) / skill.name / FILE_NAME
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(skill_file_text(skill), encoding="utf-8")
        written.append(path)
    return written


def skill_file_parse(text: str, *, location: str) -> dict:
    if not text.startswith("---\n") or "\n---" not in text[3:]:
        raise ArchiveError(location, "Must start with YAML front matter between two '---' lines.")
    header, _, body = text[4:].partition("\n---")
    body = body.split("\n", 1)[1] if "\n" in body else ""
    try:
        front = yaml.safe_load(header) or {}
    except yaml.YAMLError as exc:
        raise ArchiveError(location, f"Front matter is not valid YAML ({type(exc).__name__}).") from None
    if not isinstance(front, dict):
        raise ArchiveError(location, "Front matter must be a mapping.")

    def refuse(field, message):
        raise ArchiveError(f"{location}: {field}", message)

    for field in ("name", "description"):
        if not isinstance(front.get(field), str) or not front[field].strip():
            refuse(field, "Required: a non-empty string.")
    name = skill_slug(front["name"])
    if name != front["name"] or len(name) > SKILL_NAME_MAX_LENGTH:
        refuse(
            "name",
            f"Use lower-case letters, digits and '-', at most {SKILL_NAME_MAX_LENGTH} characters (e.g. {name!r}).",
        )
    triggers, examples = front.get("triggers", []), front.get("examples", [])
    if not isinstance(triggers, list) or not all(isinstance(item, str) for item in triggers):
        refuse("triggers", "Must be a list of strings.")
    if not isinstance(examples, list):
        refuse("examples", "Must be a list.")
    entry_type = front.get("entry_type", Skill.EntryType.GUIDE)
    if entry_type not in Skill.EntryType.values:
        refuse("entry_type", f"One of {', '.join(Skill.EntryType.values)}.")
    if "version" in front and not (isinstance(front["version"], int) and front["version"] >= 1):
        refuse("version", "Must be a positive integer.")
    instructions = body.strip()
    if not instructions:
        refuse("instructions", "The body (the instructions) must not be empty.")
    fields = {
        "name": name,
        "description": front["description"].strip(),
        "instructions": instructions,
        "triggers": triggers,
        "examples": examples,
        "entry_type": entry_type,
    }
    try:
        check_json(fields)
    except InputError as exc:
        refuse(exc.field, exc.message)
    return fields


@transaction.atomic
def skills_import_files(*, organization: Organization, scope: str, directory: Path) -> dict:
    """Every SKILL.md under `directory` as a reviewed (active, shared) skill; all or nothing."""
    parsed = []
    for path in sorted(Path(directory).rglob(FILE_NAME)):
        location = str(path.relative_to(directory))
        if path.stat().st_size > MAX_FILE_BYTES:
            raise ArchiveError(location, f"Larger than {MAX_FILE_BYTES} bytes.")
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise ArchiveError(location, "Not UTF-8.") from None
        parsed.append((location, skill_file_parse(text, location=location)))
    names = [fields["name"] for _, fields in parsed]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise ArchiveError(str(directory), f"Two files name the same skill: {', '.join(duplicates)}.")
    counts = {"created": 0, "updated": 0, "unchanged": 0}
    for location, fields in parsed:
        reason = f"Imported from {location}."
        skill = (
            Skill.objects.filter(organization=organization, scope=scope, name=fields["name"])
            .exclude(status=Skill.Status.ARCHIVED)
            .first()
        )
        if skill is not None and skill.end_user_id is not None:
            raise ArchiveError(location, "An end user's own skill of the scope has this name; rename the file's skill.")
        try:
            if skill is None:
                skill_create(
                    organization=organization,
                    scope=scope,
                    fields=fields,
                    actor=ACTOR,
                    reason=reason,
                    status=Skill.Status.ACTIVE,
                    shared=True,
                )
                counts["created"] += 1
                continue
            version = skill.version
            skill_update(
                skill=skill, changes=fields, actor=ACTOR, reason=reason, status=Skill.Status.ACTIVE, shared=True
            )
        except ValidationError as exc:
            raise ArchiveError(location, " ".join(exc.messages)) from None
        counts["updated" if skill.version != version else "unchanged"] += 1
    return counts

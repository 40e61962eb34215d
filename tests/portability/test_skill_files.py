"""Skills as files: a scope's shared active skills written as SKILL.md folders and read back as reviewed skills."""

import json
from io import StringIO

import pytest
import yaml
from django.core.management import CommandError, call_command

from apps.skills.models import Skill, SkillVersion
from apps.skills.services.skills import skill_create
from apps.tenancy.models import Organization

pytestmark = pytest.mark.django_db


def run(*args) -> dict:
    out = StringIO()
    call_command(*args, "--json", stdout=out)
    return json.loads(out.getvalue())


@pytest.fixture
def skills(organization):
    fields = {
        "name": "rebook-a-cancelled-flight",
        "description": "When a flight is cancelled, rebook it.",
        "instructions": "1. Look up the reservation.\n2. Search flights on the same route.\n3. Book — and confirm.",
        "triggers": ["flight cancelled", "rebook"],
        "examples": [{"task": "rebook AB12"}],
        "entry_type": "workflow",
    }
    shared = skill_create(
        organization=organization, scope="default", fields=fields, actor="test", reason="t", status="active"
    )
    skill_create(
        organization=organization,
        scope="default",
        fields={**fields, "name": "draft"},
        actor="test",
        reason="t",
        status="pending_review",
    )
    skill_create(
        organization=organization,
        scope="other",
        fields={**fields, "name": "elsewhere"},
        actor="test",
        reason="t",
        status="active",
    )
    return shared


def test_a_scopes_active_skills_round_trip_through_files(organization, skills, tmp_path):
    written = run("export_skills", "--org", organization.name, "--scope", "default", "--out", str(tmp_path / "skills"))
    assert written["files"] == [str(tmp_path / "skills" / "rebook-a-cancelled-flight" / "SKILL.md")]
    text = (tmp_path / "skills" / "rebook-a-cancelled-flight" / "SKILL.md").read_text()
    front = yaml.safe_load(text.split("---")[1])
    assert front == {
        "name": "rebook-a-cancelled-flight",
        "description": skills.description,
        "triggers": skills.triggers,
        "version": 1,
        "entry_type": "workflow",
        "examples": skills.examples,
    }
    assert text.rstrip().endswith(skills.instructions)

    target = Organization.objects.create(name="target")
    assert run("import_skills", str(tmp_path / "skills"), "--org", "target", "--scope", "team") == {
        "created": 1,
        "updated": 0,
        "unchanged": 0,
    }
    imported = Skill.objects.get(organization=target)
    assert (imported.scope, imported.status, imported.shared) == ("team", "active", True)
    for field in ("name", "description", "instructions", "triggers", "examples", "entry_type"):
        assert getattr(imported, field) == getattr(skills, field)
    # Again: nothing changes. An edited file: a new version, traced to the file.
    assert run("import_skills", str(tmp_path / "skills"), "--org", "target", "--scope", "team") == {
        "created": 0,
        "updated": 0,
        "unchanged": 1,
    }
    path = tmp_path / "skills" / "rebook-a-cancelled-flight" / "SKILL.md"
    path.write_text(path.read_text().replace("3. Book", "3. Book the earliest"))
    assert run("import_skills", str(tmp_path / "skills"), "--org", "target", "--scope", "team")["updated"] == 1
    version = SkillVersion.objects.filter(skill__organization=target).order_by("-version").first()
    assert (version.version, version.actor, version.reason) == (
        2,
        "import:skill-files",
        "Imported from rebook-a-cancelled-flight/SKILL.md.",
    )


@pytest.mark.parametrize(
    "text, where",
    [
        ("no front matter", "bad/SKILL.md"),
        ("---\nname: Not A Slug\ndescription: d\n---\nbody", "bad/SKILL.md: name"),
        ("---\nname: ok\n---\nbody", "bad/SKILL.md: description"),
        ("---\nname: ok\ndescription: d\ntriggers: nope\n---\nbody", "bad/SKILL.md: triggers"),
        ("---\nname: ok\ndescription: d\n---\n", "bad/SKILL.md: instructions"),
        ('---\nname: ok\ndescription: "d\\0"\n---\nbody', "bad/SKILL.md: description"),
        ("---\nname: [unclosed\n---\nbody", "bad/SKILL.md"),
    ],
)
def test_a_bad_file_is_refused_naming_it_and_nothing_is_stored(organization, tmp_path, text, where):
    good = tmp_path / "skills" / "good" / "SKILL.md"
    good.parent.mkdir(parents=True)
    good.write_text("---\nname: good\ndescription: fine\n---\nDo it.")
    bad = tmp_path / "skills" / "bad" / "SKILL.md"
    bad.parent.mkdir(parents=True)
    bad.write_text(text)
    with pytest.raises(CommandError) as refused:
        run("import_skills", str(tmp_path / "skills"), "--org", organization.name, "--scope", "default")
    assert f": {where}" in str(refused.value)
    assert not Skill.objects.filter(organization=organization).exists()

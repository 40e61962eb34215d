"""apps/skills/history.py: changed fields only, side by side, and lineage to transcript turns."""

import pytest

from apps.skills.history import side_by_side, skill_history, snapshot_changes
from tests.admin.makers import skill_with_lineage


def test_only_changed_fields_are_listed():
    before = {"name": "a", "description": "same", "instructions": "x", "triggers": ["t"], "status": "pending_review"}
    after = {**before, "instructions": "y", "status": "active"}
    assert [change.name for change in snapshot_changes(before, after)] == ["instructions", "status"]


def test_the_first_version_shows_its_filled_fields_against_nothing():
    changes = snapshot_changes({}, {"name": "a", "description": "", "triggers": [], "status": "active"})
    assert [change.name for change in changes] == ["name", "status"]
    assert [(row.kind, row.left, row.right) for row in changes[0].rows] == [("insert", "", "a")]


def test_replaced_lines_mark_the_changed_characters_and_escape_html():
    rows = side_by_side("1. call <b>api</b>\nkeep", "1. call <b>API</b>\nkeep\nnew")
    assert [row.kind for row in rows] == ["replace", "equal", "insert"]
    assert "<del>api</del>" in rows[0].left and "<ins>API</ins>" in rows[0].right
    assert "&lt;b&gt;" in rows[0].left and "<b>" not in rows[0].left.replace("<del>", "")
    assert (rows[2].left_number, rows[2].right_number, rows[2].right) == (None, 3, "new")


def test_long_unchanged_runs_fold():
    old = "\n".join(f"line {n}" for n in range(20))
    rows = side_by_side(old, old.replace("line 10", "line ten"))
    assert [row.kind for row in rows] == ["fold", "equal", "equal", "replace", "equal", "equal", "fold"]
    assert rows[0].left == "… 8 unchanged line(s)"


@pytest.mark.django_db
def test_history_links_each_version_to_its_evidence_turns(client_a, django_assert_num_queries):
    skill, experience, error_turn = skill_with_lineage(client_a)
    with django_assert_num_queries(3):
        entries = skill_history(skill=skill)
    assert [entry.version.version for entry in entries] == [2, 1]
    assert [change.name for change in entries[0].changes] == ["instructions"]
    (evidence,) = entries[0].evidence
    assert evidence.experience == experience and evidence.signal_type == "tool_error"
    assert evidence.quote == "Error: date must be YYYY-MM-DD"
    url = f"/admin/conversations/session/{experience.session_id}/transcript/"
    assert evidence.transcript_url == url
    assert evidence.turns == [(error_turn.seq, f"{url}#turn-{error_turn.seq}")]
    assert entries[1].evidence == []

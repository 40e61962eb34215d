from types import SimpleNamespace

from apps.skills.services.transcript import render_transcript


def turn(seq, content, role="user", name=""):
    return SimpleNamespace(seq=seq, role=role, name=name, content=content)


def test_a_short_transcript_is_rendered_whole_with_turn_numbers_and_tool_names():
    messages = [turn(1, "book me a flight"), turn(2, "[get_user_details] {}", role="tool", name="get_user_details")]
    rendered = render_transcript(messages, max_message_chars=100, max_total_chars=1000)
    assert rendered.text == "[1] user: book me a flight\n[2] tool: [get_user_details] {}"
    assert (rendered.truncated_turns, rendered.elided_turns) == (0, 0)


def test_a_long_turn_is_cut_at_the_per_message_cap_with_a_marker():
    rendered = render_transcript([turn(1, "x" * 500)], max_message_chars=100, max_total_chars=10_000)
    body = rendered.text.removeprefix("[1] user: ")
    assert len(body) <= 100
    assert body.startswith("xxx") and "turn truncated" in body and "omitted" in body
    assert rendered.truncated_turns == 1


def test_a_long_transcript_keeps_head_and_tail_and_marks_the_elided_middle():
    messages = [turn(seq, f"turn number {seq} " + "y" * 80) for seq in range(1, 101)]
    rendered = render_transcript(messages, max_message_chars=1000, max_total_chars=2000)
    assert len(rendered.text) <= 2000
    lines = rendered.text.splitlines()
    assert lines[0].startswith("[1] user: turn number 1 ")
    assert lines[-1].startswith("[100] user: turn number 100 ")
    (marker,) = [line for line in lines if "elided" in line]
    assert f"{rendered.elided_turns} turns" in marker
    assert rendered.elided_turns == 100 - (len(lines) - 1)
    assert 0 < rendered.elided_turns < 100


def test_a_budget_smaller_than_one_turn_still_keeps_both_ends():
    rendered = render_transcript([turn(1, "head " + "z" * 1000 + " tail")], max_message_chars=5000, max_total_chars=300)
    assert rendered.text.startswith("[1] user: head") and rendered.text.endswith("tail")
    assert "elided" in rendered.text and len(rendered.text) <= 300

from datetime import datetime, timezone

import pytest

from apps.conversations.turns import TurnError, normalise_messages

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)


def normalise(messages, max_chars=1000):
    return normalise_messages(messages, max_chars=max_chars, default_occurred_at=NOW)


def test_tool_results_keep_the_tool_name_and_calls_are_serialised():
    turns = normalise(
        [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "get_user", "arguments": '{"id": 7}'}}
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": '{"name": "Mia"}'},
            {"role": "function", "name": "lookup", "content": "found"},
        ]
    )
    call, result, legacy = turns
    assert call.role == "assistant"
    assert call.content == '[tool_call get_user({"id": 7})]'
    assert call.tool_calls == [
        {"id": "c1", "type": "function", "function": {"name": "get_user", "arguments": '{"id": 7}'}}
    ]
    assert result.role == "tool" and result.name == "get_user"  # name recovered from the call id
    assert result.content == '[get_user] {"name": "Mia"}'
    assert legacy.role == "tool" and legacy.content == "[lookup] found"


def test_content_parts_flatten_to_text():
    (turn,) = normalise([{"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}])
    assert turn.content == "a\nb"


def test_malformed_tool_calls_are_kept_as_text():
    (turn,) = normalise([{"role": "assistant", "content": "hm", "tool_calls": [{"function": "not-an-object"}]}])
    assert turn.tool_calls is None
    assert "not-an-object" in turn.content and turn.content.startswith("hm\n[tool_call ")


def test_an_oversized_turn_is_cut_with_a_marker_and_the_batch_goes_on():
    turns = normalise([{"role": "user", "content": "x" * 5000}, {"role": "user", "content": "short"}], max_chars=500)
    assert turns[0].truncated and len(turns[0].content) <= 500
    assert "[truncated 4540 characters]" in turns[0].content
    assert not turns[1].truncated


def test_errors_name_index_and_field():
    with pytest.raises(TurnError) as caught:
        normalise(
            [
                {"role": "robot", "content": "x"},
                {"role": "assistant", "content": None},
                {"role": "user", "content": "ok", "metadata": [1]},
                {"role": "user", "content": "ok", "colour": "red"},
                "not an object",
            ]
        )
    errors = caught.value.errors
    assert "Unknown role 'robot'" in errors[0]["role"][0]
    assert errors[1]["content"] == ["A message needs content or tool_calls."]
    assert errors[2]["metadata"] == ["Must be a JSON object."]
    assert errors[3]["colour"] == ["Unknown field."]
    assert 4 in errors


def test_per_message_dates_and_metadata():
    (turn,) = normalise(
        [{"role": "user", "content": "hi", "occurred_at": "2023-05-08T13:56:00", "metadata": {"dia_id": "D1:3"}}]
    )
    assert turn.occurred_at == datetime(2023, 5, 8, 13, 56, tzinfo=timezone.utc)
    assert turn.metadata == {"dia_id": "D1:3"}

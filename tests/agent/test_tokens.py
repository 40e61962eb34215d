"""The offline token estimate: what each kind of piece counts, and trimming to a budget."""

import pytest

from apps.agent.tokens import estimate_tokens, trim_to_tokens


@pytest.mark.parametrize(
    "text,tokens",
    [
        ("", 0),
        ("the", 1),
        ("restaurant", 3),
        ("the cat sat", 3),
        ("2023", 2),
        ("12", 1),
        ("a, b.", 4),
        ("line\nline", 3),
        ("é", 1),
        ("王", 2),
        ("🎉", 3),
        ("  \t ", 0),
    ],
)
def test_each_piece_counts_as_documented(text, tokens):
    assert estimate_tokens(text) == tokens


def test_lines_joined_count_their_sum_plus_one_per_break():
    lines = ["## Facts", "[1] Caroline: from Sweden, 2019.", "[2] 王小明 🎉 met Zoë"]
    assert estimate_tokens("\n".join(lines)) == sum(map(estimate_tokens, lines)) + len(lines) - 1


@pytest.mark.parametrize("budget", [1, 2, 3, 5, 8, 13, 40, 120])
def test_a_trimmed_text_fits_and_keeps_a_marker(budget):
    text = "Caroline went to the LGBTQ support group on 7 May 2023 and found it really powerful. " * 5
    trimmed = trim_to_tokens(text, budget)
    assert estimate_tokens(trimmed) <= budget
    if trimmed:
        assert trimmed.endswith("…") and text.startswith(trimmed[:-1])


def test_a_text_that_fits_is_kept_whole():
    assert trim_to_tokens("short text", 10) == "short text"

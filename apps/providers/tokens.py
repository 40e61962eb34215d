"""Token counts without a tokenizer: an estimate never below cl100k_base's, o200k_base's or e5's on the
texts measured (`python -m bench tokens`), and the prompt budgets built on it."""

import re
from collections.abc import Callable, Iterable

from django.conf import settings

# One match per token: an empty match where a letter run follows no space (or starts the text),
# then its capital alone when it starts with one; runs of letters in fours, runs of digits in twos
# (a greedy {1,n} cuts a run into ceil(length / n) matches); a run of two or more spaces and tabs;
# any other ASCII character but a space (line breaks, punctuation, controls); a non-ASCII character
# (group 1: it may count more). Python's findall and finditer return an empty match and then a
# non-empty one at the same position.
_PIECES = re.compile(
    r"(?<![ A-Za-z])(?=[A-Za-z])|(?<![ A-Za-z])[A-Z]|[A-Za-z]{1,4}|[0-9]{1,2}|[ \t\r\x0b\x0c]{2,}"
    r"|[\x00-\x1f!-/:-@\[-`{-\x7f]|([^\x00-\x7f])"
)
# Non-ASCII characters by UTF-8 length: 3 bytes (lone surrogates too) count 2, 4 bytes 3.
_WIDER = (re.compile("[\u0800-\U0010ffff]"), re.compile("[\U00010000-\U0010ffff]"))
# What a chat message costs beyond its text (role and separators), and a whole prompt beyond its messages.
MESSAGE_OVERHEAD_TOKENS = 4
PROMPT_OVERHEAD_TOKENS = 3
CUT_MARKER = " […]"


def estimate_tokens(text: str) -> int:
    """At least the number of tokens `text` takes in common tokenizers. Counted with compiled
    patterns, not piece by piece: it runs for every candidate line of a context block."""
    count = len(_PIECES.findall(text))
    if not text.isascii():
        count += sum(len(pattern.findall(text)) for pattern in _WIDER)
    return count


def _prefix_within(text: str, budget: int) -> int:
    """The longest prefix counting at most `budget` tokens: it ends where the first token beyond starts."""
    total = 0
    for match in _PIECES.finditer(text):
        wide = match.group(1)
        total += max(1, len(wide.encode("utf-8", "surrogatepass")) - 1) if wide else 1
        if total > budget:
            return match.start()
    return len(text)


def fit_text(text: str, max_tokens: int, *, marker: str = CUT_MARKER) -> str:
    """`text` when it fits `max_tokens`; else its longest head (cut at a space where one is in
    its last fifth) that fits with `marker` after it; "" when nothing does."""
    if estimate_tokens(text) <= max_tokens:
        return text
    budget = max_tokens - estimate_tokens(marker)
    if budget <= 0:
        return ""
    head = text[: _prefix_within(text, budget)]
    space = head.rfind(" ")
    if space > len(head) * 0.8:
        head = head[:space]
    head = head.rstrip()
    return head + marker if head else ""


def prompt_tokens(messages: list[dict]) -> int:
    """The estimated size of a chat prompt."""
    return PROMPT_OVERHEAD_TOKENS + sum(
        MESSAGE_OVERHEAD_TOKENS + estimate_tokens(str(message.get("content") or "")) for message in messages
    )


def room_for(*fixed: str) -> int:
    """Tokens left for variable input in a system-and-user prompt whose fixed text is `fixed`."""
    overhead = PROMPT_OVERHEAD_TOKENS + 2 * MESSAGE_OVERHEAD_TOKENS
    return settings.LLM_MAX_PROMPT_TOKENS - overhead - sum(map(estimate_tokens, fixed))


def token_batches(items: Iterable, *, cost: Callable[[object], int], budget: int, max_items: int = 0) -> list[list]:
    """Consecutive items in batches costing at most `budget` (and of at most `max_items`); an item over
    the budget is a batch of its own, for the caller to trim."""
    batches: list[list] = []
    current: list = []
    spent = 0
    for item in items:
        price = cost(item)
        if current and (spent + price > budget or (max_items and len(current) >= max_items)):
            batches.append(current)
            current, spent = [], 0
        current.append(item)
        spent += price
    if current:
        batches.append(current)
    return batches


def fit_prompt(messages: list[dict]) -> tuple[list[dict], int]:
    """The prompt with its last message's tail cut to fit the budget, and how many tokens were cut."""
    over = prompt_tokens(messages) - settings.LLM_MAX_PROMPT_TOKENS
    if over <= 0 or not messages:
        return messages, 0
    last = messages[-1]
    content = str(last.get("content") or "")
    kept = fit_text(content, max(0, estimate_tokens(content) - over))
    return [*messages[:-1], {**last, "content": kept}], over

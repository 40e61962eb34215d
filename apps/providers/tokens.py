"""Token budgets for prompts: an estimate that errs high, and the one rule that fits long inputs in.

No tokenizer is downloaded, and the model behind an OpenAI-compatible endpoint is unknown, so the
count is a bound rather than a tokenizer's: a run of ASCII letters costs a token per three letters
(BPE and SentencePiece vocabularies hold most English words whole), every digit, punctuation mark,
symbol and non-ASCII character a token of its own, and whitespace other than a single space a
token per run. On the LOCOMO and tau-bench dev texts this is 1.4 to 1.5 times the count of
multilingual-e5-small's SentencePiece tokenizer and never below it on a prompt-sized chunk
(`python -m bench tokens`); English-centred BPE vocabularies count fewer tokens still.

Every LLM call goes through `apps.providers.llm.chat_json`, which cuts the tail of the last message
when a prompt would exceed `LLM_MAX_PROMPT_TOKENS`; callers with long inputs split them first with
`token_batches` (extraction, the contradiction lint) or trim them with `fit_text` (distiller,
evolver, profile compiler, reranker, decomposer), so that cut is a last resort.
"""

import math
import re
from collections.abc import Callable, Iterable

from django.conf import settings

LETTERS_PER_TOKEN = 3
_PIECES = re.compile(r"[A-Za-z]+|\s+|\S")
# What a chat message costs beyond its text (role and separators), and a whole prompt beyond its messages.
MESSAGE_OVERHEAD_TOKENS = 4
PROMPT_OVERHEAD_TOKENS = 3
CUT_MARKER = " […]"


def estimate_tokens(text: str) -> int:
    """At least the number of tokens `text` takes in common tokenizers."""
    # A letter run costs a token per three letters; any other character (a piece of one) is a token.
    return sum(
        (piece != " ") if piece[0].isspace() else math.ceil(len(piece) / LETTERS_PER_TOKEN)
        for piece in _PIECES.findall(text)
    )


def prompt_tokens(messages: list[dict]) -> int:
    """The estimated size of a chat prompt."""
    return PROMPT_OVERHEAD_TOKENS + sum(
        MESSAGE_OVERHEAD_TOKENS + estimate_tokens(str(message.get("content") or "")) for message in messages
    )


def prompt_budget() -> int:
    return settings.LLM_MAX_PROMPT_TOKENS


def room_for(*fixed: str) -> int:
    """Tokens left for variable input in a prompt of one system and one user message whose fixed
    text is `fixed` (instructions, headings)."""
    return prompt_budget() - PROMPT_OVERHEAD_TOKENS - 2 * MESSAGE_OVERHEAD_TOKENS - sum(map(estimate_tokens, fixed))


def fit_text(text: str, max_tokens: int, *, marker: str = CUT_MARKER) -> str:
    """`text`, or its longest head that fits `max_tokens` with `marker` after it."""
    if estimate_tokens(text) <= max_tokens:
        return text
    if estimate_tokens(marker) > max_tokens:
        return ""
    low, high = 0, len(text)
    while low < high:  # the longest head that fits (its count grows with its length)
        middle = (low + high + 1) // 2
        if estimate_tokens(text[:middle].rstrip() + marker) <= max_tokens:
            low = middle
        else:
            high = middle - 1
    return text[:low].rstrip() + marker


def token_batches(items: Iterable, *, cost: Callable[[object], int], budget: int, max_items: int = 0) -> list[list]:
    """Consecutive items in batches whose costs add up to at most `budget` (and at most `max_items`
    items, when given). An item that alone costs more than the budget is a batch of its own: the
    caller trims it (with `fit_text`) before rendering."""
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
    """The prompt cut to fit the budget (the last message's text loses its tail) and how many
    tokens were cut; the prompt as it is when it fits."""
    over = prompt_tokens(messages) - prompt_budget()
    if over <= 0 or not messages:
        return messages, 0
    last = messages[-1]
    content = str(last.get("content") or "")
    kept = fit_text(content, max(0, estimate_tokens(content) - over))
    return [*messages[:-1], {**last, "content": kept}], over

"""Token counts without a tokenizer, for every prompt and context block: an estimate that is never
below the count of the encoders measured, and the budgets built on it.

No tokenizer is downloaded, and the model behind an OpenAI-compatible endpoint is unknown, so the
count is a bound rather than a tokenizer's. The text is cut into pieces, each counted on its own:
- a run of ASCII letters: one token per 4 letters, rounded up (" the" 1, " restaurant" 3); a run
  that follows no space (it starts the text or a line, or follows punctuation or a digit) costs one
  more, and its first letter when a capital is a token of its own ("the" 2, "Bye!" 4, "see ya" 3,
  "Caroline" 4): vocabularies hold words with their leading space and split the others,
  capitalised ones most;
- a run of digits: one token per 2 digits, rounded up ("2023" 2);
- a line break: one token; a single space: none; any other run of spaces and tabs: one;
- any other ASCII character (punctuation, control): one token each;
- a non-ASCII character: its UTF-8 length minus one, at least one ("é" 1, "王" 2, "🎉" 3).
The count of a text joined from lines is the sum of the lines plus one per line break, so a
context block can be filled line by line.

Measured (`python -m bench tokens`, bench/README.md "tokens") against cl100k_base and o200k_base
(GPT) and multilingual-e5-small's SentencePiece tokenizer, on every LOCOMO dev turn, every
tau-bench dev message, prompt-sized chunks of both and context-sized blocks of LOCOMO turn lines:
never below any of the three on any text; on prompt-sized chunks 1.50 / 1.56 / 1.34 times their
counts on LOCOMO and 1.63 / 1.63 / 1.34 on tau-bench, on blocks 1.25 / 1.28 / 1.35. A short text
is where it is tight (a greeting of capitalised names); a prompt of N estimated tokens is about
0.6 to 0.8 N real ones.

Every LLM call goes through `apps.providers.llm.chat_json`, which cuts the tail of the last message
when a prompt would exceed `LLM_MAX_PROMPT_TOKENS`; callers with long inputs split them first with
`token_batches` (extraction, the contradiction lint) or trim them with `fit_text` (distiller,
evolver, profile compiler, reranker, decomposer, the context block), so that cut is a last resort.
"""

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
    """The length of the longest prefix of `text` counting at most `budget` tokens: a prefix counts
    every token that starts inside it (a run cut short still counts its started chunk), so the cut
    falls where the first token beyond the budget starts."""
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


def prompt_budget() -> int:
    return settings.LLM_MAX_PROMPT_TOKENS


def room_for(*fixed: str) -> int:
    """Tokens left for variable input in a prompt of one system and one user message whose fixed
    text is `fixed` (instructions, headings)."""
    return prompt_budget() - PROMPT_OVERHEAD_TOKENS - 2 * MESSAGE_OVERHEAD_TOKENS - sum(map(estimate_tokens, fixed))


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

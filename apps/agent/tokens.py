"""Token counting without a tokenizer: a deterministic estimate that errs on the high side of
the byte-pair encoders chat models use (cl100k, o200k), so a block sized to N estimated tokens
fits N real ones. Nothing is downloaded; `bench/context.py` measures the estimate against a real
encoder.

The text is cut into pieces, each counted on its own:
- a run of ASCII letters: one token per 4 letters, rounded up ("the" 1, "restaurant" 3);
- a run of digits: one token per 3 digits, rounded up (encoders group digits by three);
- a line break: one token; spaces and tabs: none (encoders fold them into the next word);
- any other ASCII character (punctuation): one token each;
- a non-ASCII character: its UTF-8 length minus one, at least one ("é" 1, "王" 2, "🎉" 3).
The count of a text joined from lines is the sum of the lines plus one per line break, so a
block can be filled line by line.
"""

import re

# One match per token of the ASCII classes: runs of letters in fours, runs of digits in threes
# (a greedy {1,n} cuts a run into ceil(length / n) matches), line breaks and punctuation one each.
_ASCII_TOKENS = re.compile(r"[A-Za-z]{1,4}|[0-9]{1,3}|[\x00-\x08\n\x0e-\x1f!-/:-@\[-`{-\x7f]")
_NON_ASCII = re.compile(r"[^\x00-\x7f]")
_TOKENS = re.compile(f"{_ASCII_TOKENS.pattern}|{_NON_ASCII.pattern}")
# Non-ASCII characters by UTF-8 length: 2 bytes count 1, 3 bytes (lone surrogates too) 2, 4 bytes 3.
_WIDER = (re.compile("[\u0800-\U0010ffff]"), re.compile("[\U00010000-\U0010ffff]"))


def estimate_tokens(text: str) -> int:
    """Counted with compiled patterns, not piece by piece: it runs for every candidate line of a block."""
    count = len(_ASCII_TOKENS.findall(text))
    if not text.isascii():
        count += sum(len(pattern.findall(text)) for pattern in (_NON_ASCII, *_WIDER))
    return count


def _prefix_within(text: str, budget: int) -> int:
    """The length of the longest prefix of `text` counting at most `budget` tokens: a prefix counts
    every token that starts inside it (a run cut short still counts its started chunk), so the cut
    falls where the first token beyond the budget starts."""
    total = 0
    for match in _TOKENS.finditer(text):
        piece = match.group()
        total += 1 if piece.isascii() else max(1, len(piece.encode("utf-8", "surrogatepass")) - 1)
        if total > budget:
            return match.start()
    return len(text)


def trim_to_tokens(text: str, max_tokens: int, *, marker: str = "…") -> str:
    """The longest prefix of `text` (cut at a space where one is near) that, with `marker`
    appended, fits in `max_tokens`; the text itself when it fits; "" when nothing does."""
    if estimate_tokens(text) <= max_tokens:
        return text
    budget = max_tokens - estimate_tokens(marker)
    if budget <= 0:
        return ""
    prefix = text[: _prefix_within(text, budget)]
    space = prefix.rfind(" ")
    if space > len(prefix) * 0.8:
        prefix = prefix[:space]
    prefix = prefix.rstrip()
    return prefix + marker if prefix else ""

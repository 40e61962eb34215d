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

import math
import re

_PIECES = re.compile(r"[A-Za-z]+|[0-9]+|\n|[ \t\r\f\v]+|[\x00-\x7f]|[^\x00-\x7f]")


def estimate_tokens(text: str) -> int:
    count = 0
    for piece in _PIECES.findall(text):
        first = piece[0]
        if first.isascii() and first.isalpha():
            count += math.ceil(len(piece) / 4)
        elif first.isdigit() and first.isascii():
            count += math.ceil(len(piece) / 3)
        elif first == "\n":
            count += 1
        elif first in " \t\r\f\v":
            continue
        elif first.isascii():
            count += 1
        else:
            count += max(1, len(first.encode("utf-8", "surrogatepass")) - 1)
    return count


def trim_to_tokens(text: str, max_tokens: int, *, marker: str = "…") -> str:
    """The longest prefix of `text` (cut at a space where one is near) that, with `marker`
    appended, fits in `max_tokens`; the text itself when it fits; "" when nothing does."""
    if estimate_tokens(text) <= max_tokens:
        return text
    budget = max_tokens - estimate_tokens(marker)
    if budget <= 0:
        return ""
    low, high = 0, len(text)
    while low < high:  # the longest prefix within the budget
        middle = (low + high + 1) // 2
        if estimate_tokens(text[:middle]) <= budget:
            low = middle
        else:
            high = middle - 1
    prefix = text[:low]
    space = prefix.rfind(" ")
    if space > len(prefix) * 0.8:
        prefix = prefix[:space]
    prefix = prefix.rstrip()
    return prefix + marker if prefix else ""

"""The screen a lesson passes before it may become skill text: instructions aimed at the model, a
link or a secret is flagged for a person's review, by pattern name, never the text."""

import re

_INSTRUCTION_PATTERNS = [
    # "Ignore previous instructions", "disregard all prior rules", "forget your guidelines".
    r"\b(?:ignore|disregard|forget|override|bypass)\b[^.\n]{0,40}?\b(?:previous|prior|above|earlier|all|any|your|the|these|those|system)\b"
    r"[^.\n]{0,20}?\b(?:instructions?|prompts?|rules|guidelines|directions|directives|context)\b",
    r"\b(?:system|developer)\s+(?:prompt|message|instructions?)\b",
    r"\byou\s+are\s+now\b|\bfrom\s+now\s+on\b|\bnew\s+instructions?\b|\bpretend\s+(?:to\s+be|you\s+are)\b",
    r"\b(?:do\s+not|don't|never)\s+(?:tell|inform|mention|reveal\s+to|let)\b[^.\n]{0,30}?\b(?:the\s+)?(?:user|customer|anyone)\b",
    # Exfiltration: sending a secret or a person's data somewhere.
    r"\b(?:send|forward|e-?mail|post|upload|transmit|exfiltrate|leak|share)\b[^.\n]{0,60}?"
    r"\b(?:card|password|passcode|credentials?|secrets?|tokens?|api[\s_-]?keys?|ssn|social\s+security|cvv|pin|passport)\b",
    # Chat-template and prompt-format markers.
    r"<\|im_start\|>|<\|im_end\|>|<\|system\|>|\[/?INST\]|<<SYS>>|^#+\s*(?:system|instructions?)\s*:?\s*$",
]
_INSTRUCTION = re.compile("|".join(f"(?:{pattern})" for pattern in _INSTRUCTION_PATTERNS), re.IGNORECASE | re.MULTILINE)
_URL = re.compile(
    r"\b(?:https?|ftp|file)://\S+|\bwww\.\S+"
    r"|(?<![@\w.-])[a-z0-9-]+(?:\.[a-z0-9-]+)*\.(?:com|net|org|io|co|ru|cn|xyz|info|biz|me|app|dev|ai|sh|ly|top|site|online)\b",
    re.IGNORECASE,
)
_CARD_CANDIDATE = re.compile(r"(?<![\w-])\d(?:[ -]?\d){12,18}(?![\w-])")
_API_KEY = re.compile(
    r"\bsk-[A-Za-z0-9_-]{16,}|\bAKIA[0-9A-Z]{16}\b|\bgh[pousr]_[A-Za-z0-9]{20,}|\bxox[abprs]-[A-Za-z0-9-]{10,}"
    r"|\bAIza[0-9A-Za-z_-]{30,}|-----BEGIN [A-Z ]*PRIVATE KEY-----"
    r"|\b(?=[A-Za-z0-9]{32,}\b)(?=[A-Za-z0-9]*[0-9])(?=[A-Za-z0-9]*[A-Za-z])[A-Za-z0-9]{32,}\b"
)
_CREDENTIAL = re.compile(
    r"\b(?:api[_-]?key|secret|password|passwd|access[_-]?token|auth[_-]?token|bearer)\b\s*[:=]?\s*['\"]?[^\s'\"]{8,}",
    re.IGNORECASE,
)


def _luhn(digits: str) -> bool:
    total = 0
    for index, digit in enumerate(reversed(digits)):
        value = int(digit)
        if index % 2:
            value = value * 2 - 9 if value > 4 else value * 2
        total += value
    return total % 10 == 0


def _has_card_number(text: str) -> bool:
    return any(_luhn(re.sub(r"[ -]", "", match.group())) for match in _CARD_CANDIDATE.finditer(text))


_FLAGS = {
    "instruction": _INSTRUCTION.search,
    "url": _URL.search,
    "card_number": _has_card_number,
    "api_key": _API_KEY.search,
    "credential": _CREDENTIAL.search,
}


def screen_flags(*texts: str) -> list[str]:
    """The sorted names of the patterns the texts hold; empty: nothing found."""
    text = "\n".join(texts)
    return sorted(name for name, found in _FLAGS.items() if found(text))

"""Renders a session's turns as text for a distiller, within a per-turn and a whole-transcript budget."""

from dataclasses import dataclass


def message_marker(removed: int) -> str:
    return f" …[turn truncated: {removed} characters omitted]"


def elision_marker(turns: int, characters: int) -> str:
    return f"…[{turns} turns ({characters} characters) elided from the middle of the transcript]…"


@dataclass
class RenderedTranscript:
    text: str
    truncated_turns: int
    elided_turns: int


def render_line(message, *, max_message_chars: int) -> tuple[str, bool]:
    role = message.role if not message.name or message.role == "tool" else f"{message.role} ({message.name})"
    content = message.content or ""
    truncated = len(content) > max_message_chars
    if truncated:
        kept = max(0, max_message_chars - len(message_marker(len(content))))
        content = content[:kept] + message_marker(len(content) - kept)
    return f"[{message.seq}] {role}: {content}", truncated


def render_transcript(messages, *, max_message_chars: int, max_total_chars: int) -> RenderedTranscript:
    """Every turn as `[seq] role: text`. Over budget, whole turns are dropped from the middle: the
    request at the start and the outcome at the end carry most of the signal."""
    rendered = [render_line(message, max_message_chars=max_message_chars) for message in messages]
    lines = [line for line, _ in rendered]
    truncated = sum(1 for _, was_cut in rendered if was_cut)
    total = sum(len(line) + 1 for line in lines)
    if total <= max_total_chars:
        return RenderedTranscript("\n".join(lines), truncated, 0)
    reserve = len(elision_marker(len(lines), total)) + 2
    budget = max(0, max_total_chars - reserve)
    low, high = 0, len(lines) - 1
    head_size = tail_size = 0
    # Alternate head and tail so both ends keep about half of the budget.
    while low <= high:
        take_head = head_size <= tail_size
        size = len(lines[low] if take_head else lines[high]) + 1
        if head_size + tail_size + size > budget:
            break
        if take_head:
            head_size, low = head_size + size, low + 1
        else:
            tail_size, high = tail_size + size, high - 1
    head, elided, tail = lines[:low], lines[low : high + 1], lines[high + 1 :]
    if not head and not tail:  # even one turn does not fit: cut characters instead
        text = "\n".join(lines)
        half = budget // 2
        marker = elision_marker(len(lines), len(text) - 2 * half)
        return RenderedTranscript(f"{text[:half]}\n{marker}\n{text[len(text) - half :]}", truncated, len(lines))
    marker = elision_marker(len(elided), sum(len(line) + 1 for line in elided))
    return RenderedTranscript("\n".join([*head, marker, *tail]), truncated, len(elided))

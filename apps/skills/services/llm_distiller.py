"""The LLM distiller: one prompt per session, JSON lessons back, validated before anything is stored."""

import json

from django.conf import settings

from apps.providers.llm import LLMOutputError, chat_json
from apps.providers.tokens import estimate_tokens, fit_text, room_for
from apps.skills.services.lessons import Lesson, LessonsAnswer, validate_lessons
from apps.skills.services.transcript import render_transcript

SYSTEM_PROMPT = """You distil reusable lessons from the transcript of an AI agent doing a task with tools.
Return a JSON object {"lessons": [...]} with 0 to 5 lessons. Return {"lessons": []} when nothing is worth keeping.
Each lesson:
- "experience_type": "worth_learning" (a procedure that worked: when X, do Y, because ...) or "worth_avoiding" (what went wrong and how to avoid it)
- "title": at most 120 characters, specific
- "content": the lesson itself, general enough to reuse in other sessions, no personal data
- "importance": 0..1, how much it would change a future run
- "credibility": 0..1, how sure the transcript makes it
- "evidence": {"quote": an exact quote from the transcript, "seqs": [turn numbers], "signal_type": one of
  "user_critique", "user_confirmation", "tool_error", "self_correction", "inferred"}
Use an explicit signal type only when the quoted turn shows it; otherwise use "inferred" and a low credibility.
Prefer lessons that are new or sharper than the existing skills listed; do not repeat them."""


def _user_prompt(*, session, existing_skills: list[dict]) -> str:
    """The prompt up to the transcript; the skills listed take at most a quarter of the budget."""
    skills = "\n".join(f"- {skill['name']}: {skill['description'][:200]}" for skill in existing_skills) or "(none)"
    return (
        f"Session outcome: {session.outcome}\n\nExisting skills in this scope:\n{fit_text(skills, room_for() // 4)}\n\n"
        "Transcript (each turn is [turn number] role: text):\n"
    )


def llm_lessons(*, session, messages, existing_skills: list[dict], task=None) -> tuple[list[Lesson], list[str]]:
    """Lessons and the problems met. An unparseable answer is no lessons (and a problem), never an error;
    an unreachable endpoint raises LLMError so the task is retried."""
    head = _user_prompt(session=session, existing_skills=existing_skills)
    room = room_for(SYSTEM_PROMPT, head)
    max_total_chars = settings.DISTILLER_MAX_TRANSCRIPT_CHARS
    while True:  # the middle of the transcript is elided until it fits the prompt's budget
        rendered = render_transcript(
            messages, max_message_chars=settings.DISTILLER_MAX_MESSAGE_CHARS, max_total_chars=max_total_chars
        )
        if estimate_tokens(rendered.text) <= room or max_total_chars <= 1000:
            break
        max_total_chars = max(1000, int(max_total_chars * room / estimate_tokens(rendered.text) * 0.95))
    prompt = [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": head + rendered.text},
    ]
    try:
        data = chat_json(
            messages=prompt, answer=LessonsAnswer, organization=session.organization, task=task, purpose="distill"
        )
    except LLMOutputError as exc:
        return [], [str(exc)]
    try:
        return validate_lessons(data, messages=messages)
    except Exception as exc:  # validation must never crash a task on a strange answer
        return [], [f"unusable answer ({type(exc).__name__}: {exc}): {json.dumps(data)[:200]}"]

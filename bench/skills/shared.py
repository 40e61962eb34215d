"""Time to shared (issue 52): five end users teach one workflow through a running platform (`make run`'s
processes, shipped defaults); how long after the fifth seal is a sixth user, who taught nothing, served
it? Two rows: the same session from each user, and the workflow with small differences (an extra
lookup, reads in another order, each customer's own words). `python -m bench skills_shared`."""

import json
import time

from bench.common import deployed, load_average, machine, measured_at, write_result

TARGET_SECONDS = 30.0
TIMEOUT_SECONDS = 180.0
TASKS = {
    "same_session": "book a flight from NYC to Boston for a customer",
    "small_differences": "book a train from New York to Boston",
}
TEACHERS = ["u1", "u2", "u3", "u4", "u5"]
NEWCOMER = "u6"


def _call(call_id: str, name: str, arguments: dict) -> list[dict]:
    return [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
            ],
        },
        {"role": "tool", "tool_call_id": call_id, "name": name, "content": json.dumps({"ok": True, "id": call_id})},
    ]


def same_session(_: int) -> list[dict]:
    """The issue's repro: every user sends this one session."""
    return [
        {"role": "user", "content": "Book a flight from NYC to Boston on Friday, please."},
        *_call("c1", "get_user_details", {"user_id": "me"}),
        *_call("c2", "search_flights", {"origin": "NYC", "destination": "BOS"}),
        *_call("c3", "book_flight", {"flight": "HAT100"}),
        {"role": "assistant", "content": "Booked."},
    ]


def variant_session(index: int) -> list[dict]:
    """The same workflow as each customer's agent ran it: own words, an extra lookup, reads reordered
    (its tools differ from same_session's, so the rows teach two workflows)."""
    reads = [("find_customer", {"user_id": "me"}), ("find_trains", {"origin": "NYC", "destination": "BOS"})]
    if index % 2:
        reads.reverse()
    if index >= 3:
        reads.append(("get_reservation_details", {"reservation_id": f"R{index}"}))
    steps = [*reads, ("book_train", {"train": f"AC10{index}"})]
    messages = [{"role": "user", "content": f"Hi, I need a flight from New York to Boston (request {index + 1})."}]
    for number, (name, arguments) in enumerate(steps):
        messages += _call(f"c{number}", name, arguments)
    return [*messages, {"role": "assistant", "content": "Booked."}]


def _row(memory, *, scope_user_prefix: str, session, task: str, final_tool: str) -> dict:
    """The five sessions added back to back; then the newcomer asks until served the workflow ending
    with `final_tool`."""
    started = time.monotonic()
    for index, user in enumerate(TEACHERS):
        memory.add(
            f"{scope_user_prefix}{user}",
            "booking",
            session(index),
            session_tag="task",
            seal=True,
            outcome="success",
        )
    fifth_seal = time.monotonic()
    newcomer = f"{scope_user_prefix}{NEWCOMER}"
    served = []
    while time.monotonic() - fifth_seal < TIMEOUT_SECONDS:
        served = memory.retrieve_skills(task, k=5, user_id=newcomer)["skills"]
        if any(final_tool.replace("_", "-") in skill["name"] for skill in served):
            break
        time.sleep(0.1)
    seconds = time.monotonic() - fifth_seal
    served = [skill for skill in served if final_tool.replace("_", "-") in skill["name"]]
    return {
        "adds_seconds": round(fifth_seal - started, 2),
        "served_after_fifth_seal_seconds": round(seconds, 2) if served else None,
        "served": [{"name": skill["name"], "shared": skill["shared"]} for skill in served],
        "within_target": bool(served) and seconds <= TARGET_SECONDS,
    }


def run(output_dir, *, log=print) -> dict:
    from memory_platform_client import MemoryClient

    from harness.platforms import RunPlatform

    load_before = load_average()
    rows = {}
    with (
        deployed(RunPlatform, name="skills-shared", shipped_defaults=True) as platform_,
        MemoryClient(platform_.url, api_key=platform_.api_key, timeout=60) as memory,
    ):
        log(f"skills_shared: platform up at {platform_.url}")
        rows["same_session"] = _row(
            memory,
            scope_user_prefix="same-",
            session=same_session,
            task=TASKS["same_session"],
            final_tool="book_flight",
        )
        rows["small_differences"] = _row(
            memory,
            scope_user_prefix="variant-",
            session=variant_session,
            task=TASKS["small_differences"],
            final_tool="book_train",
        )
        supporters = platform_.sql("SELECT name, shared, cardinality(supporters) FROM skills_skill ORDER BY name")
    result = {
        "benchmark": "skills_shared",
        "platform": "manage.py runplatform (make run): gunicorn, Celery workers, beat; shipped defaults",
        "target_seconds": TARGET_SECONDS,
        **rows,
        "skills": [{"name": name, "shared": shared, "supporters": count} for name, shared, count in supporters],
        "machine": machine(load_before=load_before),
        "measured_at": measured_at(),
    }
    write_result(output_dir, "skills_shared", result)
    for name, row in rows.items():
        log(
            f"skills_shared ({name}): a sixth user served {row['served'][:1]} "
            f"{row['served_after_fifth_seal_seconds']} s after the fifth seal (target {TARGET_SECONDS:.0f} s)"
        )
    return result

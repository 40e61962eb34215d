"""AI SDK middleware benchmark: what `memoryMiddleware` (@memory-platform/client/ai) adds to one model call.

A user with one LOCOMO conversation (conv-26, through the ingest service, every background task run) in an
organisation that also learned skills from the 100 tau-bench trajectories (task sessions sealed with their
outcome, distilled and evolved by the rule-based distiller; their turns, other users', are not embedded). The API is gunicorn as `make run` serves it
(2 workers, 2 threads) on this machine. clients/typescript/bench/middleware.mjs then calls `generateText`
with the AI SDK's test double as the model, bare and through `wrapLanguageModel` with the middleware
(context at 1,000 tokens and 3 skills, saving off: saves run after the answer, off the call's path), one new
request per call: the LOCOMO questions and the tau requests in turn. The overhead is the difference per
call; beside it, in the same rounds, `GET me` (the floor of any API call) and each of the two calls alone.

Needs Node.js 20+ and the TypeScript package installed (`npm ci` in clients/typescript); it is built here.
`BENCH_AI_ROUNDS` (default 200) calls are measured after 3 not counted.
"""

import json
import os
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path

from bench.common import api_server, load_average, machine, run_pending_tasks, write_result
from bench.data import ingest, load, task_session_ingest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "clients" / "typescript"
USER = "conv-26"


def _built() -> str:
    node = shutil.which("node")
    if node is None or not (PACKAGE / "node_modules" / "ai").is_dir():
        raise SystemExit("The AI SDK middleware benchmark needs Node.js 20+ and `npm ci` in clients/typescript.")
    subprocess.run([node, "node_modules/typescript/bin/tsc", "-p", "."], cwd=PACKAGE, check=True, timeout=300)
    return node


def _queries() -> list[str]:
    from apps.conversations.management.commands.import_sessions import trajectory_sessions

    questions = [str(qa["question"]) for qa in load("locomo-dev.json")[0]["qa"]][:100]
    requests = [
        next(turn["content"] for turn in item["messages"] if turn["role"] == "user" and turn.get("content"))
        for item in trajectory_sessions(load("tau-airline-dev.json"))
    ]
    return [query for pair in zip(questions, requests, strict=False) for query in pair]


def run(output_dir: Path) -> dict:
    from apps.conversations.management.commands.import_sessions import trajectory_sessions
    from apps.pipeline.models import MemoryTask
    from apps.skills.models import Skill
    from apps.tenancy.models import Organization
    from apps.tenancy.services import client_create, organization_create

    node = _built()
    rounds = int(os.environ.get("BENCH_AI_ROUNDS", "200"))
    load_before = load_average()
    organization = organization_create(name=f"bench-ai-{uuid.uuid4().hex[:8]}")
    client, api_key = client_create(organization=organization, name="bench", write_scope="bench")
    try:
        for item in trajectory_sessions(load("tau-airline-dev.json")):
            task_session_ingest(client, item)
        run_pending_tasks(organization, task_types=("distill_session", "evolve_skills"))
        # The trajectories' turns are other users' (a context never shows them): not worth embedding here.
        MemoryTask.objects.filter(organization=organization, task_type="embed_messages").delete()
        sample = load("locomo-dev.json")[0]
        assert sample["sample_id"] == USER
        ingest(client, sample)
        run_pending_tasks(organization)
        skills = Skill.objects.filter(organization=organization, status=Skill.Status.ACTIVE).count()
        with (
            tempfile.NamedTemporaryFile("w", suffix=".json") as queries,
            api_server(workers=2, threads=2, env={"LOG_LEVEL": "WARNING"}) as server,
        ):
            json.dump(_queries(), queries)
            queries.flush()
            env = {"PATH": os.environ["PATH"], "MEMORY_PLATFORM_URL": server.url, "MEMORY_PLATFORM_API_KEY": api_key}
            measured = subprocess.run(
                [node, "bench/middleware.mjs", USER, queries.name, str(rounds)],
                cwd=PACKAGE,
                env=env,
                capture_output=True,
                text=True,
                timeout=1800,
                check=False,
            )
        if measured.returncode != 0:
            raise SystemExit(f"bench/middleware.mjs failed:\n{measured.stdout}\n{measured.stderr}")
    finally:
        Organization.objects.filter(pk=organization.pk).delete()
    results = {
        "user": USER,
        "active_skills": skills,
        **json.loads(measured.stdout),
        "target": "overhead p50 <= 30 ms per model call (issue 53)",
        "machine": machine(load_before=load_before),
    }
    write_result(output_dir, "ai_middleware", results)
    return results

"""`python -m bench`: every benchmark, each writing its JSON results under bench/results/ (`make bench`).

`python -m bench NAME …` runs the named ones; `python -m bench privacy` the privacy rows (GROUPS);
`python -m bench --list` names every benchmark by the question it answers (importing its module).
"""

import importlib
import os
import sys

from bench.common import RESULTS_DIR

# Each benchmark's name (the command-line contract: `python -m bench NAME`, docs/ and bench/README.md)
# and its module, whose `run(output_dir)` runs it, by the question it answers, as bench/README.md is.
QUESTIONS = {
    "How much of what a question needs does search find?": {
        "locomo": "bench.retrieval.locomo",
        "locomo_dates": "bench.retrieval.locomo_dates",
        "retrieval_study": "bench.retrieval.study",
        "context": "bench.retrieval.context",
        "tokens": "bench.retrieval.tokens",
        "profiles": "bench.retrieval.profiles",
        "topics": "bench.retrieval.topics",
        "consolidate": "bench.retrieval.consolidate",
    },
    "How fast is it, and does it stay fast at size?": {
        "scale": "bench.scale.search",
        "rerank": "bench.scale.rerank",
        "admin": "bench.scale.admin",
        "erasure": "bench.scale.erasure",
        "export": "bench.scale.export",
        "replica": "bench.scale.replica",
        "middleware": "bench.scale.middleware",
        "ai_middleware": "bench.scale.ai_middleware",
    },
    "How long until what I add is stored, searchable and learned?": {
        "ingest": "bench.pipeline.ingest",
        "ingest_cpu": "bench.pipeline.ingest_cpu",
        "pipeline": "bench.pipeline.tasks",
        "pipeline_e2e": "bench.pipeline.e2e",
        "webhooks": "bench.pipeline.webhooks",
    },
    "Do learned skills help?": {
        "skills": "bench.skills.coverage",
        "skill_effect": "bench.skills.effect",
    },
    "What survives a crash or an outage?": {
        "faults": "bench.faults.table",
        "broker_pause": "bench.faults.broker_pause",
    },
    "Is erased data gone, and can one party harm another?": {
        "privacy_erasure": "bench.privacy.erasure",
        "privacy_poisoning": "bench.privacy.poisoning",
        "privacy_slow_clients": "bench.privacy.slow_clients",
        "privacy_review_abuse": "bench.privacy.review_abuse",
        "profiles_lint": "bench.privacy.lint",
    },
}
BENCHMARKS = {name: module for benchmarks in QUESTIONS.values() for name, module in benchmarks.items()}

# Names that run several benchmarks (not part of `make bench`, which runs each benchmark once).
GROUPS = {"privacy": "bench.privacy.summary"}


def runner(name: str):
    """The `run(output_dir)` of a benchmark or group, its module imported."""
    return importlib.import_module({**BENCHMARKS, **GROUPS}[name]).run


def _list() -> None:
    print(__doc__)
    for question, benchmarks in {**QUESTIONS, "Groups": GROUPS}.items():
        print(question)
        for name, module in benchmarks.items():
            runner(name)  # the module imports and has its entry point
            summary = (importlib.import_module(module).__doc__ or "").strip().splitlines()[0]
            print(f"  {name:<21} {module:<30} {summary}")


def main(argv: list[str]) -> int:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memory_platform.settings")
    import django

    django.setup()
    if set(argv) & {"--list", "--help", "-h"}:
        _list()
        return 0
    names = argv or list(BENCHMARKS)
    unknown = sorted(set(names) - set(BENCHMARKS) - set(GROUPS))
    if unknown:
        print(f"Unknown benchmark(s): {', '.join(unknown)}; available: {', '.join([*BENCHMARKS, *GROUPS])}")
        return 2
    import logging

    from django.core.management import call_command

    call_command("migrate", verbosity=0)  # a fresh clone's database, or one behind the code
    logging.getLogger("httpx").setLevel(logging.WARNING)
    for name in names:
        runner(name)(RESULTS_DIR)
    print(f"Results: {RESULTS_DIR}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

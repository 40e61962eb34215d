"""`make bench`: run every benchmark and write JSON results under bench/results/.

`python -m bench pipeline` runs only the named ones; `python -m bench privacy` the privacy rows
(GROUPS).
"""

import json
import os
import sys
from pathlib import Path

RESULTS_DIR = Path(__file__).resolve().parent / "results"


def _pipeline():
    from bench import pipeline

    pipeline.run(RESULTS_DIR)


def _pipeline_e2e():
    from bench import pipeline_e2e

    pipeline_e2e.run(RESULTS_DIR)


def _ingest():
    from bench import ingest

    ingest.run(RESULTS_DIR)


def _skills():
    from bench import skills

    skills.run(RESULTS_DIR)


def _skill_effect():
    from bench import skill_effect

    skill_effect.run(RESULTS_DIR)


def _locomo():
    """Every method with and without the context reranker, for each local embedding provider
    (BENCH_EMBEDDING_PROVIDERS, default `e5,local`; `local` needs the bench extra), then the row of
    the default configuration against the best offline row."""
    from bench import locomo
    from bench.data import data_file

    providers = tuple(os.environ.get("BENCH_EMBEDDING_PROVIDERS", "e5,local").split(","))
    locomo.run_providers(str(data_file("locomo-dev.json")), providers=providers, output_dir=str(RESULTS_DIR))


def _locomo_dates():
    """A time named in a question as a filter or a boost, against none, on the LOCOMO dev set
    (the configured embedding provider; e5 by default)."""
    from bench import locomo_dates
    from bench.data import data_file

    locomo_dates.run(str(data_file("locomo-dev.json")), output=str(RESULTS_DIR / "locomo-dates.json"))


def _retrieval_study():
    """Ideas beyond the context reranker, scored on the same candidates (one provider: the first
    of BENCH_EMBEDDING_PROVIDERS, default `e5`)."""
    from django.test import override_settings

    from bench import retrieval_study
    from bench.locomo import PROVIDER_MODELS

    provider = os.environ.get("BENCH_EMBEDDING_PROVIDERS", "e5").split(",")[0]
    with override_settings(EMBEDDING_PROVIDER=provider, EMBEDDING_MODEL=PROVIDER_MODELS[provider]):
        retrieval_study.run(RESULTS_DIR)


def _admin():
    from bench import admin

    admin.run(RESULTS_DIR)


def _erasure():
    from bench import erasure

    erasure.run(RESULTS_DIR)


def _privacy_erasure():
    from bench import privacy_erasure

    return privacy_erasure.run(RESULTS_DIR)


def _profiles():
    from bench import profiles

    profiles.run(RESULTS_DIR)


def _profiles_lint():
    from bench import profiles

    profiles.run_lint(RESULTS_DIR)


def _privacy_poisoning():
    from bench import privacy_poisoning

    return privacy_poisoning.run(RESULTS_DIR)


def _scale():
    """BENCH_SCALE_MESSAGES (default 1,000,000) messages, measured at 100k and at that size."""
    from bench import scale

    scale.run(
        RESULTS_DIR,
        messages=int(os.environ.get("BENCH_SCALE_MESSAGES", "1000000")),
        skills=int(os.environ.get("BENCH_SCALE_SKILLS", "100000")),
    )


def _rerank():
    from bench import rerank

    rerank.run(RESULTS_DIR)


def _context():
    """The context block's evidence coverage on LOCOMO against search top-10 at the same budget."""
    from bench import context

    context.run(RESULTS_DIR)


def _broker_pause():
    from bench import broker_pause

    broker_pause.run(RESULTS_DIR)


def _faults():
    from bench import faults

    faults.run(RESULTS_DIR)


def _privacy_slow_clients():
    from bench import privacy_slow_clients

    return privacy_slow_clients.run(RESULTS_DIR)


def _privacy_review_abuse():
    from bench import privacy_review_abuse

    return privacy_review_abuse.run(RESULTS_DIR)


def _privacy():
    """The privacy rows in one command (issues 26 and 39): erasure, poisoning, slow clients and review
    abuse, each writing its own JSON, then bench/results/privacy.json with each row's headline."""
    rows = {
        "privacy_erasure": _privacy_erasure,
        "privacy_poisoning": _privacy_poisoning,
        "privacy_slow_clients": _privacy_slow_clients,
        "privacy_review_abuse": _privacy_review_abuse,
    }
    results = {name: run() for name, run in rows.items()}
    erasure, poisoning = results["privacy_erasure"], results["privacy_poisoning"]
    slow, abuse = results["privacy_slow_clients"], results["privacy_review_abuse"]
    summary = {
        "benchmark": "privacy",
        "erasure": {
            "all_clean": erasure["all_clean"],
            "columns_with_the_words_after": {
                kind: figures["columns_with_the_words_after"] for kind, figures in erasure["kinds"].items()
            },
        },
        "poisoning": {"poisoned_strings_served_to_other_users": poisoning["poisoned_strings_served_to_other_users"]},
        "slow_clients": {
            "p95_seconds_under_slow_clients": slow["after"]["under_slow_clients"]["p95_seconds"],
            "p95_before_over_after": slow["p95_before_over_after"],
        },
        "review_abuse": {**abuse["rows"], "targets_met": abuse["targets_met"]},
    }
    (RESULTS_DIR / "privacy.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary, indent=2))


def _export():
    from bench import export

    export.run(RESULTS_DIR)


def _tokens():
    """The token estimate against cl100k, o200k and e5 on the dev data and blocks; extraction batches by tokens."""
    from bench import tokens

    tokens.run(RESULTS_DIR)


def _consolidate():
    """Merge precision and recall on seeded duplicates of one LOCOMO user's memories, recall@10 kept."""
    from bench import consolidate

    consolidate.run(RESULTS_DIR)


def _topics():
    """Topic pages on LOCOMO: pages per conversation, open-domain evidence they cite, recall@10 with them."""
    from bench import topics

    topics.run(RESULTS_DIR)


BENCHMARKS = {
    "ingest": _ingest,
    "pipeline": _pipeline,
    "pipeline_e2e": _pipeline_e2e,
    "skills": _skills,
    "skill_effect": _skill_effect,
    "locomo": _locomo,
    "locomo_dates": _locomo_dates,
    "erasure": _erasure,
    "admin": _admin,
    "profiles": _profiles,
    "profiles_lint": _profiles_lint,
    "scale": _scale,
    "broker_pause": _broker_pause,
    "rerank": _rerank,
    "retrieval_study": _retrieval_study,
    "privacy_poisoning": _privacy_poisoning,
    "faults": _faults,
    "privacy_erasure": _privacy_erasure,
    "privacy_slow_clients": _privacy_slow_clients,
    "privacy_review_abuse": _privacy_review_abuse,
    "context": _context,
    "export": _export,
    "tokens": _tokens,
    "consolidate": _consolidate,
    "topics": _topics,
}

# Names that run several benchmarks (not part of `make bench`, which runs each benchmark once).
GROUPS = {"privacy": _privacy}


def main(argv: list[str]) -> int:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memory_platform.settings")
    import django

    django.setup()
    import logging

    from django.core.management import call_command

    call_command("migrate", verbosity=0)  # a fresh clone's database, or one behind the code

    logging.getLogger("httpx").setLevel(logging.WARNING)
    names = argv or list(BENCHMARKS)
    unknown = sorted(set(names) - set(BENCHMARKS) - set(GROUPS))
    if unknown:
        print(f"Unknown benchmark(s): {', '.join(unknown)}; available: {', '.join([*BENCHMARKS, *GROUPS])}")
        return 2
    for name in names:
        (GROUPS.get(name) or BENCHMARKS[name])()
    print(f"Results: {RESULTS_DIR}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

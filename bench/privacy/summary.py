"""`python -m bench privacy`: the privacy rows in one command (issues 26, 39 and 54) — erasure, poisoning,
slow clients, review abuse and webhooks — each writing its own JSON, then bench/results/privacy.json
with each row's headline."""

import json

from bench.common import write_result
from bench.privacy import erasure, poisoning, review_abuse, slow_clients, webhooks


def run(output_dir) -> dict:
    erased = erasure.run(output_dir)
    poisoned = poisoning.run(output_dir)
    slow = slow_clients.run(output_dir)
    abuse = review_abuse.run(output_dir)
    hooks = webhooks.run(output_dir)
    summary = {
        "benchmark": "privacy",
        "erasure": {
            "all_clean": erased["all_clean"],
            "columns_with_the_words_after": {
                kind: figures["columns_with_the_words_after"] for kind, figures in erased["kinds"].items()
            },
        },
        "poisoning": {"poisoned_strings_served_to_other_users": poisoned["poisoned_strings_served_to_other_users"]},
        "slow_clients": {
            "p95_seconds_under_slow_clients": slow["after"]["under_slow_clients"]["p95_seconds"],
            "p95_before_over_after": slow["p95_before_over_after"],
        },
        "review_abuse": {**abuse["rows"], "targets_met": abuse["targets_met"]},
        "webhooks": {
            "trickle_delay_seconds_as_deployed": hooks["trickle"]["as_deployed"]["delay_seconds"],
            "trickle_delay_seconds_one_process_for_both_queues": hooks["trickle"]["one_process_for_both_queues"][
                "delay_seconds"
            ],
            "content_then_erasure_residual": hooks["content_then_erasure"]["residual"],
            "internal_spellings_reached": hooks["internal_addresses"]["reached_at_connect_time"],
            "internal_spellings": hooks["internal_addresses"]["spellings"],
            "targets_met": hooks["targets_met"],
        },
    }
    write_result(output_dir, "privacy", summary)
    print(json.dumps(summary, indent=2))
    return summary

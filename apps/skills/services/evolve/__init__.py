"""Evolution: pending experiences of one organisation and scope become skill creations and edits.

Experiences are ranked by importance × credibility (at most EVOLUTION_MAX_EXPERIENCES per
run) and a run changes at most `edit_budget` skills. Consumed experiences made a change;
superseded ones were reviewed and added nothing; the rest stay pending for the next run.
Nothing is ever deleted: a merge archives its sources with a recorded version.

`rules` and `llm` plan the changes (the rule-based and the LLM evolver); `run` plans outside
any transaction, then commits the plan in one, and queues the runs.
"""

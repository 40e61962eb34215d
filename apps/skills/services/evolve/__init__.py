"""Evolution: pending experiences of one organisation and scope become skill creations, edits and
merges; `rules` and `llm` plan the changes, `run` commits them and queues the runs."""

"""How long until what is added is stored, searchable and learned? Ingest through the API, tasks
through one worker, and the whole platform end to end with its shipped defaults."""

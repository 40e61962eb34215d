"""Does it stay fast at size? Search, retrieval and context latency at 100k and 1M messages, the
rerankers' cost, the admin at 100,000 skills, erasure of a large user, export and import at 1M rows."""

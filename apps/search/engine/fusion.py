"""Reciprocal-rank fusion (of a hybrid search's two rankings in SQL, of a question's sub-queries and
time window here) and the per-type caps of a search of several memory types."""

from collections import Counter

from apps.search.engine.hits import Hit

RRF_K = 60
# Fusion weights: the keyword ranking (BM25 with neighbouring-turn context) is the stronger
# signal on conversational memory. Measured on LOCOMO (bench/retrieval/locomo.py, all-MiniLM-L6-v2),
# hybrid recall@10 is 0.664 at 1:1, 0.703 at 2:1 and 0.727 at 3:1.
RRF_KEYWORD_WEIGHT = 3.0
RRF_SEMANTIC_WEIGHT = 1.0


def rrf_scores(rankings, *, key) -> dict:
    """{key(item): (its first item, sum of 1 / (RRF_K + rank) over the rankings)}, keys in first-seen order."""
    fused: dict = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            first, score = fused.get(key(item), (item, 0.0))
            fused[key(item)] = (first, score + 1.0 / (RRF_K + rank))
    return fused


def fused(rankings: list[list[Hit]]) -> list[Hit]:
    """The rankings of several queries (the question and its parts) fused by reciprocal rank."""
    scores = rrf_scores(rankings, key=lambda hit: (hit.source.memory_type, hit.instance.pk))
    order = sorted(scores.values(), key=lambda pair: -pair[1])  # stable: ties keep the question's own order
    return capped([Hit(source=hit.source, instance=hit.instance, score=score) for hit, score in order])


def capped(hits: list[Hit]) -> list[Hit]:
    """Among other types, a type with a `mixed_cap` keeps its best that many hits (rank 1 of a user's
    few pages scores as high as rank 1 of their thousands of turns)."""
    if len({hit.source.memory_type for hit in hits}) < 2:
        return hits  # a search of one type keeps every hit
    caps = {hit.source.memory_type: hit.source.mixed_cap() for hit in hits if hit.source.mixed_cap}
    seen = Counter()
    kept = []
    for hit in hits:
        seen[hit.source.memory_type] += 1
        if seen[hit.source.memory_type] <= caps.get(hit.source.memory_type, len(hits)):
            kept.append(hit)
    return kept

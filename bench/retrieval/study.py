"""What else could lift LOCOMO recall@10 past the context reranker? Each idea, measured the same way.

`python -m bench retrieval_study` (with e5; the first of BENCH_EMBEDDING_PROVIDERS picks another). Per dev
conversation it ingests and embeds the turns as bench/retrieval/locomo.py does, projects and compiles profiles offline,
and keeps, per question, the platform's hybrid ranking (its best 150), its keyword ranking and
the question's vector. Then every idea below reranks those candidates in this process and is
scored like `bench locomo` (recall@10 of the evidence turns; always 10 turns, never a page
standing for many):

- the context reranker at several RERANK_CANDIDATES;
- a held-out-style figure for its weights: they were chosen on all five conversations, so each
  conversation is scored with the weights that a grid search picks on the other four;
- a logistic-regression reranker over the same kind of features, trained the same way
  (leave one conversation out), as a test of whether learned weights beat the hand-set ones;
- the question's named speaker as a hard filter or a stronger bonus;
- a per-session diversity penalty (multi-hop evidence lies in several sessions);
- pseudo-relevance feedback on the query vector (Rocchio);
- turn vectors that include the previous turn (and the next), fused as the platform fuses;
- the turns cited by the best profile page of the question added to the candidates.
"""

import itertools
import json
import math
import re
import statistics
import time
import uuid
from collections import defaultdict
from pathlib import Path

from bench.common import measured_at, run_pending_tasks, write_result
from bench.data import CATEGORIES, data_file, ingest, scored_questions
from bench.retrieval.locomo import PROVIDER_MODELS, recall, rrf_scores

POOL = 150
K = 10


def collect(file: str, *, log=print) -> list[dict]:
    """Per conversation: its turns (with vectors, plain and with neighbours) and, per question,
    the platform's rankings and the best profile pages' cited turns."""
    import numpy as np
    from django.test import override_settings

    from apps.conversations.models import Message
    from apps.providers.embeddings import embed_query, embed_texts
    from apps.search.engine import search
    from apps.tenancy.models import Organization
    from apps.tenancy.services import client_create, organization_create

    samples = json.loads(Path(file).read_text())
    organization = organization_create(name=f"bench-study-{uuid.uuid4().hex[:8]}")
    client, _ = client_create(organization=organization, name="bench", write_scope="bench")
    conversations = []
    try:
        with override_settings(LLM_PROVIDER="rules"):
            for sample in samples:
                started = time.perf_counter()
                user = sample["sample_id"]
                texts = ingest(client, sample)
                run_pending_tasks(organization, task_types=["embed_messages"])
                run_pending_tasks(organization, task_types=["project_entities"])
                run_pending_tasks(organization, task_types=["compile_profile"])
                turns = {}
                for message in Message.objects.filter(organization=organization, end_user__user_id=user).select_related(
                    "session"
                ):
                    turns[message.pk] = {
                        "dia": message.metadata["dia_id"],
                        "session": message.session.session_id,
                        "seq": message.seq,
                        "at": message.occurred_at,
                        "name": message.name,
                        "content": message.content,
                        "text": message.embedding_text(),
                        "vector": message.embedding,
                    }
                ids = list(turns)
                by_turn = {(turns[pk]["session"], turns[pk]["seq"]): turns[pk] for pk in ids}

                def with_neighbours(pk, following):
                    turn = turns[pk]
                    parts = [by_turn.get((turn["session"], turn["seq"] - 1)), turn]
                    if following:
                        parts.append(by_turn.get((turn["session"], turn["seq"] + 1)))
                    return "\n".join(part["text"] for part in parts if part)

                def unit(rows):
                    matrix = np.array(rows, dtype=np.float32)
                    return matrix / np.linalg.norm(matrix, axis=1, keepdims=True)

                vectors = {
                    "turn": unit([turns[pk]["vector"] for pk in ids]),
                    "previous+turn": unit(embed_texts([with_neighbours(pk, False) for pk in ids])),
                    "previous+turn+next": unit(embed_texts([with_neighbours(pk, True) for pk in ids])),
                }
                dia_of = {str(pk): turn["dia"] for pk, turn in turns.items()}
                questions = []
                for qa, evidence in scored_questions(sample, set(texts)):
                    question = str(qa["question"])
                    rankings = {}
                    for method in ("hybrid", "bm25"):
                        hits = search(
                            reader=client.reader,
                            query=question,
                            memory_types=["message"],
                            method=method,
                            limit=POOL,
                            filters={"user_id": user},
                            reranker="none",
                            decomposer="none",
                        )
                        rankings[method] = [(hit.instance.pk, hit.score) for hit in hits]
                    pages = search(
                        reader=client.reader,
                        query=question,
                        memory_types=["profile"],
                        method="hybrid",
                        limit=2,
                        filters={"user_id": user},
                        reranker="none",
                        decomposer="none",
                    )
                    cited = [
                        [
                            dia_of.get(str(ref["item_id"]))
                            for ref in page.instance.source_refs
                            if ref["item_type"] == "message"
                        ]
                        for page in pages
                    ]
                    vector = np.array(embed_query(question), dtype=np.float32)
                    questions.append(
                        {
                            "question": question,
                            "category": qa["category"],
                            "evidence": evidence,
                            **rankings,
                            "vector": vector / np.linalg.norm(vector),
                            "pages": cited,
                        }
                    )
                conversations.append(
                    {
                        "id": user,
                        "turns": turns,
                        "ids": ids,
                        "index": {pk: i for i, pk in enumerate(ids)},
                        "vectors": vectors,
                        "speakers": (sample["conversation"]["speaker_a"], sample["conversation"]["speaker_b"]),
                        "questions": questions,
                    }
                )
                log(f"{user}: {len(turns)} turns, {len(questions)} questions, {time.perf_counter() - started:.0f} s")
    finally:
        Organization.objects.filter(pk=organization.pk).delete()
    return conversations


# Scoring ---------------------------------------------------------------------------------------


def recalls(conversations, ranker) -> list[float]:
    """recall@K per question (in conversation order) of ranker(conversation, question) -> [turn pk]."""
    values = []
    for conversation in conversations:
        for question in conversation["questions"]:
            ranking = [conversation["turns"][pk]["dia"] for pk in ranker(conversation, question)]
            values.append(recall(ranking, question["evidence"], K))
    return values


def summary(conversations, values) -> dict:
    categories = [question["category"] for conversation in conversations for question in conversation["questions"]]
    result = {"overall": round(statistics.mean(values), 4)}
    for category in CATEGORIES:
        result[str(category)] = round(statistics.mean(v for v, c in zip(values, categories) if c == category), 4)
    return result


def candidates(conversation, pairs):
    from apps.search.rerank import Candidate

    return [
        Candidate(
            text=turn["content"],
            score=score,
            session=turn["session"],
            position=turn["seq"],
            occurred_at=turn["at"],
            speaker=turn["name"] or "",
        )
        for turn, score in ((conversation["turns"][pk], score) for pk, score in pairs)
    ]


def context_order(conversation, question, pairs) -> list:
    from apps.search.rerank import context_scores

    scores = context_scores(question["question"], candidates(conversation, pairs))
    return [pairs[i][0] for i in sorted(range(len(pairs)), key=lambda i: (-scores[i], i))]


def fused(conversation, question, vector_name="turn", query_vector=None, keyword_weight=3.0) -> list:
    """The platform's hybrid fusion (RRF, k 60, keyword 3:1) of its keyword ranking and an exact
    cosine ranking over the chosen turn vectors."""
    import numpy as np

    vector = question["vector"] if query_vector is None else query_vector
    dense = [
        conversation["ids"][index] for index in np.argsort(-(conversation["vectors"][vector_name] @ vector))[:POOL]
    ]
    keyword = [pk for pk, _ in question["bm25"][:POOL]]
    return rrf_scores([keyword, dense], [keyword_weight, 1.0])


def named_speakers(conversation, question) -> list[str]:
    text = question["question"].lower()
    return [name for name in conversation["speakers"] if re.search(rf"\b{re.escape(name.lower())}\b", text)]


# The ideas -------------------------------------------------------------------------------------


def study_pool(conversations, results, log):
    for size in (30, 50, 100, 150):
        results[f"context, {size} candidates"] = summary(
            conversations, recalls(conversations, lambda c, q: context_order(c, q, q["hybrid"][:size]))
        )


def study_held_out_weights(conversations, results, log):
    """Leave one conversation out: the context weights a grid search picks on four, scored on the fifth."""
    import numpy as np

    from apps.search import rerank

    grid = list(itertools.product((0.15, 0.3, 0.45), (0.1, 0.2, 0.3), (0.05, 0.15, 0.3), (0.15, 0.3, 0.5), (1, 2)))
    names = (
        "CONTEXT_NEIGHBOUR_WEIGHT",
        "CONTEXT_SESSION_WEIGHT",
        "CONTEXT_SPEAKER_WEIGHT",
        "CONTEXT_DATE_WEIGHT",
        "CONTEXT_NEIGHBOUR_DISTANCE",
    )
    shipped = tuple(getattr(rerank, name) for name in names)
    matrix = []
    try:
        for weights in grid:
            for name, value in zip(names, weights):
                setattr(rerank, name, value)
            matrix.append(recalls(conversations, lambda c, q: context_order(c, q, q["hybrid"][:50])))
    finally:
        for name, value in zip(names, shipped):
            setattr(rerank, name, value)
    matrix = np.array(matrix)
    owner = np.array([n for n, conversation in enumerate(conversations) for _ in conversation["questions"]])
    held_out = np.zeros(matrix.shape[1])
    for fold in range(len(conversations)):
        best = int(matrix[:, owner != fold].mean(1).argmax())
        held_out[owner == fold] = matrix[best, owner == fold]
        log(f"  fold {conversations[fold]['id']}: weights picked on the others {grid[best]}")
    if shipped in grid:
        results["context, shipped weights (chosen on all five)"] = summary(
            conversations, list(matrix[grid.index(shipped)])
        )
    results["context, weights chosen without the scored conversation"] = summary(conversations, list(held_out))


def _features(conversation, question, size):
    """Per candidate: fused score, keyword score, 1/rank, best neighbour score (±1, ±2), the rest of
    its session, speaker named, date named, log length; all from the candidates alone."""
    import numpy as np

    from apps.search.rerank import _NAME_WORD, _date_match, _names_speaker, _query_dates

    pairs = question["hybrid"][:size]
    top = pairs[0][1] if pairs else 1.0
    keyword = dict(question["bm25"])
    keyword_top = max(keyword.values(), default=1.0) or 1.0
    by_turn, session_total = {}, defaultdict(float)
    for pk, score in pairs:
        turn = conversation["turns"][pk]
        by_turn[(turn["session"], turn["seq"])] = score / top
        session_total[turn["session"]] += score / top
    best_session = max(session_total.values(), default=1.0)
    months, years = _query_dates(question["question"])
    words = set(_NAME_WORD.findall(question["question"].lower()))
    rows = []
    for rank, (pk, score) in enumerate(pairs):
        turn = conversation["turns"][pk]
        session, seq = turn["session"], turn["seq"]
        candidate = candidates(conversation, [(pk, score)])[0]
        rows.append(
            [
                score / top,
                keyword.get(pk, 0.0) / keyword_top,
                1.0 / (1 + rank),
                max(by_turn.get((session, seq + offset), 0.0) for offset in (-2, -1, 1, 2)),
                max(by_turn.get((session, seq + offset), 0.0) for offset in (-1, 1)),
                (session_total[session] - score / top) / best_session,
                _names_speaker(words, candidate),
                _date_match(candidate, months, years),
                math.log1p(len(turn["content"])),
            ]
        )
    labels = [conversation["turns"][pk]["dia"] in question["evidence"] for pk, _ in pairs]
    return [pk for pk, _ in pairs], np.array(rows, dtype=np.float64), np.array(labels)


def study_learned(conversations, results, log):
    import numpy as np
    from sklearn.linear_model import LogisticRegression

    for size in (50, 100):
        data = {
            (n, m): _features(c, q, size) for n, c in enumerate(conversations) for m, q in enumerate(c["questions"])
        }
        models = {}
        for fold in range(len(conversations)):
            train = [value for key, value in data.items() if key[0] != fold]
            models[fold] = LogisticRegression(max_iter=3000).fit(
                np.vstack([x for _, x, _ in train]), np.concatenate([y for _, _, y in train])
            )
        index = {id(q): (n, m) for n, c in enumerate(conversations) for m, q in enumerate(c["questions"])}

        def ranker(conversation, question):
            n, m = index[id(question)]
            pks, features, _ = data[(n, m)]
            scores = models[n].decision_function(features)
            return [pks[i] for i in np.argsort(-scores, kind="stable")]

        results[f"logistic regression, {size} candidates, trained without the scored conversation"] = summary(
            conversations, recalls(conversations, ranker)
        )


def study_speaker(conversations, results, log):
    from apps.search import rerank

    def filtered(conversation, question):
        names = named_speakers(conversation, question)
        pairs = question["hybrid"]
        if len(names) == 1:
            pairs = [pair for pair in pairs if conversation["turns"][pair[0]]["name"] == names[0]]
        return context_order(conversation, question, pairs[:50])

    results["named speaker's turns only, then context"] = summary(conversations, recalls(conversations, filtered))
    shipped = rerank.CONTEXT_SPEAKER_WEIGHT
    try:
        for weight in (0.3, 1.0):
            rerank.CONTEXT_SPEAKER_WEIGHT = weight
            results[f"context, speaker bonus {weight}"] = summary(
                conversations, recalls(conversations, lambda c, q: context_order(c, q, q["hybrid"][:50]))
            )
    finally:
        rerank.CONTEXT_SPEAKER_WEIGHT = shipped


def study_diversity(conversations, results, log):
    from apps.search.rerank import context_scores

    def diverse(penalty):
        def ranker(conversation, question):
            pairs = question["hybrid"][:50]
            scores = context_scores(question["question"], candidates(conversation, pairs))
            top = max(scores)
            remaining, chosen, per_session = list(range(len(pairs))), [], defaultdict(int)
            while remaining and len(chosen) < K:
                best = max(
                    remaining,
                    key=lambda i: (
                        scores[i] / top - penalty * per_session[conversation["turns"][pairs[i][0]]["session"]]
                    ),
                )
                remaining.remove(best)
                chosen.append(pairs[best][0])
                per_session[conversation["turns"][pairs[best][0]]["session"]] += 1
            return chosen

        return ranker

    for penalty in (0.02, 0.05, 0.1):
        results[f"context, session diversity penalty {penalty}"] = summary(
            conversations, recalls(conversations, diverse(penalty))
        )


def study_feedback(conversations, results, log):
    def rocchio(top, beta):
        def ranker(conversation, question):
            rows = [conversation["index"][pk] for pk, _ in question["hybrid"][:top]]
            vector = question["vector"] + beta * conversation["vectors"]["turn"][rows].mean(0)
            vector = vector / (vector @ vector) ** 0.5
            return context_order(conversation, question, fused(conversation, question, query_vector=vector)[:50])

        return ranker

    results["hybrid re-fused here (check: matches the platform)"] = summary(
        conversations, recalls(conversations, lambda c, q: context_order(c, q, fused(c, q)[:50]))
    )
    for top, beta in ((3, 0.5), (5, 0.5), (10, 0.5)):
        results[f"context, Rocchio feedback from the best {top} (beta {beta})"] = summary(
            conversations, recalls(conversations, rocchio(top, beta))
        )


def study_neighbour_vectors(conversations, results, log):
    import numpy as np

    for name in ("previous+turn", "previous+turn+next"):

        def dense_only(conversation, question, name=name):
            order = np.argsort(-(conversation["vectors"][name] @ question["vector"]))
            return [conversation["ids"][i] for i in order]

        results[f"embedding alone, {name} vectors"] = summary(conversations, recalls(conversations, dense_only))
        for keyword_weight in (3.0, 2.0):
            results[f"context over hybrid, {name} vectors, keyword {keyword_weight:g}:1"] = summary(
                conversations,
                recalls(
                    conversations,
                    lambda c, q, n=name, w=keyword_weight: context_order(c, q, fused(c, q, n, keyword_weight=w)[:50]),
                ),
            )
    results["embedding alone, turn vectors"] = summary(
        conversations,
        recalls(conversations, lambda c, q: [c["ids"][i] for i in np.argsort(-(c["vectors"]["turn"] @ q["vector"]))]),
    )


def study_profile_pages(conversations, results, log):
    def injected(pages):
        def ranker(conversation, question):
            pk_of = {turn["dia"]: pk for pk, turn in conversation["turns"].items()}
            fused_scores = dict(question["hybrid"])
            pairs = list(question["hybrid"][:50])
            seen = {pk for pk, _ in pairs}
            floor = pairs[-1][1] if pairs else 0.0
            for cited in question["pages"][:pages]:
                for dia in cited:
                    pk = pk_of.get(dia)
                    if pk is not None and pk not in seen:
                        pairs.append((pk, fused_scores.get(pk, floor)))
                        seen.add(pk)
            return context_order(conversation, question, pairs)

        return ranker

    for pages in (1, 2):
        results[f"context, plus the turns cited by the best {pages} profile page(s)"] = summary(
            conversations, recalls(conversations, injected(pages))
        )


STUDIES = (
    study_pool,
    study_held_out_weights,
    study_learned,
    study_speaker,
    study_diversity,
    study_feedback,
    study_neighbour_vectors,
    study_profile_pages,
)


def run(output_dir: Path, *, file: str | None = None, log=print) -> dict:
    """On one provider's candidates: the first of BENCH_EMBEDDING_PROVIDERS (default `e5`)."""
    import os

    from django.test import override_settings

    provider = os.environ.get("BENCH_EMBEDDING_PROVIDERS", "e5").split(",")[0]
    with override_settings(EMBEDDING_PROVIDER=provider, EMBEDDING_MODEL=PROVIDER_MODELS[provider]):
        return _run(output_dir, file=file, log=log)


def _run(output_dir: Path, *, file: str | None, log) -> dict:
    from django.conf import settings

    from apps.providers.embeddings import embedding_model_name

    conversations = collect(file or str(data_file("locomo-dev.json")), log=log)
    results = {}
    for study in STUDIES:
        started = time.perf_counter()
        study(conversations, results, log)
        log(f"{study.__name__}: {time.perf_counter() - started:.0f} s")
    questions = sum(len(conversation["questions"]) for conversation in conversations)
    log(
        f"\nLOCOMO recall@{K} ({questions} questions, {embedding_model_name()}): overall / c1 multi-hop / c2 temporal / c3 open-domain / c4 single-hop"
    )
    for name, row in results.items():
        log(f"  {name:<78} {row['overall']:.3f} / " + " / ".join(f"{row[str(c)]:.3f}" for c in CATEGORIES))
    report = {
        "questions": questions,
        "embedding_provider": settings.EMBEDDING_PROVIDER,
        "embedding_model": embedding_model_name(),
        "measured_at": measured_at(),
        "recall@10": results,
    }
    log(f"written to {write_result(output_dir, 'retrieval_study', report)}")
    return report

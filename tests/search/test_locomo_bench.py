"""The LOCOMO harness (bench/retrieval/locomo.py) on a small conversation in its format, written here."""

import json

import pytest

from bench.retrieval import locomo
from harness.fake_openai import fake_openai  # noqa: F401  (the scripted LLM server fixture)

pytestmark = pytest.mark.django_db

CONVERSATION = {
    "sample_id": "conv-test",
    "conversation": {
        "speaker_a": "Tim",
        "speaker_b": "John",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Tim", "dia_id": "D1:1", "text": "I just finished The Hobbit, what a story."},
            {"speaker": "John", "dia_id": "D1:2", "text": "Nice! I went surfing at the beach."},
        ],
        "session_2_date_time": "3:00 pm on 20 June, 2023",
        "session_2": [
            {"speaker": "John", "dia_id": "D2:1", "text": "How was your week?"},
            {"speaker": "Tim", "dia_id": "D2:2", "text": "Reading Harry Potter again, and a novel by Le Guin."},
        ],
    },
    "qa": [
        {
            "question": "What books has Tim read?",
            "answer": "The Hobbit, Harry Potter",
            "evidence": ["D1:1", "D2:2"],
            "category": 1,
        },
        {"question": "Where did John go surfing?", "answer": "the beach", "evidence": ["D1:2"], "category": 4},
        {"question": "An adversarial question", "answer": "", "evidence": ["D1:1"], "category": 5},
    ],
}


@pytest.fixture
def dataset(tmp_path):
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps([CONVERSATION]))
    return str(path)


def test_the_harness_reports_each_method_and_reranker_and_leaves_out_decomposition_without_an_llm(dataset, settings):
    settings.LLM_PROVIDER = "rules"
    results = locomo.evaluate(dataset, methods=("bm25", "hybrid"), log=lambda *args: None)
    assert results["questions"] == 2  # category 5 is not scored
    assert set(results["methods"]) == {
        "bm25",
        "bm25+context",
        "hybrid",
        "hybrid+context",
        "baseline_bm25",
        "baseline_dense",
        "baseline_rrf",
    }
    assert results["methods"]["bm25"]["by_category"]["4"]["recall@1"] == 1.0  # "surfing" names one turn


def test_with_an_llm_the_harness_measures_decomposed_searches(dataset, settings, fake_openai):
    settings.LLM_PROVIDER = "openai"
    # Per question, hybrid+decompose then hybrid+context+decompose ask the model.
    for _ in range(2):
        fake_openai.add_json({"queries": ["The Hobbit", "Harry Potter"]})
    for _ in range(2):
        fake_openai.add_json({"queries": []})  # nothing to split: the question alone
    results = locomo.evaluate(dataset, methods=("hybrid",), log=lambda *args: None)
    assert results["methods"]["hybrid+decompose"]["decomposed_share"] == 0.5
    assert results["methods"]["hybrid+context+decompose"]["decomposed_share"] == 0.5
    asked = [request["messages"][1]["content"] for request in fake_openai.chat_requests()]
    assert asked == ["Question: What books has Tim read?"] * 2 + ["Question: Where did John go surfing?"] * 2


def test_the_defaults_row_is_reported_beside_the_best_offline_row(dataset, settings):
    settings.LLM_PROVIDER, settings.RERANKER = "rules", "context"
    results = locomo.run_providers(dataset, providers=("hash",), log=lambda *args: None, methods=("bm25", "hybrid"))
    defaults = locomo.defaults_row(results, provider="hash", reranker="context")
    assert results["defaults"] == defaults
    hybrid_context = results["hash"]["methods"]["hybrid+context"]["overall"]["recall@10"]
    assert defaults["method"] == "hybrid+context" and defaults["recall@10"] == hybrid_context
    best = max(
        entry["overall"]["recall@10"]
        for name, entry in results["hash"]["methods"].items()
        if not name.startswith("baseline_")
    )
    assert defaults["best"]["recall@10"] == best and defaults["is_best"] == (hybrid_context == best)
    # A default provider that was not measured has no row, and is not called the best.
    assert locomo.defaults_row(results, provider="e5", reranker="context")["is_best"] is False

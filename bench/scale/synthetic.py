"""Synthetic data at size: texts over a Zipf vocabulary with the hash embedder's vectors (computed with
numpy, so a million are quick), and one end user's turns, memories and experiences seeded by SQL."""

DIMENSIONS = 384
VOCABULARY = 5000
MESSAGES_PER_SESSION = 100
EMBEDDED_SHARE = 0.1


def vocabulary(rng):
    """VOCABULARY made-up words and their Zipf probabilities (the commonest first)."""
    import numpy as np

    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    words = sorted({"".join(rng.choice(letters, size=rng.integers(4, 10))) for _ in range(VOCABULARY * 2)})[:VOCABULARY]
    ranks = np.arange(1, len(words) + 1)
    weights = 1.0 / ranks
    return words, weights / weights.sum()


def word_vectors(words):
    """Each word's hash-embedder feature vector (one signed bucket), as a matrix."""
    import numpy as np

    from apps.providers.embeddings import _hash_embed

    return np.array([_hash_embed(word, DIMENSIONS) for word in words], dtype=np.float32)


def texts_and_vectors(rng, words, probabilities, word_matrix, count, low=8, high=30):
    """`count` texts of `low` to `high` words drawn by probability, and their unit hash vectors."""
    import numpy as np

    lengths = rng.integers(low, high, size=count)
    indices = rng.choice(len(words), size=int(lengths.sum()), p=probabilities)
    texts, vectors = [], np.zeros((count, DIMENSIONS), dtype=np.float32)
    position = 0
    for row, length in enumerate(lengths):
        chosen = indices[position : position + length]
        position += length
        texts.append(" ".join(words[i] for i in chosen))
        np.add.at(vectors[row], slice(None), word_matrix[chosen].sum(axis=0))
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    norms[norms == 0] = 1
    return texts, vectors / norms


def _vector_sql(seed: str) -> str:
    """A deterministic, varied DIMENSIONS-dimensional vector computed in SQL from an integer expression."""
    return f"(SELECT ('[' || string_agg(to_char(sin(({seed}) * 0.37 + j), 'FM0.000000'), ',') || ']')::vector FROM generate_series(1, {DIMENSIONS}) j)"


def seed_subject(organization, client, end_user, *, messages: int, memories: int, experiences: int) -> None:
    """One end user's sealed sessions of MESSAGES_PER_SESSION turns (EMBEDDED_SHARE of them with vectors),
    `memories` memories (half episodic, half semantic, one history row each) and `experiences` skill
    experiences, written by set-based INSERTs: seconds for 100,000 turns, not minutes."""
    from django.db import connection, transaction

    from apps.conversations.models import Message, Session
    from apps.memories.models import EpisodicMemory, EpisodicMemoryChange, SemanticMemory, SemanticMemoryChange
    from apps.skills.models import SkillExperience

    sessions = max(1, messages // MESSAGES_PER_SESSION)
    embedded_every = max(1, round(1 / EMBEDDED_SHARE)) if EMBEDDED_SHARE else 0
    params = {"org": organization.pk, "user": end_user.pk, "client": client.pk}
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            f"""INSERT INTO {Session._meta.db_table} (id, created_at, updated_at, organization_id, end_user_id, client_id,
                scope, session_id, session_tag, status, outcome, filter_tags, message_count, last_seq, last_message_at)
            SELECT gen_random_uuid(), now(), now(), %(org)s, %(user)s, %(client)s, 'default', 'bench-' || n,
                'conversation', 'sealed', 'unknown', '{{"scope": "default"}}', {MESSAGES_PER_SESSION}, {MESSAGES_PER_SESSION}, now()
            FROM generate_series(1, {sessions}) n""",
            params,
        )
        cursor.execute(
            f"""INSERT INTO {Message._meta.db_table} (id, created_at, updated_at, organization_id, end_user_id, scope,
                session_id, seq, role, name, content, tool_calls, tool_call_id, metadata, truncated, occurred_at, created_by_id,
                context, embedding, embedding_model, learned_at)
            SELECT gen_random_uuid(), now(), now(), %(org)s, %(user)s, 'default', s.id, k,
                CASE WHEN k %% 2 = 1 THEN 'user' ELSE 'assistant' END, '',
                'Turn ' || k || ' of ' || s.session_id || ': the subject talked about trip ' || (k * 7919 %% 1000) || ' and plan ' || md5(s.id::text || k),
                NULL, '', '{{}}', false, now(), %(client)s, '',
                CASE WHEN {embedded_every} > 0 AND k %% {embedded_every or 1} = 0 THEN {_vector_sql("hashtext(s.id::text) + k")} END,
                CASE WHEN {embedded_every} > 0 AND k %% {embedded_every or 1} = 0 THEN 'bench' ELSE '' END, NULL
            FROM {Session._meta.db_table} s, generate_series(1, {MESSAGES_PER_SESSION}) k
            WHERE s.end_user_id = %(user)s""",
            params,
        )
        for memory_model, change_model, extra_columns, extra_values in (
            (
                EpisodicMemory,
                EpisodicMemoryChange,
                "occurred_at, time_granularity, actor, event_type",
                "now(), 'day', 'subject', 'trip'",
            ),
            (SemanticMemory, SemanticMemoryChange, "name, source", "'subject fact ' || n, 'bench'"),
        ):
            cursor.execute(
                f"""INSERT INTO {memory_model._meta.db_table} (id, created_at, updated_at, organization_id, scope, end_user_id,
                    source_message_ids, summary, details, embedding, embedding_model, {extra_columns})
                SELECT gen_random_uuid(), now(), now(), %(org)s, 'default', %(user)s, '{{}}',
                    'The subject remembered trip ' || n || ' ' || md5(n::text), '', {_vector_sql("n")}, 'bench', {extra_values}
                FROM generate_series(1, {memories // 2}) n""",
                params,
            )
            cursor.execute(
                f"""INSERT INTO {change_model._meta.db_table} (id, created_at, updated_at, memory_id, operation, previous_value,
                    new_value, actor, reason)
                SELECT gen_random_uuid(), now(), now(), m.id, 'add', NULL, jsonb_build_object('summary', m.summary), 'bench', ''
                FROM {memory_model._meta.db_table} m WHERE m.end_user_id = %(user)s""",
                params,
            )
        cursor.execute(
            f"""INSERT INTO {SkillExperience._meta.db_table} (id, created_at, updated_at, organization_id, scope, end_user_id,
                session_id, source_message_ids, experience_type, title, content, importance, credibility, evidence,
                action_signature, status, created_by_id, embedding, embedding_model)
            SELECT gen_random_uuid(), now(), now(), %(org)s, 'default', %(user)s, NULL, '{{}}', 'worth_learning',
                'Lesson ' || n, 'Request: trip ' || n || E'\\nSteps:\\n1. search_flights(date)', 0.5, 0.5,
                jsonb_build_object('quote', 'trip ' || n, 'signal_type', 'inferred'), '{{search_flights}}', 'consumed',
                %(client)s, NULL, ''
            FROM generate_series(1, {experiences}) n""",
            params,
        )

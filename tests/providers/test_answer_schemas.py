"""Every answer shape of an LLM call: the JSON Schema sent is what the parser accepts, strict where it can be."""

import jsonschema
import pytest

from apps.memories.services.llm_extractor import ExtractionAnswer
from apps.profiles.services.compile import ProfilePageAnswer
from apps.profiles.services.lint import ContradictionsAnswer
from apps.providers.llm import answer_schema, parse_answer
from apps.search.decompose import QueriesAnswer
from apps.search.rerank import RankingAnswer
from apps.skills.services.evolve.llm import EvolveAnswer
from apps.skills.services.lessons import LessonsAnswer

# answer model → (strict?, an answer a model in strict mode could give)
ANSWERS = {
    LessonsAnswer: (
        True,
        {
            "lessons": [
                {
                    "experience_type": "worth_avoiding",
                    "title": "Check seats first",
                    "content": "Search availability before update_flight.",
                    "importance": 0.8,
                    "credibility": 0.9,
                    "evidence": {"quote": "check first", "seqs": [5], "signal_type": "user_critique"},
                },
                {
                    "experience_type": "worth_learning",
                    "title": "t",
                    "content": "c",
                    "importance": 0.1,
                    "credibility": 0.1,
                    "evidence": None,
                },
            ]
        },
    ),
    ExtractionAnswer: (
        True,
        {
            "episodic": [
                {
                    "operation": "add",
                    "id": None,
                    "turns": [1],
                    "summary": "Caroline went to a support group.",
                    "details": None,
                    "reason": None,
                    "occurred_at": "2023-05-07",
                    "time_granularity": "day",
                    "actor": "Caroline",
                    "event_type": None,
                }
            ],
            "semantic": [
                {
                    "operation": "delete",
                    "id": "S1",
                    "turns": [],
                    "summary": None,
                    "details": None,
                    "reason": "retracted",
                    "name": None,
                    "source": None,
                }
            ],
        },
    ),
    EvolveAnswer: (
        False,  # examples are free-form objects
        {
            "operations": [
                {
                    "op": "create",
                    "name": "rebook",
                    "description": "d",
                    "instructions": "i",
                    "triggers": ["rebook"],
                    "examples": [{"input": "x"}],
                    "entry_type": "workflow",
                    "experiences": ["E1"],
                },
                {"op": "edit", "skill": "booking", "changes": {"triggers": ["book"]}, "experiences": ["E2"]},
            ]
        },
    ),
    ProfilePageAnswer: (True, {"markdown": "# Melanie\n- Paints [1]", "used": [1]}),
    ContradictionsAnswer: (True, {"contradictions": [{"page": 1, "peer": 2, "detail": "hikes / never hikes"}]}),
    RankingAnswer: (True, {"ranking": [3, 1]}),
    QueriesAnswer: (True, {"queries": ["beagle puppy", "leash"]}),
}


def _objects(node):
    if isinstance(node, dict):
        if node.get("type") == "object":
            yield node
        for value in node.values():
            yield from _objects(value)
    elif isinstance(node, list):
        for value in node:
            yield from _objects(value)


@pytest.mark.parametrize("answer", list(ANSWERS), ids=lambda answer: answer.__name__)
def test_the_schema_sent_describes_what_the_parser_accepts(answer):
    strict, example = ANSWERS[answer]
    schema, is_strict = answer_schema(answer)
    assert is_strict is strict
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate(example, schema)
    parse_answer(answer, example)
    if strict:  # OpenAI's rules for strict mode: every object closed, every property required
        for node in _objects(schema):
            assert node["additionalProperties"] is False and node["required"] == list(node["properties"])
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"unexpected": True}, schema)

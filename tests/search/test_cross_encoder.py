"""The cross-encoder loads a real ONNX model and tokenizer from RERANKER_MODEL_PATH: a tiny one,
built here, whose relevance logit is the sum of a learned weight per token of the pair."""

import pytest
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from apps.search.cross_encoder import CrossEncoder, cross_encoder
from apps.search.engine import search

pytestmark = pytest.mark.django_db

VOCABULARY = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "harness", "leash", "puppy", "max", "shoe", "weather", "rainy"]
# The "model" has learned that harness and leash matter, puppy a little, weather not at all.
WEIGHTS = {"harness": 3.0, "leash": 2.0, "puppy": 0.5, "weather": -1.0}


def build_model(directory, *, with_token_types=True):
    import numpy as np
    import onnx
    from onnx import TensorProto, helper
    from tokenizers import Tokenizer, models, pre_tokenizers, processors

    vocabulary = {token: number for number, token in enumerate(VOCABULARY)}
    tokenizer = Tokenizer(models.WordLevel(vocabulary, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1", special_tokens=[("[CLS]", 2), ("[SEP]", 3)]
    )
    tokenizer.save(str(directory / "tokenizer.json"))

    table = np.array([[WEIGHTS.get(token, 0.0)] for token in VOCABULARY], dtype=np.float32)
    inputs = ["input_ids", "attention_mask"] + (["token_type_ids"] if with_token_types else [])
    nodes = [
        helper.make_node("Gather", ["table", "input_ids"], ["token_weights"]),  # [N, L, 1]
        helper.make_node("Cast", ["attention_mask"], ["mask"], to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", ["mask", "last_axis"], ["mask3"]),
        helper.make_node("Mul", ["token_weights", "mask3"], ["masked"]),
        helper.make_node("ReduceSum", ["masked", "sequence_axis"], ["logits"], keepdims=0),  # [N, 1]
    ]
    if with_token_types:  # read, so the graph really takes it, but adds nothing
        nodes += [
            helper.make_node("Cast", ["token_type_ids"], ["types"], to=TensorProto.FLOAT),
            helper.make_node("ReduceSum", ["types", "sequence_axis"], ["type_count"], keepdims=1),
            helper.make_node("Mul", ["type_count", "zero"], ["nothing"]),
            helper.make_node("Add", ["logits", "nothing"], ["scores"]),
        ]
    graph = helper.make_graph(
        nodes,
        "tiny-cross-encoder",
        [helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", "tokens"]) for name in inputs],
        [helper.make_tensor_value_info("scores" if with_token_types else "logits", TensorProto.FLOAT, ["batch", 1])],
        initializer=[
            helper.make_tensor("table", TensorProto.FLOAT, table.shape, table.flatten().tolist()),
            helper.make_tensor("last_axis", TensorProto.INT64, [1], [2]),
            helper.make_tensor("sequence_axis", TensorProto.INT64, [1], [1]),
            helper.make_tensor("zero", TensorProto.FLOAT, [], [0.0]),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(directory / "model.onnx"))
    return directory


@pytest.fixture
def model_dir(tmp_path):
    cross_encoder.cache_clear()
    yield build_model(tmp_path)
    cross_encoder.cache_clear()


@pytest.mark.parametrize("with_token_types", [True, False])
def test_the_model_scores_each_pair_with_its_learned_weights(tmp_path, with_token_types):
    model = CrossEncoder(str(build_model(tmp_path, with_token_types=with_token_types)))
    texts = ["a new harness and a leash", "rainy weather", "puppy", "nothing known here"] * 5  # more than one batch
    scores = model.scores("puppy harness", texts)
    # The question's own tokens add 3.5 to every pair; then each text's weights.
    assert scores[:4] == pytest.approx([3.5 + 5.0, 3.5 - 1.0, 3.5 + 0.5, 3.5])
    assert scores == pytest.approx(scores[:4] * 5)


def test_the_model_file_may_be_named_directly(model_dir):
    assert CrossEncoder(str(model_dir / "model.onnx")).scores("leash", ["leash"]) == pytest.approx([4.0])


def test_the_cross_encoder_reranks_a_search(client_a, add_messages, model_dir, settings):
    settings.RERANKER, settings.RERANKER_MODEL_PATH = "cross-encoder", str(model_dir)
    add_messages(
        client_a,
        user_id="alice",
        session_id="pets",
        messages=[
            {"role": "user", "content": text}
            for text in ("puppy puppy puppy max", "rainy weather for the puppy", "a harness for the puppy")
        ],
    )
    fused = search(
        reader=client_a.reader,
        query="puppy",
        memory_types=["message"],
        method="bm25",
        limit=10,
        filters={"user_id": "alice"},
        reranker="none",
    )
    assert fused[0].instance.content == "puppy puppy puppy max"
    hits = search(
        reader=client_a.reader,
        query="puppy",
        memory_types=["message"],
        method="bm25",
        limit=10,
        filters={"user_id": "alice"},
    )
    assert hits.reranked_by == "cross-encoder"
    assert [hit.instance.content for hit in hits] == [
        "a harness for the puppy",
        "puppy puppy puppy max",
        "rainy weather for the puppy",
    ]
    # 0.5 per "puppy" (the question's too), 3 for harness, -1 for weather.
    assert [hit.score for hit in hits] == pytest.approx([4.0, 2.0, 0.0])


def test_a_missing_model_keeps_the_fused_order_and_check_reports_it(client_a, add_messages, tmp_path, settings):
    cross_encoder.cache_clear()
    settings.RERANKER, settings.RERANKER_MODEL_PATH = "cross-encoder", str(tmp_path / "nowhere")
    add_messages(
        client_a, user_id="alice", session_id="pets", messages=[{"role": "user", "content": "a puppy harness"}]
    )
    hits = search(
        reader=client_a.reader,
        query="puppy",
        memory_types=["message"],
        method="bm25",
        limit=10,
        filters={"user_id": "alice"},
    )
    assert hits.reranked_by is None and len(hits) == 1
    with pytest.raises(SystemCheckError, match="model.onnx"):
        call_command("check")
    settings.RERANKER = "magic"
    with pytest.raises(SystemCheckError, match="RERANKER='magic' is not valid; use one of none, context"):
        call_command("check")

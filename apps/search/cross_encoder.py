"""The cross-encoder reranker: an operator-supplied ONNX (question, item) model and its tokenizer.json
at RERANKER_MODEL_PATH, run on CPU; nothing is downloaded (`manage.py check` reports a missing file)."""

from functools import lru_cache
from pathlib import Path

from django.conf import settings

MAX_TOKENS = 512
BATCH_SIZE = 16


def model_files(path: str) -> tuple[Path, Path]:
    """(model.onnx, tokenizer.json) of RERANKER_MODEL_PATH."""
    location = Path(path)
    model = location if location.suffix == ".onnx" else location / "model.onnx"
    return model, model.parent / "tokenizer.json"


class CrossEncoder:
    def __init__(self, path: str):
        import onnxruntime
        from tokenizers import Tokenizer

        model_file, tokenizer_file = model_files(path)
        for file in (model_file, tokenizer_file):
            if not file.is_file():
                raise FileNotFoundError(f"RERANKER_MODEL_PATH: {file} is missing.")
        options = onnxruntime.SessionOptions()
        options.log_severity_level = 3
        # Worker threads that spin while waiting for work hold the CPU from the web server's
        # other requests (and on a busy machine make every call wait for a core).
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.session = onnxruntime.InferenceSession(str(model_file), options, providers=["CPUExecutionProvider"])
        self.inputs = {item.name for item in self.session.get_inputs()}
        self.tokenizer = Tokenizer.from_file(str(tokenizer_file))
        # The model's own limit if its tokenizer has one; pad to the longest pair of each batch,
        # not to a fixed length (exported tokenizers often pad every pair to 128 or 512 tokens).
        truncation = self.tokenizer.truncation
        self.tokenizer.enable_truncation(
            max_length=min(truncation["max_length"], MAX_TOKENS) if truncation else MAX_TOKENS
        )
        padding = self.tokenizer.padding or {}
        self.tokenizer.enable_padding(pad_id=padding.get("pad_id", 0), pad_token=padding.get("pad_token", "[PAD]"))

    def scores(self, query: str, texts: list[str]) -> list[float]:
        """One relevance logit per text (the last output column: the "relevant" class of a two-class head)."""
        import numpy as np

        scores: list[float] = []
        for start in range(0, len(texts), BATCH_SIZE):
            encodings = self.tokenizer.encode_batch([(query, text) for text in texts[start : start + BATCH_SIZE]])
            feed = {
                "input_ids": np.array([encoding.ids for encoding in encodings], dtype=np.int64),
                "attention_mask": np.array([encoding.attention_mask for encoding in encodings], dtype=np.int64),
                "token_type_ids": np.array([encoding.type_ids for encoding in encodings], dtype=np.int64),
            }
            (logits, *_) = self.session.run(None, {name: value for name, value in feed.items() if name in self.inputs})
            scores += np.asarray(logits, dtype=np.float64).reshape(len(encodings), -1)[:, -1].tolist()
        return scores


cross_encoder = lru_cache(maxsize=2)(CrossEncoder)


def cross_encoder_scores(query: str, candidates) -> list[float]:
    return cross_encoder(settings.RERANKER_MODEL_PATH).scores(query, [candidate.text for candidate in candidates])

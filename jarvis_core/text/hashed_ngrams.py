"""A cheap, deterministic stand-in for the embedding model, for benchmarks at sizes the model
would take hours to embed on a CPU (``jarvis bench scale --embedder hashed-ngrams``).

Each word of a text (lower-cased ``\\w+`` runs) and each pair of adjacent words is hashed
(CRC-32, the same in every process) to one of the model's ``dimension`` coordinates and a
sign, each at most once per text, and the vector is scaled to unit length. Texts that share
words point alike, so it ranks lexically (a keyword match without IDF); it knows nothing of
meaning. Its vectors are not the model's: the backend ``hashed-ngrams``
(jarvis_core/embedding_backends.py) gives them their own collection, embedding cache and
entry in a published version's manifest, and a query process encodes queries with this same
function when the version says so (numpy only: no torch, no model file).
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence

import numpy as np

_WORD = re.compile(r"\w+")
_SIGN_BIT = 1 << 31


def _features(text: str) -> set[str]:
    """Words and adjacent word pairs; a text without a word is its own single feature, so
    that no vector is zero."""
    words = _WORD.findall(text.lower())
    features = {*words, *(f"{first} {second}" for first, second in zip(words, words[1:]))}
    return features or {text}


class HashedNgrams:
    """Texts to unit vectors of ``dimension`` by feature hashing; thread-safe (no state)."""

    def __init__(self, dimension: int) -> None:
        if dimension < 1:
            raise ValueError(f"dimension must be positive, got {dimension}")
        self.dimension = dimension

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Shape (len(texts), dimension), float32, rows in input order, unit length."""
        if isinstance(texts, str):
            raise TypeError("encode() takes a sequence of texts; use embed_query() for one text")
        rows: list[int] = []
        ids: list[int] = []
        known: dict[str, int] = {}  # each distinct feature of the batch is hashed once
        for row, text in enumerate(texts):
            features = _features(text)
            rows.extend([row] * len(features))
            ids.extend(known.setdefault(feature, len(known)) for feature in features)
        hashes = np.fromiter((zlib.crc32(feature.encode()) for feature in known),
                             dtype=np.uint64, count=len(known))[np.asarray(ids, dtype=np.int64)]
        columns = (hashes % self.dimension).astype(np.int64)
        signs = np.where(hashes & _SIGN_BIT, -1.0, 1.0)
        flat = np.asarray(rows, dtype=np.int64) * self.dimension + columns
        vectors = np.bincount(flat, weights=signs, minlength=len(texts) * self.dimension)
        vectors = vectors.reshape(len(texts), self.dimension).astype(np.float32)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors / np.maximum(norms, np.finfo(np.float32).tiny)

    def encode_batches(self, batches: list[list[str]], _prompt: str) -> list[np.ndarray]:
        """The ``BatchEncoder`` an ``Embedder`` runs: queries and chunks are hashed alike
        (a prompt would only add the same features to every text)."""
        return [self.encode(texts) for texts in batches]

    def embed_query(self, text: str) -> np.ndarray:
        """One query's vector, as the chunks' were made."""
        return self.encode([text])[0]

"""Inferred SIMILAR_TO edges between notes whose mean chunk vectors are close."""

from __future__ import annotations

import hashlib

import numpy as np

from jarvis_core.stores.graph.elements import INFERRED, Edge


def similarity_edges(source: str, note_vectors: dict[str, np.ndarray], top_k: int = 5,
                     threshold: float = 0.8) -> list[Edge]:
    """Inferred SIMILAR_TO edges: each note's ``top_k`` nearest notes by cosine at or
    above ``threshold``, one edge per pair (src < dst), computed in row blocks so a large
    vault never holds the whole similarity matrix."""
    keys = sorted(note_vectors)
    if len(keys) < 2 or top_k < 1:
        return []
    matrix = np.stack([np.asarray(note_vectors[key], dtype=np.float32) for key in keys])
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    matrix = matrix / np.where(norms == 0, 1, norms)
    neighbours = min(top_k, len(keys) - 1)
    pairs: dict[tuple[str, str], float] = {}
    block = 1024
    for first in range(0, len(keys), block):
        scores = matrix[first:first + block] @ matrix.T
        for offset, row in enumerate(scores):
            index = first + offset
            row[index] = -np.inf
            for other in np.argpartition(-row, neighbours - 1)[:neighbours]:
                cosine = round(float(row[other]), 6)
                if cosine >= threshold:
                    pair = min(keys[index], keys[other]), max(keys[index], keys[other])
                    pairs[pair] = max(cosine, pairs.get(pair, cosine))
    return [Edge(src, dst, "SIMILAR_TO", INFERRED, "similarity", src, source, (),
                 f"cosine {cosine:.2f}", weight=cosine)
            for (src, dst), cosine in sorted(pairs.items())]


def similar_note_edges(source: str, chunk_rows: list[dict], stored: dict[str, np.ndarray],
                       top_k: int, threshold: float) -> list[Edge]:
    """SIMILAR_TO edges between documents whose mean chunk vectors (of ``stored``: chunk id
    -> vector) are close."""
    by_note: dict[str, list[np.ndarray]] = {}
    for row in chunk_rows:
        if row["chunk_id"] in stored:
            by_note.setdefault(row["doc_key"], []).append(stored[row["chunk_id"]])
    return similarity_edges(source, {key: np.mean(vs, axis=0) for key, vs in by_note.items()},
                            top_k=top_k, threshold=threshold)


def with_inferred(fingerprints: dict[str, str], inferred: list[Edge]) -> dict[str, str]:
    """Fold inferred edges into their origin's fingerprint, so a changed similarity
    rewrites that origin like any other change."""
    extra: dict[str, list[str]] = {}
    for edge in inferred:
        extra.setdefault(edge.origin, []).append(f"{edge.key}:{edge.weight:.6f}")
    return {origin: hashlib.sha256("|".join([fingerprint, *sorted(extra.get(origin, []))])
                                   .encode()).hexdigest()
            for origin, fingerprint in fingerprints.items()}

"""Vectors already computed, by text: a chunk whose text was embedded before (in this data
directory or another sharing the cache, under another chunk id after a rename, or before a
store was rebuilt) is not embedded again. The model is loaded only for texts never seen."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from jarvis_core.text.tokens import model_file_stats, resolve_model_dir

_SCHEMA = "CREATE TABLE IF NOT EXISTS vectors (text_hash BLOB PRIMARY KEY, vector BLOB NOT NULL)"
_BATCH = 500  # texts per lookup (SQLite's variable limit is far above)


def model_identity(model: str, precision: str) -> str:
    """Names the vectors a model gives: its name, the precision it computes in (vectors of
    bf16 are not float32's, as in the vector store) and its files (size and modification
    time, so a model directory edited in place gets a new cache)."""
    model_dir = resolve_model_dir(model)
    files = sorted(model_file_stats(model_dir))
    spec = json.dumps([model, precision, str(model_dir), files])
    return hashlib.sha256(spec.encode()).hexdigest()[:24]


def cache_file(cache_dir: Path, model: str, precision: str) -> Path:
    """Where the vectors ``model_identity`` names are kept."""
    return Path(cache_dir) / "embeddings" / f"{model_identity(model, precision)}.sqlite"


class CachedEmbedder:
    """Embeds texts through ``load()``'s embedder only for texts not in the cache file, and
    keeps what it embeds. ``load`` is called at the first miss."""

    def __init__(self, path: Path, load: Callable[[], object]) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._conn = sqlite3.connect(path, timeout=30, check_same_thread=False)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute(_SCHEMA)
        self._load = load
        self.hits = 0
        self.misses = 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        keys = [hashlib.sha256(text.encode()).digest() for text in texts]
        found = self._lookup(sorted(set(keys)))
        missing = sorted({key: index for index, key in enumerate(keys)
                          if key not in found}.items(), key=lambda item: item[1])
        if missing:
            vectors = self._load().embed([texts[index] for _, index in missing])
            with self._conn:
                self._conn.executemany(
                    "INSERT OR REPLACE INTO vectors VALUES (?, ?)",
                    [(key, vector.astype(np.float32).tobytes())
                     for (key, _), vector in zip(missing, vectors, strict=True)])
            found.update({key: vector for (key, _), vector in zip(missing, vectors,
                                                                   strict=True)})
        self.misses += len(missing)
        self.hits += len(texts) - len(missing)
        return np.stack([found[key] for key in keys]) if keys else np.empty((0, 0), np.float32)

    def _lookup(self, keys: list[bytes]) -> dict[bytes, np.ndarray]:
        found = {}
        for start in range(0, len(keys), _BATCH):
            batch = keys[start:start + _BATCH]
            marks = ", ".join("?" * len(batch))
            for key, blob in self._conn.execute(
                    f"SELECT text_hash, vector FROM vectors WHERE text_hash IN ({marks})", batch):
                found[key] = np.frombuffer(blob, dtype=np.float32)
        return found

    def close(self) -> None:
        self._conn.close()

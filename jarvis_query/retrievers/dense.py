"""Dense retrieval: the query encoded with the model the published vectors were made with,
then the nearest vectors of the published version.

Queries are encoded by the model exported with the version (``encoder/``, named by the
manifest's ``encoder``), run with onnxruntime and tokenizers: no torch, so a cold process
answers in about a second. A version without one (an export that failed, or one published
before exports existed) falls back to the full sentence-transformers embedder, with a log
line saying why. A version embedded by the ``hashed-ngrams`` stand-in for the model (scale
benchmarks, jarvis_core/text/hashed_ngrams.py) has its queries hashed the same way.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from jarvis_core.config import JarvisConfig
from jarvis_core.embedding_backends import HASHED_NGRAMS
from jarvis_core.stores.places import PLACE_FIELDS
from jarvis_core.stores.serving import PublishedVersion
from jarvis_core.stores.vectors.filters import VectorFilter
from jarvis_core.text.hashed_ngrams import HashedNgrams
from jarvis_query.results import Hit
from jarvis_query.snapshot import Snapshot

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger("jarvis.query")

_KEEP_ENCODERS = 2  # the current version's and the one requests in flight may still use


class QueryVectors(Protocol):
    def embed_query(self, text: str) -> np.ndarray: ...


class _SerialEmbedder:
    """The full embedder, one query at a time: its tokenizer is not safe across threads."""

    def __init__(self, embedder) -> None:
        self._embedder = embedder
        self._lock = threading.Lock()

    def embed_query(self, text: str) -> np.ndarray:
        with self._lock:
            return self._embedder.embed_query(text)


class DenseRetriever:
    def __init__(self, config: JarvisConfig) -> None:
        self.config = config
        self._encoders: dict[Path, QueryVectors] = {}
        self._full_embedders: dict[str, QueryVectors] = {}
        self._lock = threading.Lock()

    def encoder(self, version: PublishedVersion) -> QueryVectors:
        """The query encoder of ``version``, loaded once; a call that arrives while it loads
        waits for that load."""
        with self._lock:
            if version.path not in self._encoders:
                self._encoders[version.path] = self._load(version)
                for old in list(self._encoders)[:-_KEEP_ENCODERS]:
                    del self._encoders[old]
            return self._encoders[version.path]

    def encode(self, snapshot: Snapshot, query: str) -> np.ndarray:
        return self.encoder(snapshot.version).embed_query(query)

    def retrieve(self, snapshot: Snapshot, query: str, limit: int,
                 filters: VectorFilter | None = None,
                 score_threshold: float | None = None) -> list[Hit]:
        self._load_beside_vectors(snapshot)
        found = snapshot.vectors.search(self.encode(snapshot, query), limit=limit,
                                        filters=filters, score_threshold=score_threshold,
                                        payload=PLACE_FIELDS)
        return [Hit.placed(hit.chunk_id, hit.score, *(hit.payload.get(field, "")
                                                      for field in PLACE_FIELDS))
                for hit in found]

    def _load_beside_vectors(self, snapshot: Snapshot) -> None:
        """A cold process loads the encoder on a thread while this one opens the vectors, so
        its first search waits for the longer of the two rather than both."""
        if snapshot.version.path in self._encoders:
            return
        loader = threading.Thread(target=self._load_quietly, args=(snapshot.version,),
                                  name="jarvis-encoder", daemon=True)
        loader.start()
        snapshot.vectors.load()  # opened here, beside the encoder
        loader.join()

    def _load_quietly(self, version: PublishedVersion) -> None:
        try:
            self.encoder(version)
        except Exception:  # noqa: BLE001 - encode() loads again and raises it to the caller
            log.debug("loading the query encoder failed", exc_info=True)

    def _load(self, version: PublishedVersion) -> QueryVectors:
        if (version.manifest.get("embedding") or {}).get("backend") == HASHED_NGRAMS:
            return HashedNgrams(version.manifest["dimension"])  # not the model: see its module
        model = version.manifest["model"]
        exported = version.manifest.get("encoder")
        if not exported:
            return self._full_embedder(model, f"serving version {version.name} holds no "
                                              "exported query model")
        # onnxruntime is imported here, not at the top: keyword and graph searches never
        # encode a query and should not pay for it.
        from jarvis_core.text.query_encoder import QueryEncoder, QueryEncoderError

        try:
            encoder = QueryEncoder.load(version.path / exported)
        except QueryEncoderError as exc:
            return self._full_embedder(model, str(exc))
        if encoder.model != model:
            return self._full_embedder(model, f"the exported query model of serving version "
                                              f"{version.name} is {encoder.model!r}, not the "
                                              f"vectors' {model!r}")
        return encoder

    def _full_embedder(self, model: str, reason: str) -> QueryVectors:
        log.warning("%s: encoding queries with the full embedder (sentence-transformers), "
                    "which takes several seconds to load", reason)
        if model not in self._full_embedders:
            from jarvis_core.embedding_backends import query_backend
            from jarvis_core.text.embedder import Embedder

            settings = self.config.embedding
            self._full_embedders[model] = _SerialEmbedder(Embedder(  # on the CPU
                model, backend=query_backend(settings.backend), cache_dir=self.config.cache_dir))
        return self._full_embedders[model]

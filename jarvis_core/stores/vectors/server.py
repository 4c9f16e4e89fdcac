"""The server back end: a Qdrant server through qdrant-client."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from jarvis_core.stores.vectors.base import (
    HNSW_EF_CONSTRUCT,
    HNSW_M,
    SCROLL_PAGE,
    VECTOR_NAME,
    PreparedPoint,
    VectorHit,
    VectorStore,
    VectorStoreMismatch,
    search_ef,
)
from jarvis_core.stores.vectors.edge_files import check_identity
from jarvis_core.stores.vectors.filters import DATETIME_FIELD, KEYWORD_FIELDS, Condition, MatchAny

SERVER_UPSERT_BATCH = 256


def _server_filter(conditions: list[Condition]):
    if not conditions:
        return None
    from qdrant_client import models

    must = [
        models.FieldCondition(key=c.key, match=models.MatchAny(any=list(c.values)))
        if isinstance(c, MatchAny)
        else models.FieldCondition(key=c.key, range=models.DatetimeRange(gte=c.gte, lte=c.lte))
        for c in conditions
    ]
    return models.Filter(must=must)


class QdrantServerVectorStore(VectorStore):
    """A collection on a Qdrant server (1.16 or later, for collection metadata).

    The model and dimension are kept in the collection's metadata under ``jarvis_model`` and
    ``jarvis_dimension``; every write waits for the server to apply it. qdrant-client is
    imported on first use: it takes over a second to import and the Edge default never needs it.
    """

    backend = "server"

    METADATA_MODEL = "jarvis_model"
    METADATA_DIMENSION = "jarvis_dimension"

    def __init__(self, url: str, api_key: str | None, collection: str, dimension: int,
                 model: str, *, timeout: int = 60) -> None:
        super().__init__(collection, dimension, model)
        from qdrant_client import QdrantClient

        self.url = url
        self._client = QdrantClient(url=url, api_key=api_key, timeout=timeout)
        try:
            self._ensure_collection()
        except BaseException:
            self._client.close()
            raise

    def flush(self) -> None:
        """Writes are already durable: each one waits for the server (``wait=True``)."""
        self._require_open()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._client.close()

    def drop(self) -> None:
        self._require_open()
        self._client.delete_collection(self.collection)
        self.close()

    def _ensure_collection(self) -> None:
        from qdrant_client import models

        if not self._client.collection_exists(self.collection):
            try:
                self._client.create_collection(
                    self.collection,
                    vectors_config={VECTOR_NAME: models.VectorParams(
                        size=self.dimension, distance=models.Distance.COSINE)},
                    hnsw_config=models.HnswConfigDiff(m=HNSW_M, ef_construct=HNSW_EF_CONSTRUCT),
                    metadata={self.METADATA_MODEL: self.model,
                              self.METADATA_DIMENSION: self.dimension},
                )
            except Exception:
                if not self._client.collection_exists(self.collection):
                    raise  # not a lost creation race: a real failure
        info = self._client.get_collection(self.collection)
        self._verify_collection(info)
        wanted = {name: models.PayloadSchemaType.KEYWORD for name in KEYWORD_FIELDS}
        wanted[DATETIME_FIELD] = models.PayloadSchemaType.DATETIME
        for name, schema in wanted.items():
            if name not in (info.payload_schema or {}):
                self._client.create_payload_index(self.collection, name, field_schema=schema,
                                                  wait=True)

    def _verify_collection(self, info) -> None:
        where = f"collection {self.collection!r} on {self.url}"
        vectors = info.config.params.vectors
        params = vectors.get(VECTOR_NAME) if isinstance(vectors, dict) else None
        if params is None:
            raise VectorStoreMismatch(f"{where} has no {VECTOR_NAME!r} vector")
        recorded_model = (info.config.metadata or {}).get(self.METADATA_MODEL)
        if recorded_model is None:
            raise VectorStoreMismatch(
                f"{where} records no model in its metadata (made outside Jarvis, or the "
                "server predates collection metadata, Qdrant 1.16)"
            )
        check_identity(where, (recorded_model, params.size), (self.model, self.dimension))

    def _upsert(self, points: list[PreparedPoint]) -> None:
        from qdrant_client import models

        for start in range(0, len(points), SERVER_UPSERT_BATCH):
            self._client.upsert(self.collection, wait=True, points=[
                models.PointStruct(id=p.point_id, vector={VECTOR_NAME: p.vector.tolist()},
                                   payload=p.payload)
                for p in points[start:start + SERVER_UPSERT_BATCH]
            ])

    def _delete(self, point_ids: list[str]) -> None:
        from qdrant_client import models

        self._client.delete(self.collection, wait=True,
                            points_selector=models.PointIdsList(points=point_ids))

    def _chunk_ids(self, conditions: list[Condition]) -> set[str]:
        found: set[str] = set()
        offset = None
        while True:
            records, offset = self._client.scroll(
                self.collection, scroll_filter=_server_filter(conditions), limit=SCROLL_PAGE,
                offset=offset, with_payload=["chunk_id"], with_vectors=False)
            found.update(record.payload["chunk_id"] for record in records)
            if offset is None:
                return found

    def _count(self, conditions: list[Condition]) -> int:
        return self._client.count(self.collection, count_filter=_server_filter(conditions),
                                  exact=True).count

    def _counts_by_source(self) -> dict[str, int]:
        response = self._client.facet(self.collection, "source",
                                      limit=max(self._count([]), 1), exact=True)
        return {hit.value: hit.count for hit in response.hits}

    def _query(self, vector: np.ndarray, limit: int, conditions: list[Condition],
               score_threshold: float | None, payload: list[str] | None) -> list[VectorHit]:
        from qdrant_client import models

        response = self._client.query_points(
            self.collection, query=vector.tolist(), using=VECTOR_NAME, limit=limit,
            query_filter=_server_filter(conditions), score_threshold=score_threshold,
            search_params=models.SearchParams(hnsw_ef=search_ef(conditions)),
            with_payload=True if payload is None else payload)
        return [VectorHit(point.payload["chunk_id"], point.score, point.payload)
                for point in response.points]

    def _retrieve_vectors(self, point_ids: list[str]) -> dict[str, Sequence[float]]:
        records = self._client.retrieve(self.collection, point_ids, with_payload=False,
                                        with_vectors=[VECTOR_NAME])
        return {str(record.id): record.vector[VECTOR_NAME] for record in records}

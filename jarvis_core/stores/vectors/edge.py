"""The embedded back end: a Qdrant Edge shard on local disk."""

from __future__ import annotations

import errno
import json
import os
import shutil
import threading
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import qdrant_edge as qe

from jarvis_core.stores.vectors.base import (
    HNSW_EF_CONSTRUCT,
    HNSW_M,
    SCROLL_PAGE,
    VECTOR_NAME,
    PreparedPoint,
    VectorHit,
    VectorStore,
    VectorStoreBusy,
    VectorStoreMismatch,
    search_ef,
)
from jarvis_core.stores.vectors.filters import DATETIME_FIELD, KEYWORD_FIELDS, Condition, MatchAny

EDGE_UPSERT_BATCH = 1024  # fastest measured: per-call overhead below, payload conversion above


EDGE_SIDECAR = "jarvis_vector_store.json"
# New shards keep their vectors in float16. Unit vectors lose nothing a ranking sees (SciFact,
# 10,254 chunks: the same top 10 for every query, nDCG@10 0.6556 either way), and Edge's
# index build at publish, the largest memory peak of a refresh, needs 38% less of it and 25%
# less CPU (100k vectors: 371 against 596 MB, 96 against 127 CPU-s). Shards made before keep
# float32: an opened shard keeps the type it was made with.
VECTOR_DATATYPE = qe.VectorStorageDatatype.Float16
VECTOR_DATATYPE_NAME = "float16"  # as edge_config.json records it


def _edge_filter(conditions: list[Condition]):
    if not conditions:
        return None
    must = [
        qe.FieldCondition(c.key, match=qe.MatchAny(list(c.values))) if isinstance(c, MatchAny)
        else qe.FieldCondition(c.key, range=qe.RangeDateTime(gte=c.gte, lte=c.lte))
        for c in conditions
    ]
    return qe.Filter(must=must)


class EdgeVectorStore(VectorStore):
    """An embedded Qdrant Edge shard in ``path/<collection>/``, created on first use.

    Only one store (in any process) can hold a directory: opening waits up to
    ``busy_timeout`` seconds for the holder to close it, then raises ``VectorStoreBusy``.
    Edge builds HNSW indexes only in ``optimize()`` (``publish_copy`` calls it); until then
    search is exact and slower. Edge calls hold the GIL, an index build included.
    """

    backend = "edge"

    def __init__(self, path: Path, collection: str, dimension: int, model: str, *,
                 busy_timeout: float = 30.0) -> None:
        super().__init__(collection, dimension, model)
        self.path = Path(path)
        self.directory = self.path / collection
        self._lock = threading.RLock()
        self._claim_identity()
        self._shard = self._open_shard(busy_timeout)

    @classmethod
    def open_read_copy(cls, published: Path, workdir: Path, *, model: str | None = None,
                       dimension: int | None = None,
                       busy_timeout: float = 30.0) -> EdgeVectorStore:
        """Copy a published shard to a private ``workdir`` (absent or empty) and open it.

        Each reader needs its own copy because the WAL lock admits one process per directory.
        Pass ``model``/``dimension`` to insist on them; by default the recorded ones are used.
        """
        published, workdir = Path(published), Path(workdir)
        model, dimension = _published_identity(published, model, dimension)
        if workdir.exists() and any(workdir.iterdir()):
            raise FileExistsError(f"read-copy directory is not empty: {workdir}")
        shutil.copytree(published, workdir, dirs_exist_ok=True, copy_function=copy_file)
        return cls(workdir.parent, workdir.name, dimension, model, busy_timeout=busy_timeout)

    @classmethod
    def open_kept_copy(cls, published: Path, workdir: Path, *,
                       busy_timeout: float = 30.0) -> EdgeVectorStore:
        """Open a copy ``open_read_copy`` made of ``published`` earlier, as it is (see
        read_copies.py); it must hold the vectors of the published shard's model."""
        model, dimension = _published_identity(Path(published), None, None)
        workdir = Path(workdir)
        if not (workdir / "edge_config.json").is_file():
            raise FileNotFoundError(f"no Edge shard in {workdir}")
        return cls(workdir.parent, workdir.name, dimension, model, busy_timeout=busy_timeout)

    def publish_copy(self, dest: Path) -> None:
        """Copy the shard, indexes built and flushed, to ``dest`` (which must not exist)
        while this store stays open; the copy appears atomically, complete or not at all."""
        dest = Path(dest)
        if dest.exists():
            raise FileExistsError(f"publish destination already exists: {dest}")
        staging = dest.with_name(f".{dest.name}.partial-{uuid.uuid4().hex}")
        with self._lock:
            self.optimize()
            self._shard.flush()
            try:
                shutil.copytree(self.directory, staging, copy_function=copy_file)
            except BaseException:
                shutil.rmtree(staging, ignore_errors=True)
                raise
        staging.rename(dest)

    def check(self) -> dict[str, int]:
        """Vectors per source, after a facet over every keyword index: deleted segment files
        lose the payload indexes ("No appropriate index for faceting") yet still open."""
        with self._lock:
            self._require_open()
            for name in KEYWORD_FIELDS:
                self._shard.facet(qe.FacetRequest(name, limit=1, exact=False))
            return self._counts_by_source()

    def optimize(self) -> None:
        """Run Edge's optimizers (HNSW build, segment merges): Edge never runs them itself."""
        with self._lock:
            self._require_open()
            self._shard.optimize()

    def flush(self) -> None:
        with self._lock:
            self._require_open()
            self._shard.flush()

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                self._shard.close()

    def drop(self) -> None:
        with self._lock:
            self._require_open()
            self.close()
            shutil.rmtree(self.directory, ignore_errors=True)

    def _config(self, datatype: qe.VectorStorageDatatype | None = None):
        return qe.EdgeConfig(
            vectors={VECTOR_NAME: qe.EdgeVectorParams(size=self.dimension,
                                                      distance=qe.Distance.Cosine,
                                                      datatype=datatype)},
            # The binding requires full_scan_threshold; 10 000 KB is Qdrant's own default.
            hnsw_config=qe.HnswIndexConfig(m=HNSW_M, ef_construct=HNSW_EF_CONSTRUCT,
                                           full_scan_threshold=10_000),
        )

    def _claim_identity(self) -> None:
        """Record {model, dimension} on first use (atomically), else check the record."""
        self.directory.mkdir(parents=True, exist_ok=True)
        sidecar = self.directory / EDGE_SIDECAR
        if not sidecar.exists():
            if (self.directory / "edge_config.json").exists():
                raise VectorStoreMismatch(
                    f"{self.directory} holds a Qdrant Edge shard without a model record "
                    f"({EDGE_SIDECAR}); refusing to add {self.model} vectors to it"
                )
            staging = self.directory / f".{EDGE_SIDECAR}.{uuid.uuid4().hex}"
            staging.write_text(json.dumps({"model": self.model, "dimension": self.dimension}))
            try:
                os.link(staging, sidecar)
            except FileExistsError:
                pass  # another process claimed it first; its record is checked below
            finally:
                staging.unlink()
        recorded = _read_sidecar(self.directory)
        check_identity(str(self.directory), (recorded["model"], recorded["dimension"]),
                        (self.model, self.dimension))

    def _open_shard(self, busy_timeout: float):
        deadline = time.monotonic() + busy_timeout
        delay = 0.05
        while True:
            try:
                if (self.directory / "edge_config.json").exists():
                    return qe.EdgeShard.load(str(self.directory),
                                             self._config(self._stored_datatype()))
                return self._create_shard()
            except Exception as exc:  # qdrant_edge raises a bare Exception with a message
                if "WouldBlock" not in str(exc):
                    raise
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise VectorStoreBusy(
                        f"vector store {self.directory} is held by another process or store "
                        f"(its write-ahead log is locked); gave up after {busy_timeout:g} s"
                    ) from exc
                time.sleep(min(delay, remaining))
                delay = min(delay * 2, 2.0)

    def _stored_datatype(self) -> qe.VectorStorageDatatype | None:
        """The type the shard keeps its vectors in; None: float32, Edge's default (a config
        that leaves it out is refused by a float16 shard)."""
        stored = json.loads((self.directory / "edge_config.json").read_text())["vectors"]
        datatype = stored.get(VECTOR_NAME, {}).get("datatype")
        return VECTOR_DATATYPE if datatype == VECTOR_DATATYPE_NAME else None

    def _create_shard(self):
        shard = qe.EdgeShard.create(str(self.directory), self._config(VECTOR_DATATYPE))
        for name in KEYWORD_FIELDS:
            shard.update(qe.UpdateOperation.create_field_index(name, qe.PayloadSchemaType.Keyword))
        shard.update(qe.UpdateOperation.create_field_index(DATETIME_FIELD,
                                                           qe.PayloadSchemaType.Datetime))
        return shard

    def _upsert(self, points: list[PreparedPoint]) -> None:
        with self._lock:
            for start in range(0, len(points), EDGE_UPSERT_BATCH):
                self._shard.update(qe.UpdateOperation.upsert_points([
                    qe.Point(p.point_id, {VECTOR_NAME: p.vector.tolist()}, p.payload)
                    for p in points[start:start + EDGE_UPSERT_BATCH]
                ]))

    def _delete(self, point_ids: list[str]) -> None:
        with self._lock:
            self._shard.update(qe.UpdateOperation.delete_points(point_ids))

    def _chunk_ids(self, conditions: list[Condition]) -> set[str]:
        found: set[str] = set()
        offset = None
        while True:
            records, offset = self._shard.scroll(qe.ScrollRequest(
                offset=offset, limit=SCROLL_PAGE, filter=_edge_filter(conditions),
                with_payload=qe.PayloadSelector.Include(["chunk_id"]), with_vector=False))
            found.update(record.payload["chunk_id"] for record in records)
            if offset is None:
                return found

    def _count(self, conditions: list[Condition]) -> int:
        return self._shard.count(qe.CountRequest(exact=True,
                                                      filter=_edge_filter(conditions)))

    def _counts_by_source(self) -> dict[str, int]:
        response = self._shard.facet(qe.FacetRequest("source", limit=max(self._count([]), 1),
                                                     exact=True))
        return {hit.value: hit.count for hit in response.hits}

    def _query(self, vector: np.ndarray, limit: int, conditions: list[Condition],
               score_threshold: float | None) -> list[VectorHit]:
        scored = self._shard.query(qe.QueryRequest(
            limit=limit, query=qe.Query.Nearest(vector.tolist(), using=VECTOR_NAME),
            filter=_edge_filter(conditions), score_threshold=score_threshold,
            params=qe.SearchParams(hnsw_ef=search_ef(conditions)), with_payload=True,
            with_vector=False))
        return [VectorHit(point.payload["chunk_id"], point.score, point.payload)
                for point in scored]

    def _retrieve_vectors(self, point_ids: list[str]) -> dict[str, Sequence[float]]:
        records = self._shard.retrieve(point_ids, False, [VECTOR_NAME])
        return {str(record.id): record.vector[VECTOR_NAME] for record in records}


def check_identity(where: str, recorded: tuple[str, int], wanted: tuple[str, int]) -> None:
    if recorded != wanted:
        raise VectorStoreMismatch(
            f"{where} holds vectors of {recorded[0]} (dimension {recorded[1]}), not {wanted[0]} "
            f"(dimension {wanted[1]}); use collection_name() for a separate collection"
        )


def _copy_sparse(source: str, target: str) -> None:
    """Copy only the data regions: Edge preallocates 32 MiB WAL and mmap files, and a plain
    copy writes their holes out (a 100k-point shard: 410 MB copied instead of 250 MB).
    Times and modes are not copied: Edge reads neither, and copying them took a third of
    a cold search's copy."""
    with open(source, "rb") as src, open(target, "wb") as dst:
        size = os.fstat(src.fileno()).st_size
        offset = 0
        while offset < size:
            try:
                start = os.lseek(src.fileno(), offset, os.SEEK_DATA)
            except OSError as exc:
                if exc.errno != errno.ENXIO:
                    raise
                break  # nothing but a hole up to the end
            offset = os.lseek(src.fileno(), start, os.SEEK_HOLE)
            while start < offset:
                block = os.pread(src.fileno(), min(offset - start, 1 << 20), start)
                os.pwrite(dst.fileno(), block, start)
                start += len(block)
        dst.truncate(size)


# A copy of a store's file that keeps its holes (for whoever copies a data directory).
copy_file = _copy_sparse if hasattr(os, "SEEK_DATA") else shutil.copyfile


def _published_identity(published: Path, model: str | None,
                        dimension: int | None) -> tuple[str, int]:
    """(model, dimension) of a published shard; the ones given must match its record."""
    recorded = _read_sidecar(published)
    model = recorded["model"] if model is None else model
    dimension = recorded["dimension"] if dimension is None else dimension
    check_identity(str(published), (recorded["model"], recorded["dimension"]),
                    (model, dimension))
    return model, dimension


def _read_sidecar(directory: Path) -> dict[str, Any]:
    sidecar = Path(directory) / EDGE_SIDECAR
    try:
        recorded = json.loads(sidecar.read_text())
        return {"model": str(recorded["model"]), "dimension": int(recorded["dimension"])}
    except FileNotFoundError as exc:
        raise VectorStoreMismatch(f"{directory} is not a Jarvis vector store (no {EDGE_SIDECAR})"
                                  ) from exc
    except (ValueError, KeyError, TypeError) as exc:
        raise VectorStoreMismatch(f"{sidecar} is unreadable: {exc}") from exc

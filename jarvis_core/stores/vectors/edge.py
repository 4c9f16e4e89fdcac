"""The embedded back end: a Qdrant Edge shard on local disk."""

from __future__ import annotations

import json
import os
import shutil
import sys
import threading
import uuid
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import qdrant_edge as qe

from jarvis_core.stores.vectors.base import (
    HNSW_EF_CONSTRUCT,
    HNSW_M,
    VECTOR_NAME,
    PreparedPoint,
    VectorHit,
    VectorStore,
    VectorStoreMismatch,
    search_ef,
)
from jarvis_core.stores.vectors.edge_files import (
    EDGE_SIDECAR,
    ID_TYPE,
    PART_IDS,
    PART_PREFIX,
    VECTOR_DATATYPE,
    check_identity,
    complete_copy,
    copy_file,
    edge_filter,
    hold_directory,
    not_published,
    part_dirs,
    published_identity,
    read_ahead_payloads,
    read_sidecar,
    scrolled,
    stored_datatype,
)
from jarvis_core.stores.vectors.filters import DATETIME_FIELD, KEYWORD_FIELDS, Condition

EDGE_UPSERT_BATCH = 1024  # fastest measured: per-call overhead below, payload conversion above


class EdgeVectorStore(VectorStore):
    """A collection in ``path/<collection>/``: parts ``part-0000``, ``part-0001``…, each an
    embedded Qdrant Edge shard of at most ``part_points`` points (None: one part of any size;
    the pipeline's follows its memory budget, ``ResourceSettings.vector_part_points``), made
    on first use.

    Edge builds a shard's HNSW index at once in ``optimize()`` (``publish_copy`` calls it)
    and holds all of it meanwhile: 6.5 GB for a million points in one shard. A part is built,
    copied and closed before the next is opened, so the build holds one part's worth at any
    size. New points go to the newest part; a full one gets its point ids written beside it
    (``PART_IDS``), so a deleted or replaced point's part is found without opening the others.
    Searches open every part and merge their hits. A store made before parts (a shard in the
    folder itself) stays one part. Until ``optimize()`` search is exact and slower; Edge calls
    hold the GIL, an index build included.

    Only one store (in any process) can hold a directory: opening waits up to
    ``busy_timeout`` seconds for the holder to close it, then raises ``VectorStoreBusy``.
    """

    backend = "edge"

    def __init__(self, path: Path, collection: str, dimension: int, model: str, *,
                 busy_timeout: float = 30.0, part_points: int | None = None,
                 reader: bool = False) -> None:
        super().__init__(collection, dimension, model)
        if part_points is not None and part_points < 1:
            raise ValueError(f"part_points must be positive, got {part_points}")
        self.path = Path(path)
        self.directory = self.path / collection
        self.part_points = part_points
        self.reader = reader  # a query process's copy: payloads read ahead, one search thread
        self._lock = threading.RLock()
        self._claim_identity()
        self._held = hold_directory(self.directory, busy_timeout)
        for partial in self.directory.glob(f".{PART_PREFIX}*.partial-*"):
            shutil.rmtree(partial, ignore_errors=True)  # a part whose making was cut short
        self._parts = part_dirs(self.directory)
        self._shards: dict[Path, Any] = {}
        self._visiting: Path | None = None
        self._full_ids: dict[Path, np.ndarray] = {}

    @classmethod
    def open_read_copy(cls, published: Path, workdir: Path, *, model: str | None = None,
                       dimension: int | None = None,
                       busy_timeout: float = 30.0) -> EdgeVectorStore:
        """Copy a published store to a private ``workdir`` (absent or empty) and open it.

        Each reader needs its own copy because the WAL lock admits one process per directory.
        Pass ``model``/``dimension`` to insist on them; by default the recorded ones are used.
        """
        published, workdir = Path(published), Path(workdir)
        model, dimension = published_identity(published, model, dimension)
        if workdir.exists() and any(workdir.iterdir()):
            raise FileExistsError(f"read-copy directory is not empty: {workdir}")
        shutil.copytree(published, workdir, dirs_exist_ok=True, copy_function=copy_file)
        return cls(workdir.parent, workdir.name, dimension, model, busy_timeout=busy_timeout,
                   reader=True)

    @classmethod
    def open_kept_copy(cls, published: Path, workdir: Path, *,
                       busy_timeout: float = 30.0) -> EdgeVectorStore:
        """Open a copy ``open_read_copy`` made of ``published`` earlier, as it is (see
        read_copies.py); it must hold the vectors of the published store's model."""
        model, dimension = published_identity(Path(published), None, None)
        workdir = Path(workdir)
        if not complete_copy(workdir):
            raise FileNotFoundError(f"no complete Edge store in {workdir}")
        return cls(workdir.parent, workdir.name, dimension, model, busy_timeout=busy_timeout,
                   reader=True)

    def publish_copy(self, dest: Path) -> None:
        """Copy the store, each part's index built and flushed in turn, to ``dest`` (which
        must not exist) while this store stays open; the copy appears atomically, complete
        or not at all."""
        dest = Path(dest)
        if dest.exists():
            raise FileExistsError(f"publish destination already exists: {dest}")
        staging = dest.with_name(f".{dest.name}.partial-{uuid.uuid4().hex}")
        with self._lock:
            self._require_open()
            try:
                staging.mkdir(parents=True)
                copy_file(self.directory / EDGE_SIDECAR, staging / EDGE_SIDECAR)
                for part in self._parts:
                    shard = self._visit(part)
                    shard.optimize()
                    shard.flush()
                    target = staging if part == self.directory else staging / part.name
                    shutil.copytree(part, target, copy_function=copy_file,
                                    dirs_exist_ok=True, ignore=not_published)
            except BaseException:
                shutil.rmtree(staging, ignore_errors=True)
                raise
        staging.rename(dest)

    def check(self) -> dict[str, int]:
        """Vectors per source, after a facet over every keyword index of every part: deleted
        segment files lose the payload indexes ("No appropriate index for faceting") yet
        still open."""
        with self._lock:
            self._require_open()
            return self._counts_by_source(checked=True)

    def optimize(self) -> None:
        """Run Edge's optimizers (HNSW build, segment merges) a part at a time: Edge never
        runs them itself."""
        with self._lock:
            self._require_open()
            for part in self._parts:
                shard = self._visit(part)
                shard.optimize()

    def flush(self) -> None:
        with self._lock:
            self._require_open()
            for shard in self._shards.values():
                shard.flush()

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                try:
                    for part in list(self._shards):
                        self._release(part)
                finally:
                    os.close(self._held)

    def drop(self) -> None:
        with self._lock:
            self._require_open()
            self.close()
            shutil.rmtree(self.directory, ignore_errors=True)

    # -- parts -----------------------------------------------------------------------------

    def _config(self, datatype: qe.VectorStorageDatatype | None = None):
        return qe.EdgeConfig(
            vectors={VECTOR_NAME: qe.EdgeVectorParams(size=self.dimension,
                                                      distance=qe.Distance.Cosine,
                                                      datatype=datatype)},
            # The binding requires full_scan_threshold; 10 000 KB is Qdrant's own default.
            hnsw_config=qe.HnswIndexConfig(m=HNSW_M, ef_construct=HNSW_EF_CONSTRUCT,
                                           full_scan_threshold=10_000),
            # A reader searches part after part on the calling thread: a pool per part cost
            # more than it saved (2.4 against 2.1 ms a part of 131k); None: one per core.
            max_search_threads=1 if self.reader else None,
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
        recorded = read_sidecar(self.directory)
        check_identity(str(self.directory), (recorded["model"], recorded["dimension"]),
                        (self.model, self.dimension))

    def _shard(self, part: Path):
        """The part's shard, opened (or made) on first use and kept open."""
        shard = self._shards.get(part)
        if shard is None:
            if not part.exists():
                self._create_part(part)
            shard = qe.EdgeShard.load(str(part), self._config(stored_datatype(part)))
            self._shards[part] = shard
            if self.reader:  # the advice waits on the disk's queue: not on a search's time
                threading.Thread(target=read_ahead_payloads, args=(part,),
                                 name="jarvis-read-ahead", daemon=True).start()
        return shard

    def load(self) -> None:
        """Open every part (a million points in eight parts: 6 s, most of it reading their
        vectors and graphs from disk), so that the first search does not wait for it."""
        super().load()
        with self._lock:
            for part in self._parts:
                self._shard(part)

    def _release(self, part: Path) -> None:
        if part == self._visiting:
            self._visiting = None
        shard = self._shards.pop(part, None)
        if shard is not None:
            shard.close()

    def _visit(self, part: Path):
        """The part's shard for an operation over every part: a part opened for a visit stays
        open until the next visit opens another (a store of one part is opened once)."""
        if part not in self._shards:
            if self._visiting is not None:
                self._release(self._visiting)
            self._visiting = part
        return self._shard(part)

    def _create_part(self, part: Path) -> None:
        """Make a part under another name, then rename it: a part folder is always whole."""
        staging = part.with_name(f".{part.name}.partial-{uuid.uuid4().hex}")
        shard = qe.EdgeShard.create(str(staging), self._config(VECTOR_DATATYPE))
        for name in KEYWORD_FIELDS:
            shard.update(qe.UpdateOperation.create_field_index(name, qe.PayloadSchemaType.Keyword))
        shard.update(qe.UpdateOperation.create_field_index(DATETIME_FIELD,
                                                           qe.PayloadSchemaType.Datetime))
        shard.close()
        staging.rename(part)

    def _writable_part(self) -> tuple[Path, int]:
        """The part new points go to and how many it still takes: the newest part while it
        has room, else a new one (the full one's ids recorded first)."""
        if self._parts == [self.directory]:
            return self.directory, sys.maxsize  # a store made before parts is never split
        if self._parts and not (self._parts[-1] / PART_IDS).exists():
            newest = self._parts[-1]
            if self.part_points is None:
                return newest, sys.maxsize
            stored = self._shard(newest).count(qe.CountRequest(exact=True))
            if stored < self.part_points:
                return newest, self.part_points - stored
            self._record_full(newest)
        number = int(self._parts[-1].name.removeprefix(PART_PREFIX)) + 1 if self._parts else 0
        self._parts.append(self.directory / f"{PART_PREFIX}{number:04d}")
        return self._parts[-1], self.part_points or sys.maxsize

    def _record_full(self, part: Path) -> None:
        """Write a full part's point ids beside it and close it: no new point goes to it."""
        shard = self._shard(part)
        shard.flush()
        self._write_ids(part, np.array(sorted(self._point_ids(shard)), dtype=ID_TYPE))
        self._release(part)

    def _write_ids(self, part: Path, ids: np.ndarray) -> None:
        staging = part / f".{uuid.uuid4().hex}.{PART_IDS}"  # np.save keeps a .npy name
        np.save(staging, ids)
        os.replace(staging, part / PART_IDS)
        self._full_ids[part] = ids

    def _ids_of_full(self, part: Path) -> np.ndarray:
        if part not in self._full_ids:
            self._full_ids[part] = np.load(part / PART_IDS)
        return self._full_ids[part]

    def _parts_holding(self, point_ids: list[str]) -> list[tuple[Path, list[str]]]:
        """The parts that may hold any of these points, each with those points: a full part
        for the ids its record lists, any other part for all of them."""
        wanted = np.array([uuid.UUID(pid).bytes for pid in point_ids], dtype=ID_TYPE)
        holding = []
        for part in self._parts:
            if part != self.directory and (part / PART_IDS).exists():
                held = np.isin(wanted, self._ids_of_full(part))
                if held.any():
                    holding.append((part, [pid for pid, h in zip(point_ids, held) if h]))
            else:
                holding.append((part, point_ids))
        return holding

    @staticmethod
    def _point_ids(shard) -> Iterator[bytes]:
        yield from (uuid.UUID(str(record.id)).bytes for record in scrolled(shard, None, False))

    # -- backend hooks ---------------------------------------------------------------------

    def _upsert(self, points: list[PreparedPoint]) -> None:
        with self._lock:
            while points:
                part, room = self._writable_part()
                batch, points = points[:room], points[room:]
                self._delete_from([p.point_id for p in batch], but=part)
                shard = self._shard(part)
                for start in range(0, len(batch), EDGE_UPSERT_BATCH):
                    shard.update(qe.UpdateOperation.upsert_points([
                        qe.Point(p.point_id, {VECTOR_NAME: p.vector.tolist()}, p.payload)
                        for p in batch[start:start + EDGE_UPSERT_BATCH]
                    ]))

    def _delete(self, point_ids: list[str]) -> None:
        with self._lock:
            self._delete_from(point_ids, but=None)

    def _delete_from(self, point_ids: list[str], but: Path | None) -> None:
        """Delete the points from every part that holds them, ``but`` one (a replaced point
        is written there next)."""
        for part, held in self._parts_holding(point_ids):
            if part == but:
                continue
            shard = self._visit(part)
            shard.update(qe.UpdateOperation.delete_points(held))
            if part in self._full_ids:
                gone = np.array([uuid.UUID(pid).bytes for pid in held], dtype=ID_TYPE)
                self._write_ids(part, np.setdiff1d(self._full_ids[part], gone))

    def _chunk_ids(self, conditions: list[Condition]) -> set[str]:
        found: set[str] = set()
        with self._lock:
            for part in self._parts:
                found.update(record.payload["chunk_id"] for record in scrolled(
                    self._visit(part), edge_filter(conditions),
                    qe.PayloadSelector.Include(["chunk_id"])))
        return found

    def _count(self, conditions: list[Condition]) -> int:
        total = 0
        with self._lock:
            for part in self._parts:
                shard = self._visit(part)
                total += shard.count(qe.CountRequest(exact=True,
                                                     filter=edge_filter(conditions)))
        return total

    def _counts_by_source(self, checked: bool = False) -> dict[str, int]:
        """Vectors per source; ``checked``: after a facet over every keyword index, in the
        same visit of each part."""
        counts: Counter[str] = Counter()
        with self._lock:
            for part in self._parts:
                shard = self._visit(part)
                for name in KEYWORD_FIELDS if checked else ():
                    shard.facet(qe.FacetRequest(name, limit=1, exact=False))
                stored = shard.count(qe.CountRequest(exact=True))
                response = shard.facet(qe.FacetRequest("source", limit=max(stored, 1),
                                                       exact=True))
                counts.update({hit.value: hit.count for hit in response.hits})
        return dict(counts)

    def _query(self, vector: np.ndarray, limit: int, conditions: list[Condition],
               score_threshold: float | None, payload: list[str] | None) -> list[VectorHit]:
        """The ``limit`` best points of all parts, ties cut in any order (the caller fetches
        past them). Parts answer ids and scores; the kept points' payloads are read after
        (every part's were half a search at a million points: 41 against 22 ms)."""
        request = qe.QueryRequest(
            limit=limit, query=qe.Query.Nearest(vector.tolist(), using=VECTOR_NAME),
            filter=edge_filter(conditions), score_threshold=score_threshold,
            params=qe.SearchParams(hnsw_ef=search_ef(conditions)),
            with_payload=False, with_vector=False)
        with self._lock:  # threads of a server share the parts (Edge holds the GIL anyway)
            found = sorted(((point.score, point.id, part) for part in self._parts
                            for point in self._shard(part).query(request)),
                           key=lambda hit: -hit[0])[:limit]
            kept: dict[Path, list] = {}
            for _, pid, part in found:
                kept.setdefault(part, []).append(pid)
            payloads = {record.id: record.payload for part, pids in kept.items()
                        for record in self._shard(part).retrieve(
                            pids, True if payload is None else payload, False)}
        return [VectorHit(payloads[pid]["chunk_id"], score, payloads[pid])
                for score, pid, _ in found]

    def _retrieve_vectors(self, point_ids: list[str]) -> dict[str, Sequence[float]]:
        with self._lock:
            return {str(record.id): record.vector[VECTOR_NAME]
                    for part, held in self._parts_holding(point_ids)
                    for record in self._shard(part).retrieve(held, False, [VECTOR_NAME])}

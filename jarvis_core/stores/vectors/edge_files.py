"""An Edge store on disk: the record of its model, its parts, the lock that holds them, how
its files are copied (keeping their holes) and read ahead, how a part's records are paged
through and the filters it is searched with."""

from __future__ import annotations

import errno
import fcntl
import json
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import qdrant_edge as qe

from jarvis_core.stores.vectors.base import (
    SCROLL_PAGE,
    VECTOR_NAME,
    VectorStoreBusy,
    VectorStoreMismatch,
)
from jarvis_core.stores.vectors.filters import Condition, MatchAny

EDGE_SIDECAR = "jarvis_vector_store.json"
PART_PREFIX = "part-"


PART_IDS = "jarvis_point_ids.npy"  # a full part's point ids, sorted


ID_TYPE = "S16"  # a point id's 16 UUID bytes


DIRECTORY_LOCK = ".jarvis_store.lock"


# New shards keep their vectors in float16. Unit vectors lose nothing a ranking sees (SciFact,
# 10,254 chunks: the same top 10 for every query, nDCG@10 0.6556 either way), and Edge's
# index build at publish, the largest memory peak of a refresh, needs 38% less of it and 25%
# less CPU (100k vectors: 371 against 596 MB, 96 against 127 CPU-s). Shards made before keep
# float32: an opened shard keeps the type it was made with.
VECTOR_DATATYPE = qe.VectorStorageDatatype.Float16
VECTOR_DATATYPE_NAME = "float16"  # as edge_config.json records it


def stored_datatype(part: Path) -> qe.VectorStorageDatatype | None:
    """The type a part keeps its vectors in; None: float32, Edge's default (a config that
    leaves it out is refused by a float16 shard)."""
    stored = json.loads((part / "edge_config.json").read_text())["vectors"]
    datatype = stored.get(VECTOR_NAME, {}).get("datatype")
    return VECTOR_DATATYPE if datatype == VECTOR_DATATYPE_NAME else None


def part_dirs(directory: Path) -> list[Path]:
    """A store's parts in order; a store made before parts is its one part."""
    if (directory / "edge_config.json").exists():
        return [directory]
    return sorted(path for path in directory.glob(f"{PART_PREFIX}*") if path.is_dir())


def complete_copy(directory: Path) -> bool:
    """Whether a copied store has its model record and every part's config (a copy cut
    short may not)."""
    return (directory / EDGE_SIDECAR).is_file() and all(
        (part / "edge_config.json").is_file() for part in part_dirs(directory))


def hold_directory(directory: Path, busy_timeout: float) -> int:
    """An exclusive ``flock`` on the store's lock file, waited for up to ``busy_timeout``
    seconds: Edge locks each part's log only while the part is open, the store holds them
    all."""
    descriptor = os.open(directory / DIRECTORY_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    deadline = time.monotonic() + busy_timeout
    delay = 0.05
    while True:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return descriptor
        except BlockingIOError:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                os.close(descriptor)
                raise VectorStoreBusy(
                    f"vector store {directory} is held by another process or store; gave up "
                    f"after {busy_timeout:g} s") from None
            time.sleep(min(delay, remaining))
            delay = min(delay * 2, 2.0)


# Linux reads at most a device's readahead window per advice (128 KB by default, 8 MB here):
# a file is advised a window at a time.
READ_AHEAD_STEP = 128 * 1024


def read_ahead_payloads(part: Path) -> int:
    """Ask the kernel to read a part's payloads and payload indexes into the page cache, in
    the background; the number of files asked for. Edge reads payloads through memory maps
    and drops their cached pages when a shard closes, so every new query process read each
    hit's payload from disk (one part of 131k points, 100 reads of 30 payloads: 177 ms and
    1,670 page faults from disk; 29 ms and none once read ahead)."""
    if not hasattr(os, "posix_fadvise"):  # not on macOS: searches stay right, only slower
        return 0
    advised = 0
    try:
        files = [path for path in part.glob("segments/*/payload_*/**/*") if path.is_file()]
    except FileNotFoundError:  # the copy was removed meanwhile: nothing left to read
        return 0
    for path in files:
        try:
            descriptor = os.open(path, os.O_RDONLY)
        except FileNotFoundError:  # a segment merged or a copy removed since the listing
            continue
        try:
            for offset in range(0, os.fstat(descriptor).st_size, READ_AHEAD_STEP):
                os.posix_fadvise(descriptor, offset, READ_AHEAD_STEP, os.POSIX_FADV_WILLNEED)
        finally:
            os.close(descriptor)
        advised += 1
    return advised


def not_published(folder: str, names: list[str]) -> list[str]:
    """What a published copy leaves out: the writer's lock, parts being made."""
    return [name for name in names
            if name == DIRECTORY_LOCK or name.startswith(f".{PART_PREFIX}")]


def check_identity(where: str, recorded: tuple[str, int], wanted: tuple[str, int]) -> None:
    if recorded != wanted:
        raise VectorStoreMismatch(
            f"{where} holds vectors of {recorded[0]} (dimension {recorded[1]}), not {wanted[0]} "
            f"(dimension {wanted[1]}); use collection_name() for a separate collection"
        )


COPY_BLOCK = 256 * 1024  # also the grain at which zeros are left as holes
_ZERO_BLOCK = bytes(COPY_BLOCK)


def _copy_sparse(source: str, target: str) -> None:
    """Copy only the data regions, and of those only the blocks that are not all zeros:
    Edge preallocates 32 MiB WAL and mmap files, and a plain copy writes their holes out (a
    100k-point shard: 410 MB copied instead of 250 MB). Where the file system keeps those
    regions as zeros rather than holes (tmpfs, where Edge's maps touch them) the zeros are
    left as holes too, which read as zeros just the same: a 3-note store's copy there, 56 MB
    in 40 ms, is 3 MB in 22 ms. Times and modes are not copied: Edge reads neither, and
    copying them took a third of a cold search's copy."""
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
                block = os.pread(src.fileno(), min(offset - start, COPY_BLOCK), start)
                if block != _ZERO_BLOCK[:len(block)]:
                    os.pwrite(dst.fileno(), block, start)
                start += len(block)
        dst.truncate(size)


# A copy of a store's file that keeps its holes (for whoever copies a data directory).
copy_file = _copy_sparse if hasattr(os, "SEEK_DATA") else shutil.copyfile


def published_identity(published: Path, model: str | None,
                        dimension: int | None) -> tuple[str, int]:
    """(model, dimension) of a published shard; the ones given must match its record."""
    recorded = read_sidecar(published)
    model = recorded["model"] if model is None else model
    dimension = recorded["dimension"] if dimension is None else dimension
    check_identity(str(published), (recorded["model"], recorded["dimension"]),
                    (model, dimension))
    return model, dimension


def read_sidecar(directory: Path) -> dict[str, Any]:
    sidecar = Path(directory) / EDGE_SIDECAR
    try:
        recorded = json.loads(sidecar.read_text())
        return {"model": str(recorded["model"]), "dimension": int(recorded["dimension"])}
    except FileNotFoundError as exc:
        raise VectorStoreMismatch(f"{directory} is not a Jarvis vector store (no {EDGE_SIDECAR})"
                                  ) from exc
    except (ValueError, KeyError, TypeError) as exc:
        raise VectorStoreMismatch(f"{sidecar} is unreadable: {exc}") from exc


def edge_filter(conditions: list[Condition]):
    if not conditions:
        return None
    must = [
        qe.FieldCondition(c.key, match=qe.MatchAny(list(c.values))) if isinstance(c, MatchAny)
        else qe.FieldCondition(c.key, range=qe.RangeDateTime(gte=c.gte, lte=c.lte))
        for c in conditions
    ]
    return qe.Filter(must=must)


def scrolled(shard, filter_, payload) -> Iterator[Any]:
    """Every record of a shard (matching ``filter_``), a page at a time."""
    offset = None
    while True:
        records, offset = shard.scroll(qe.ScrollRequest(
            offset=offset, limit=SCROLL_PAGE, filter=filter_, with_payload=payload,
            with_vector=False))
        yield from records
        if offset is None:
            return

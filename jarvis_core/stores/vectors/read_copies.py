"""Readers' private copies of published Edge shards, kept for the next reader.

Edge admits one process per shard directory (its write-ahead log is locked), so every query
process reads its own copy of a published shard. Copying at every cold start grew with the
shard (100k points: 250 MB per `jarvis search`), so a copy is kept once its reader is done:
copies live in numbered slots under ``<root>/<version>/``, each slot held through an flock
on ``<slot>.lock`` while a reader has it open. A new reader takes the first free slot and
opens its copy at once; it copies only when every slot is busy. The kernel drops a lock
when its process exits or dies, so a crashed reader frees its slot. A version's copies are
removed once the version is no longer published and no reader holds them.
"""

from __future__ import annotations

import fcntl
import itertools
import logging
import os
import shutil
from collections.abc import Iterable
from pathlib import Path

from jarvis_core.stores.vectors.edge import EdgeVectorStore

log = logging.getLogger("jarvis.vectors")


class ReadCopy:
    """An open copy of a published shard; ``close`` (or leaving a ``with`` block) closes the
    store and frees its slot."""

    def __init__(self, store: EdgeVectorStore, lock: int, slot: Path) -> None:
        self.store = store
        self.slot = slot
        self._lock = lock

    def close(self) -> None:
        if self._lock < 0:
            return
        try:
            self.store.close()
        finally:
            os.close(self._lock)  # closing the descriptor drops the flock
            self._lock = -1

    def __enter__(self) -> ReadCopy:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


def open_read_copy(root: Path, version: str, published: Path) -> ReadCopy:
    """Open a private copy of ``published`` (the shard of serving version ``version``) in a
    free slot under ``root``, copying it only when no free slot holds a complete copy."""
    directory = Path(root) / version
    directory.mkdir(parents=True, exist_ok=True)
    for number in itertools.count():
        slot = directory / str(number)
        lock = _try_lock(slot.with_name(f"{number}.lock"))
        if lock is None:
            continue
        try:
            return ReadCopy(_open_slot(slot, Path(published)), lock, slot)
        except BaseException:
            os.close(lock)
            raise
    raise AssertionError("unreachable")  # itertools.count() never ends


def remove_unpublished(root: Path, published: Iterable[str]) -> None:
    """Remove the copies of versions no longer published, unless a reader still holds one."""
    root = Path(root)
    if not root.is_dir():
        return
    keep = set(published)
    for directory in root.iterdir():
        if directory.name in keep or not directory.is_dir():
            continue
        locks = [_try_lock(path) for path in directory.glob("*.lock")]
        try:
            if all(lock is not None for lock in locks):
                shutil.rmtree(directory, ignore_errors=True)
        finally:
            for lock in locks:
                if lock is not None:
                    os.close(lock)


def _try_lock(path: Path) -> int | None:
    """An open descriptor holding an exclusive flock on ``path``; None when another holds it."""
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(descriptor)
        return None
    return descriptor


def _open_slot(slot: Path, published: Path) -> EdgeVectorStore:
    """The slot's kept copy opened as it is, else (absent, half-made or damaged) a fresh one.
    The ``.ready`` marker is written once a copy has opened, so a reader killed while
    copying leaves a slot that is copied again."""
    ready = slot.with_name(f"{slot.name}.ready")
    if ready.exists():
        try:
            return EdgeVectorStore.open_kept_copy(published, slot)
        except Exception as exc:  # qdrant_edge raises a bare Exception for a damaged shard
            reason = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
            log.warning("read copy %s could not be opened (%s): copying the shard again",
                        slot, reason)
    ready.unlink(missing_ok=True)
    shutil.rmtree(slot, ignore_errors=True)
    store = EdgeVectorStore.open_read_copy(published, slot)
    ready.touch()
    return store

"""Write turns: cross-process locks on the working stores, held only while a batch is written.

Each embedded store admits one writing process (one DuckDB file, one Qdrant Edge shard, one
Tantivy writer, one SQLite graph), so runs of different sources take turns for their writes
and overlap everything else: parsing, chunking, tokenizing, embedding and graph extraction
hold no store. A turn is an ``fcntl.flock`` on a lock file beside the store: the kernel drops
it when its process exits or dies, so a killed run never leaves a store locked. A process
waits for a turn up to a timeout, then raises ``StoreBusy`` naming the store and its holder
(written into the lock file by whoever holds it).

Turns nest within a thread (a healing open reads the tables while holding the vector
store); other threads of the process wait as other processes do. Locks are always taken in
one order, so two processes never wait for each other: the publish lock, then sources'
refresh locks (sorted), then vectors, graph, keyword index, tables.
"""

from __future__ import annotations

import fcntl
import logging
import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

logger = logging.getLogger(__name__)

# Long enough for the longest turn another process may hold: a publish copies every store
# (at 100k chunks, about a minute with the HNSW build).
DEFAULT_TIMEOUT = 900.0
_POLL_FIRST, _POLL_MAX = 0.01, 0.25


class StoreBusy(TimeoutError):
    """Another process held a store longer than this one would wait."""


@dataclass
class _Hold:
    """This process's hold of one lock file: the threads' lock and how deep it is nested."""

    thread_lock: threading.RLock = field(default_factory=threading.RLock)
    depth: int = 0
    fd: int | None = None


_holds: dict[Path, _Hold] = {}
_holds_lock = threading.Lock()
_holder_label = ""
_held_seconds: dict[str, float] = {}


def label_holder(label: str) -> None:
    """What this process is (a run and its job, say), written with its pid into every lock
    it takes, so a waiter that times out can name it."""
    global _holder_label
    _holder_label = label


def held_seconds() -> dict[str, float]:
    """Seconds this process has held each lock (by store name) since it started: what a run
    spends in write turns, against its whole time."""
    return dict(_held_seconds)


def lock_path(store: Path) -> Path:
    """The lock file beside a store (a file or a folder)."""
    return store.with_name(f".{store.name}.lock")


def _hold_of(path: Path) -> _Hold:
    with _holds_lock:
        return _holds.setdefault(path.resolve(), _Hold())


def holder_of(path: Path) -> str:
    """What the lock file says of its current (or last) holder."""
    try:
        return path.read_text().strip() or "unknown"
    except OSError:
        return "unknown"


def _acquire(path: Path, store: str, timeout: float, shared: bool) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    deadline, delay = time.monotonic() + timeout, _POLL_FIRST
    try:
        while True:
            try:
                fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise StoreBusy(
                        f"{store} ({path}) is held by another process ({holder_of(path)}); "
                        f"gave up waiting for it after {timeout:g} s") from None
                time.sleep(min(delay, remaining))
                delay = min(delay * 2, _POLL_MAX)
        if shared:
            return fd  # many hold it: the file names none of them
        since = datetime.now(UTC).isoformat(timespec="seconds")
        who = f"pid {os.getpid()} on {socket.gethostname()}"
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{who}{', ' + _holder_label if _holder_label else ''}, since {since}\n"
                  .encode(), 0)
        return fd
    except BaseException:
        os.close(fd)
        raise


@contextmanager
def write_turn(path: Path, store: str, timeout: float = DEFAULT_TIMEOUT,
               shared: bool = False) -> Iterator[None]:
    """Hold the lock file ``path`` (see ``lock_path``) for ``store``, waiting up to
    ``timeout`` seconds for another process's or thread's turn to end; ``shared`` holds it
    beside other shared holders, excluding only an exclusive one. A thread nesting turns of
    one lock takes it in the first turn's mode."""
    hold = _hold_of(path)
    if not hold.thread_lock.acquire(timeout=timeout):
        raise StoreBusy(f"{store} ({path}) is held by another thread of this process; gave up "
                        f"waiting for it after {timeout:g} s")
    try:
        if hold.depth == 0:
            hold.fd = _acquire(path, store, timeout, shared)
        hold.depth += 1
        started = time.perf_counter()
        try:
            yield
        finally:
            hold.depth -= 1
            if hold.depth == 0:
                _held_seconds[store] = (_held_seconds.get(store, 0.0)
                                        + time.perf_counter() - started)
                os.close(hold.fd)  # releases the flock
                hold.fd = None
    finally:
        hold.thread_lock.release()


@contextmanager
def shared_work_turn(target: Path, work: str, timeout: float) -> Iterator[None]:
    """``write_turn`` on ``target``'s lock for work shared only to save time (a model
    converted or exported once for processes that start together, who then find it done):
    where the lock cannot be had (a read-only cache, a holder stuck past ``timeout``) the
    work goes on without it."""
    with ExitStack() as turn:
        try:
            turn.enter_context(write_turn(lock_path(target), work, timeout))
        except OSError as exc:
            logger.info("%s without waiting for other processes: %s", work, exc)
        yield


# -- runs of sources and publishing ---------------------------------------------------------

# A publish waits for every source run in flight to end: the longest is a large first
# embedding (a 191k-chunk project: about 40 minutes on 2 cores).
PUBLISH_WAIT = 4 * 3600.0


def _refreshing_dir(data_dir: Path) -> Path:
    return data_dir / "refreshing"


def _gate(data_dir: Path) -> Path:
    return _refreshing_dir(data_dir) / ".all-sources.lock"


def refreshing_sources(data_dir: Path) -> list[str]:
    """Holders of the sources whose runs are in flight (their lock is held)."""
    held = []
    for path in sorted(_refreshing_dir(data_dir).glob("[!.]*.lock")):
        with open(path, "a+") as probe:
            try:
                fcntl.flock(probe.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                held.append(f"{path.stem}: {holder_of(path)}")
    return held


@contextmanager
def source_run(data_dir: Path, source: str, timeout: float = DEFAULT_TIMEOUT) -> Iterator[None]:
    """Held by a run of ``source`` from before its first write to its end: beside runs of
    other sources (the gate, shared), never beside another run of the same source or a
    publish."""
    with write_turn(_gate(data_dir), "the sources' refresh gate (a publish holds it)",
                    timeout, shared=True), \
            write_turn(_refreshing_dir(data_dir) / f"{source}.lock",
                       f"source {source!r} (another run of it)", timeout):
        yield


@contextmanager
def publishing(data_dir: Path, timeout: float = PUBLISH_WAIT) -> Iterator[None]:
    """Held by a publish (and the cross-source links it follows) for its whole run: one at a
    time, and only when no source is mid-refresh, so a version holds every source as its
    last run left it, never half refreshed. New source runs wait meanwhile."""
    with write_turn(_refreshing_dir(data_dir) / ".publishing.lock", "publishing", timeout), \
            ExitStack() as gate:
        try:
            gate.enter_context(write_turn(_gate(data_dir), "the sources' refresh gate",
                                          timeout))
        except StoreBusy as exc:
            raise StoreBusy(f"{exc}; sources mid-refresh: "
                            f"{'; '.join(refreshing_sources(data_dir)) or 'none left'}") from exc
        yield

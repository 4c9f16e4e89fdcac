"""Opening the DuckDB files for reading: a short read-only connection, retried while a
refresh holds the write lock, and a damaged file told apart from a locked one and reported
with what to do.

The working tables are the one store Jarvis cannot rebuild from another store: a damaged
file fails the refresh with a message naming it and the way back (move it aside, refresh
from the sources); a damaged published copy is replaced by the next refresh."""

from __future__ import annotations

import importlib.util
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import duckdb


class StoreUnavailable(RuntimeError):
    """The tables cannot be read right now; the message says why."""


class TablesDamaged(StoreUnavailable):
    """A DuckDB file is damaged, not locked; the message names it and says what to do."""


# what DuckDB says about a file that is not a database, or one with a damaged block
_DAMAGE = ("not a valid DuckDB database", "Corrupt database file", "Could not read enough bytes",
           "does not match stored checksum")


def remember_missing_pandas() -> None:
    """DuckDB's Python client imports pandas for every parameter it binds and, where pandas
    is not installed (it is not a dependency here), searches the whole import path again
    each time: 15 searches a query, 30 for a named document's lookup, 3 ms of a 20 ms graph
    search at 200k chunks, 4 % of a refresh's CPU. Recorded once as missing (None in
    ``sys.modules``, Python's own marker), every later import fails at once, as it would
    have failed anyway."""
    if "pandas" not in sys.modules and importlib.util.find_spec("pandas") is None:
        sys.modules["pandas"] = None


RELEASE_LIMIT = "16MB"  # what DuckDB keeps of its cache while ``release_cache`` runs


def release_cache(conn: duckdb.DuckDBPyConnection) -> None:
    """Give back the pages DuckDB cached and the memory its allocator kept, keeping its memory
    limit: lowering the limit makes it evict them. A refresh holds its database open, so
    the cache of every step before stays (up to the limit, and the allocator above it): at
    publish it sat beside Qdrant Edge's index build, the refresh's peak (a 50k-chunk copy
    of the tables: 292 MB held, 38 MB after). Best effort: pages still in use stay. A limit of
    whole MiB (the working tables') comes back exactly."""
    limit, = conn.execute("SELECT current_setting('memory_limit')").fetchone()
    try:
        conn.execute(f"SET memory_limit = '{RELEASE_LIMIT}'")
    except duckdb.OutOfMemoryException:
        pass  # more is in use than the lower limit: it evicted what it could
    finally:
        conn.execute(f"SET memory_limit = '{limit}'")


def is_damage(exc: BaseException) -> bool:
    """Whether a DuckDB error says the file itself is damaged (not locked, not a bad query)."""
    return isinstance(exc, duckdb.Error) and any(marker in str(exc) for marker in _DAMAGE)


def damaged(database: Path, exc: BaseException, *, working: bool = True) -> TablesDamaged:
    """The error a damaged DuckDB file is reported with: the working tables file is moved
    aside and rebuilt from the sources; a published copy is replaced by the next refresh."""
    cause = f"{type(exc).__name__}: {exc}"[:200]
    if not working:
        return TablesDamaged(f"{database} is damaged, not locked ({cause}); the next "
                             "`jarvis refresh` publishes a new version")
    return TablesDamaged(
        f"the working tables file {database} is damaged, not locked ({cause}). Move it aside "
        f"(mv '{database}' '{database}.damaged') and run `jarvis refresh`: every layer is "
        "rebuilt from the sources, the vector, keyword and graph stores heal from the new "
        "tables and the analytics history comes back from its backup")


@contextmanager
def read_only(database: Path, attempts: int = 20, wait_seconds: float = 0.25):
    """A short read-only connection, retried while a refresh holds the write lock; a damaged
    file raises ``TablesDamaged`` at once."""
    if not database.exists():
        raise StoreUnavailable(f"no data yet at {database}: run `jarvis refresh` first")
    remember_missing_pandas()
    for attempt in range(attempts):
        try:
            conn = duckdb.connect(str(database), read_only=True)
            break
        except duckdb.IOException as exc:
            if is_damage(exc):
                raise damaged(database, exc, working=False) from exc
            if attempt == attempts - 1:
                raise StoreUnavailable(f"{database} is locked by a running refresh: {exc}") from exc
            time.sleep(wait_seconds)
    try:
        yield conn
    finally:
        conn.close()

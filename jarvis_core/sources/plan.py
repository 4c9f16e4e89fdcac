"""What a run did to a source's items, in one shape for every source kind and layer:
counts of new, changed, unchanged, deleted and failed items, and the failure rows."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import UTC, datetime

import duckdb

from jarvis_core.stores import tables

# The ingest_failures path of a failure of the whole source rather than one of its items.
WHOLE_SOURCE = "."
# Rows a run keeps of what it wrote for its asset's preview (which shows fewer) when it
# writes in batches and holds only the last.
PREVIEW_ROWS = 100


@dataclass(frozen=True)
class ItemCounts:
    """How many items a run found new, changed, unchanged, deleted or failed."""

    new: int = 0
    changed: int = 0
    unchanged: int = 0
    deleted: int = 0
    failed: int = 0

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


def utc_now() -> datetime:
    """Naive UTC, as every table stores times."""
    return datetime.now(UTC).replace(tzinfo=None)


def failure_row(source: str, path: str, reason: str, *, size_bytes: int | None = None,
                mtime_ns: int | None = None, detected_at: datetime | None = None) -> dict:
    """One ``ingest_failures`` row: the item (file, or ``file#item``) and why it failed."""
    return {"source": source, "path": path, "reason": reason, "size_bytes": size_bytes,
            "mtime_ns": mtime_ns, "detected_at": detected_at or utc_now()}


def record_unreachable(conn: duckdb.DuckDBPyConnection, source: str, ingested: str,
                       reason: str) -> int:
    """Record that a whole source could not be read (a missing folder, clone or export),
    keeping what earlier runs stored: an empty read would look like everything deleted.
    Returns how many items of the source stay stored (rows of its kind's ``ingested``
    table)."""
    tables.replace_rows(conn, tables.INGEST_FAILURES, source=source, remove_paths=None,
                        rows=[failure_row(source, WHOLE_SOURCE, reason)])
    return conn.execute(f"SELECT count(*) FROM {ingested} WHERE source = ?",
                        [source]).fetchone()[0]

"""What raw_mail and raw_pages share: a source of export files, parsed only when one of its
files changed, whose vanished folder fails that source alone."""

from collections.abc import Callable
from pathlib import Path
from typing import Any

import dagster as dg

from jarvis_assets.metadata import Stopwatch
from jarvis_assets.partitions import unreachable_source_result
from jarvis_resources import TablesResource


def read_export_files(context: dg.AssetExecutionContext, tables: TablesResource, kind: str,
                      path: Path | None, stored: Any, watch: Stopwatch, *,
                      file_hashes: Callable[[Path], dict], read_changed: Callable[..., Any],
                      nothing_read: Callable[[], Any], vanished: type[Exception],
                      unchanged_counts: tuple[int, int]
                      ) -> dg.MaterializeResult | tuple[dict, Any]:
    """(file hashes, what was read) — or the asset's result when no file changed
    (``unchanged_counts``: documents and rows stored) or the files vanished. ``path`` None:
    the source is no longer configured, nothing is read (its rows are purged)."""
    source = context.partition_key
    try:
        hashes = file_hashes(path) if path is not None else {}
        if path is not None and stored.unchanged(hashes):
            watch.lap("parse")
            documents, rows = unchanged_counts
            return dg.MaterializeResult(metadata={
                "new": 0, "changed": 0, "unchanged": documents, "deleted": 0,
                "failed": stored.failed, "dagster/row_count": rows, "source_kind": kind,
                "files": len(hashes), "files_changed": False, **watch.seconds})
        with tables.get_connection() as conn:
            read = read_changed(conn, source, path, stored) if path is not None \
                else nothing_read()
    except vanished as exc:  # the folder or file is gone (an unmounted drive)
        return unreachable_source_result(context, tables, source, kind, str(exc))
    watch.lap("parse")
    return hashes, read

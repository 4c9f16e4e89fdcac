"""What the mail and Confluence writers share: people as table structs, row hashes, change
sets by key and per-item failure rows, and the columns those take."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import polars as pl

from jarvis_core.progress import Stopwatch
from jarvis_core.sources.kind import Ingested, IngestRun, SourceUnreachable
from jarvis_core.sources.people import Identity
from jarvis_core.sources.plan import ItemCounts, failure_row

ERROR = "error"  # the severity of a MailProblem / ConfluenceProblem that is a failure
IDENTITY = pl.Struct({"name": pl.Utf8, "email": pl.Utf8, "aliases": pl.List(pl.Utf8)})
ITEM_FAILURE = pl.Struct({"item": pl.Utf8, "reason": pl.Utf8})


def identity_row(identity: Identity | None) -> dict | None:
    if identity is None:
        return None
    return {"name": identity.name, "email": identity.email, "aliases": list(identity.aliases)}


def identity_of(row: dict | None) -> Identity | None:
    if not row:
        return None
    return Identity(row["name"], row["email"], tuple(row["aliases"] or ()))


def row_hash(row: dict) -> str:
    """Identifies what a row holds, so an unchanged one is not rewritten."""
    kept = {key: value for key, value in row.items() if key not in ("ingested_at", "row_hash")}
    return hashlib.sha256(json.dumps(kept, sort_keys=True, default=str).encode()).hexdigest()


def changes(current: dict[str, str], stored: dict[str, str]) -> dict[str, list[str]]:
    """Keys by what happened to them since the stored hashes."""
    return {
        "new": sorted(set(current) - set(stored)),
        "changed": sorted(k for k in set(current) & set(stored) if current[k] != stored[k]),
        "unchanged": sorted(k for k in set(current) & set(stored) if current[k] == stored[k]),
        "deleted": sorted(set(stored) - set(current)),
    }


def failure_rows(source: str, problems: list, now: datetime) -> list[dict]:
    """One ``ingest_failures`` row per failed item (``<file>#<item>``, or the file), reasons
    of one item joined; warnings stay on the rows of what was read."""
    reasons: dict[str, list[str]] = {}
    for problem in problems:
        if problem.severity == ERROR:
            item = problem.item  # a Confluence item is "#results[3]", a mail one "message 3 ..."
            path = f"{problem.file}{'' if item.startswith('#') else '#'}{item}" if item \
                else problem.file
            reasons.setdefault(path, []).append(problem.reason)
    return [failure_row(source, path, "; ".join(dict.fromkeys(found)), detected_at=now)
            for path, found in sorted(reasons.items())]


def warning_count(problems: list) -> int:
    return sum(1 for problem in problems if problem.severity != ERROR)


def ingest_export(run: IngestRun, *, read_stored: Callable[..., Any],
                  file_hashes: Callable[[Path], dict], read_changed: Callable[..., Any],
                  nothing_read: Callable[[], Any], vanished: type[Exception],
                  unchanged_counts: Callable[[Any], tuple[int, int]],
                  write: Callable[..., Ingested]) -> Ingested:
    """The ingest of an export kind (mail, Confluence): nothing is read when every file
    hashes as stored (``unchanged_counts(stored)``: documents and rows stored); otherwise
    ``read_changed`` reads what changed and ``write(conn, run, read, hashes, stored)`` writes
    it and says what it did. A source no longer configured reads nothing, so its rows go; a
    vanished export is SourceUnreachable."""
    path, watch = run.settings.path if run.settings is not None else None, Stopwatch()
    with run.connect() as conn:
        stored = read_stored(conn, run.source)
    try:
        hashes = file_hashes(path) if path is not None else {}
        if path is not None and stored.unchanged(hashes):
            watch.lap("parse")
            documents, rows = unchanged_counts(stored)
            return Ingested(counts=ItemCounts(unchanged=documents,
                                              failed=stored.failed).as_dict(),
                            rows=rows, location=str(path), seconds=watch.seconds,
                            figures={"files": len(hashes), "files_changed": False})
        with run.connect() as conn:
            read = read_changed(conn, run.source, path, stored) if path is not None \
                else nothing_read()
    except vanished as exc:  # the folder or file is gone (an unmounted drive)
        raise SourceUnreachable(str(exc)) from exc
    watch.lap("parse")
    with run.connect() as conn:
        done = write(conn, run, read, hashes, stored)
    watch.lap("write")
    done.location, done.seconds = str(path) if path is not None else None, watch.seconds
    return done

"""Incremental vault ingestion: decide what changed, parse only that, report everything.

A note is re-read only when its size or mtime moved, and re-parsed only when its bytes
(sha256) or the parser version changed. Files that cannot be ingested are recorded as
failures with a reason and re-tried only when they change on disk.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import PurePosixPath

import duckdb
import polars as pl

from jarvis_core import progress
from jarvis_core.progress import Stopwatch
from jarvis_core.settings import IngestSettings
from jarvis_core.sources.kind import Ingested, IngestRun, SourceUnreachable
from jarvis_core.sources.limits import ItemTooSlow, cpu_time_limit
from jarvis_core.sources.plan import PREVIEW_ROWS, ItemCounts, utc_now
from jarvis_core.sources.vault.notes import parse_note
from jarvis_core.sources.vault.parsed_note import ParsedNote
from jarvis_core.sources.vault.scan import (
    NoteReadError,
    VaultFile,
    VaultScan,
    VaultUnavailable,
    read_note,
    scan_existing_vault,
)
from jarvis_core.sources.vault.tables import ATTACHMENTS, NOTES
from jarvis_core.stores import tables
from jarvis_core.stores.keys import note_key

PARSER_VERSION = 2
PROGRESS_EVERY = 200  # notes between progress reports

_LIMITS = IngestSettings()  # the defaults
log = logging.getLogger(__name__)
_WORD = re.compile(r"\w+")


@dataclass
class IngestPlan:
    """What one ingestion run writes for one vault, and the counts it reports."""

    source: str
    note_rows: list[dict] = field(default_factory=list)
    touched: list[tuple[int, int, str]] = field(default_factory=list)  # size, mtime_ns, path
    removed_paths: set[str] = field(default_factory=set)
    failures: list[dict] = field(default_factory=list)
    attachments: list[dict] = field(default_factory=list)
    new: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    unchanged: int = 0
    deleted: list[str] = field(default_factory=list)
    renamed: list[tuple[str, str]] = field(default_factory=list)
    preview: list[dict] = field(default_factory=list)  # the first rows of notes written before

    def take_batch(self) -> IngestPlan:
        """The notes parsed so far, and the rows they replace, as a plan of their own to
        write now; this plan keeps the counts and what is left."""
        batch = IngestPlan(self.source, note_rows=self.note_rows, touched=self.touched,
                           removed_paths=self.removed_paths)
        self.preview = self.preview or self.note_rows[:PREVIEW_ROWS]
        self.note_rows, self.touched, self.removed_paths = [], [], set()
        return batch

    @property
    def failed(self) -> list[str]:
        return [f["path"] for f in self.failures]

    def counts(self) -> dict[str, int]:
        return ItemCounts(len(self.new), len(self.changed), self.unchanged, len(self.deleted),
                          len(self.failures)).as_dict() | {"renamed": len(self.renamed)}


def _timestamp(value: str | None) -> datetime | None:
    """ISO date or datetime (as the parser emits) to a naive UTC datetime."""
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        try:
            parsed = datetime.combine(date.fromisoformat(value), datetime.min.time())
        except ValueError:
            return None
    if parsed.tzinfo:
        parsed = parsed.astimezone(UTC).replace(tzinfo=None)
    return parsed


def _from_ns(mtime_ns: int) -> datetime:
    return datetime.fromtimestamp(mtime_ns / 1e9, tz=UTC).replace(tzinfo=None)


def note_row(source: str, file: VaultFile, content_hash: str, parsed: ParsedNote,
             warnings: list[str], now: datetime) -> dict:
    as_dicts = lambda items: [vars(item) for item in items]  # noqa: E731 - dataclass rows
    all_warnings = list(warnings)
    if parsed.frontmatter_error:
        all_warnings.append(parsed.frontmatter_error)
    return {
        "source": source, "path": file.path, "note_key": note_key(source, file.path),
        "title": parsed.title, "size_bytes": file.size_bytes, "mtime_ns": file.mtime_ns,
        "content_hash": content_hash, "parser_version": PARSER_VERSION,
        "frontmatter": json.dumps(parsed.frontmatter, ensure_ascii=False, sort_keys=True),
        "frontmatter_error": parsed.frontmatter_error,
        "aliases": parsed.aliases, "tags": parsed.tags,
        "tag_lines": [{"tag": tag, "lines": lines} for tag, lines in parsed.tag_lines.items()],
        "wikilinks": as_dicts(parsed.wikilinks), "embeds": as_dicts(parsed.embeds),
        "links": as_dicts(parsed.links), "headings": as_dicts(parsed.headings),
        "block_ids": parsed.block_ids, "relations": as_dicts(parsed.relations),
        "frontmatter_links": json.dumps(parsed.frontmatter_links, ensure_ascii=False,
                                        sort_keys=True),
        "created_at": _timestamp(parsed.created),
        "modified_at": _timestamp(parsed.modified) or _from_ns(file.mtime_ns),
        "body": parsed.body, "body_start_line": parsed.body_start_line,
        "word_count": len(_WORD.findall(parsed.body)), "warnings": all_warnings,
        "ingested_at": now,
    }


def cap_links(note: ParsedNote, limit: int) -> str | None:
    """Keep at most ``limit`` links of a note (wikilinks, embeds, markdown links and typed
    relations, each kind cut in proportion, first written first kept); a warning when any
    were dropped."""
    kinds = ("wikilinks", "embeds", "links", "relations")
    total = sum(len(getattr(note, kind)) for kind in kinds)
    if total <= limit:
        return None
    for kind in kinds:
        items = getattr(note, kind)
        setattr(note, kind, items[:math.floor(limit * len(items) / total)])
    return (f"{total} links, over the {limit} kept per note (ingest.max_links_per_note): "
            f"only the first {limit} become graph edges")


def plan_ingest(source: str, scan: VaultScan, stored_notes: StoredNotes,
                max_note_bytes: int, *, max_links: int = _LIMITS.max_links_per_note,
                max_item_seconds: float = _LIMITS.max_item_seconds,
                write_batch: Callable[[IngestPlan], None] | None = None,
                batch_notes: int = 0) -> IngestPlan:
    """Compare a fresh scan with the stored notes and parse what is new or changed; a note
    with more than ``max_links`` links keeps the first ones, one that takes more than
    ``max_item_seconds`` CPU seconds to read and parse is a failure. With ``write_batch``,
    every ``batch_notes`` parsed notes go to it as a plan of their own (so a vault's notes
    are never all in memory at once); the plan returned holds the rest."""
    plan = IngestPlan(source=source)
    now = utc_now()
    stored = {row["path"]: row for row in stored_notes.notes.iter_rows(named=True)}
    failed_before = {row["path"]: row for row in stored_notes.failures.iter_rows(named=True)}
    hashes_seen: dict[str, str] = {}

    for problem in scan.problems:
        plan.failures.append({"source": source, "path": problem.path, "reason": problem.reason,
                              "size_bytes": None, "mtime_ns": None, "detected_at": now})
    notes = scan.notes
    for count, file in enumerate(notes):
        if count % PROGRESS_EVERY == 0:
            progress.report(source, "raw_notes", count, len(notes))
        old = stored.get(file.path)
        if (old and old["size_bytes"] == file.size_bytes and old["mtime_ns"] == file.mtime_ns
                and old["parser_version"] == PARSER_VERSION):
            plan.unchanged += 1
            continue
        before = failed_before.get(file.path)
        if before and (before["size_bytes"], before["mtime_ns"]) == (file.size_bytes,
                                                                      file.mtime_ns):
            plan.failures.append({**before, "source": source, "detected_at": now})
            if old:
                plan.removed_paths.add(file.path)
            continue
        try:
            with cpu_time_limit(max_item_seconds, file.path):
                text, content_hash, warnings = read_note(file, max_note_bytes)
                if old and old["content_hash"] == content_hash and \
                        old["parser_version"] == PARSER_VERSION:
                    plan.touched.append((file.size_bytes, file.mtime_ns, file.path))
                    plan.unchanged += 1
                    continue
                parsed = parse_note(text, path=file.path)
            if cut := cap_links(parsed, max_links):
                warnings.append(cut)
        except (NoteReadError, ItemTooSlow) as exc:
            plan.failures.append({"source": source, "path": file.path, "reason": str(exc),
                                  "size_bytes": file.size_bytes, "mtime_ns": file.mtime_ns,
                                  "detected_at": now})
            if old:
                plan.removed_paths.add(file.path)
            continue
        except Exception as exc:  # a parser bug must not cost the other notes
            log.exception("parsing %s/%s failed", source, file.path)
            plan.failures.append({"source": source, "path": file.path,
                                  "reason": f"parser error: {type(exc).__name__}: {exc}",
                                  "size_bytes": file.size_bytes, "mtime_ns": file.mtime_ns,
                                  "detected_at": now})
            if old:
                plan.removed_paths.add(file.path)
            continue
        plan.note_rows.append(note_row(source, file, content_hash, parsed, warnings, now))
        plan.removed_paths.add(file.path)
        (plan.changed if old else plan.new).append(file.path)
        hashes_seen[content_hash] = file.path
        if write_batch is not None and len(plan.note_rows) >= batch_notes:
            write_batch(plan.take_batch())

    progress.report(source, "raw_notes", len(notes), len(notes))
    on_disk = {file.path for file in notes}
    for path, old in stored.items():
        if path not in on_disk:
            plan.deleted.append(path)
            plan.removed_paths.add(path)
            if old["content_hash"] in hashes_seen:
                plan.renamed.append((path, hashes_seen[old["content_hash"]]))

    plan.attachments = [
        {"source": source, "path": f.path, "extension": PurePosixPath(f.path).suffix.lower(),
         "size_bytes": f.size_bytes, "mtime_ns": f.mtime_ns}
        for f in scan.attachments
    ]
    return plan


@dataclass(frozen=True)
class StoredNotes:
    """What earlier runs stored of a vault: its notes' file facts and its failures."""

    notes: pl.DataFrame     # path, size_bytes, mtime_ns, content_hash, parser_version
    failures: pl.DataFrame  # path, size_bytes, mtime_ns, reason

    @classmethod
    def none(cls) -> StoredNotes:
        """A vault ingested for the first time."""
        return cls(NOTES.frame([]).select("path", "size_bytes", "mtime_ns", "content_hash",
                                          "parser_version"),
                   tables.INGEST_FAILURES.frame([]).select("path", "size_bytes", "mtime_ns",
                                                           "reason"))


def read_stored(conn: duckdb.DuckDBPyConnection, source: str) -> StoredNotes:
    return StoredNotes(
        tables.read_frame(conn, "SELECT path, size_bytes, mtime_ns, content_hash, "
                                "parser_version FROM notes WHERE source = ?", [source]),
        tables.read_frame(conn, "SELECT path, size_bytes, mtime_ns, reason "
                                "FROM ingest_failures WHERE source = ?", [source]))


def write_notes(conn: duckdb.DuckDBPyConnection, plan: IngestPlan) -> None:
    """Write the notes the plan parsed, touched and removed."""
    tables.replace_rows(conn, NOTES, source=plan.source, remove_paths=plan.removed_paths,
                        rows=plan.note_rows)
    if plan.touched:
        conn.executemany("UPDATE notes SET size_bytes = ?, mtime_ns = ? "
                         "WHERE source = ? AND path = ?",
                         [(size, mtime, plan.source, path)
                          for size, mtime, path in plan.touched])


def write_plan(conn: duckdb.DuckDBPyConnection, plan: IngestPlan) -> tuple[int, int]:
    """Write what the plan parsed, touched, removed and failed; (notes stored, notes with
    warnings) after it."""
    source = plan.source
    write_notes(conn, plan)
    tables.replace_rows(conn, tables.INGEST_FAILURES, source=source, remove_paths=None,
                        rows=plan.failures)
    tables.replace_rows(conn, ATTACHMENTS, source=source, remove_paths=None,
                        rows=plan.attachments)
    return conn.execute("SELECT count(*), count(*) FILTER (WHERE len(warnings) > 0) "
                        "FROM notes WHERE source = ?", [source]).fetchone()


def ingest(run: IngestRun) -> Ingested:
    """The vault's notes parsed where they changed, its attachments listed."""
    vault, watch = run.settings, Stopwatch()
    try:
        scan = scan_existing_vault(vault.path, vault.exclude) if vault else VaultScan([], [])
    except VaultUnavailable as exc:
        raise SourceUnreachable(str(exc)) from exc
    watch.lap("scan")
    with run.connect() as conn:
        stored = read_stored(conn, run.source)
    if vault is None and stored.notes.height:
        run.warn(f"source {run.source!r} is no longer configured: removing its notes")
    limits = run.limits

    def write_batch(batch: IngestPlan) -> None:
        with run.connect() as conn:
            write_notes(conn, batch)

    plan = plan_ingest(run.source, scan, stored, limits.max_note_bytes,
                       max_links=limits.max_links_per_note,
                       max_item_seconds=limits.max_item_seconds, write_batch=write_batch,
                       batch_notes=run.batch_items)
    watch.lap("parse")
    with run.connect() as conn:
        total, with_warnings = write_plan(conn, plan)
    watch.lap("write")
    return Ingested(
        counts=plan.counts(), rows=total, location=str(vault.path) if vault else None,
        failures=plan.failures, preview=plan.preview or plan.note_rows,
        preview_columns=("path", "title", "tags", "word_count"),
        figures={"attachments": len(plan.attachments), "notes_with_warnings": with_warnings},
        seconds=watch.seconds)

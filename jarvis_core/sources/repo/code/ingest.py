"""A repository's source code at its branch head into the code tables: the files of a
language Jarvis parses, their symbols and references.

Incremental by blob: the raw repository layer has just listed the files at the head with
their blob hashes (``repo_files``); a file whose blob is stored in ``code_files`` is never
parsed again, a file no longer at the head (or newly excluded) leaves the code tables, and
a change of the code settings or of the parser re-parses every file. Blobs are read and
parsed in batches, so memory follows the batch, not the repository. A file that cannot be
parsed cleanly is stored with its status and reason, never failing the source.

Then the commits the raw layer left pending get the symbols they modified
(``modifies.py``): after the head's parse, so the file versions still at the head are read
from the code tables instead of being parsed a second time.
"""

from __future__ import annotations

import json
import time
from collections import Counter

import duckdb

from jarvis_core.progress import Stopwatch
from jarvis_core.sources.kind import Ingested, IngestRun
from jarvis_core.sources.plan import ItemCounts
from jarvis_core.sources.repo.code.languages import grammar_for, language_name
from jarvis_core.sources.repo.code.model import PARSED, ParsedFile
from jarvis_core.sources.repo.code.modifies import modified_symbols, stored_spans
from jarvis_core.sources.repo.code.parse import PARSER_VERSION, parse_file
from jarvis_core.sources.repo.code.tables import (
    CODE_FILES,
    CODE_REFERENCES,
    CODE_STATE,
    CODE_SYMBOLS,
    CODE_TABLES,
)
from jarvis_core.sources.repo.git import read_blobs
from jarvis_core.sources.repo.tables import COMMIT_SYMBOLS, COMMIT_SYMBOLS_PENDING
from jarvis_core.stores import tables

BLOB_BATCH = 500  # files read from git and parsed per batch


def code_settings_id(settings) -> str:
    """What shapes the code rows besides the files: a change re-parses every file (how many
    commits have their modified symbols found does not shape them)."""
    return json.dumps([PARSER_VERSION, settings.code.model_dump(
        mode="json", exclude={"history_commits"})], sort_keys=True)


def wanted_files(conn: duckdb.DuckDBPyConnection, source: str, settings) -> dict[str, str]:
    """Path -> blob sha of the files at the head in a language the parser reads (those it
    then skips, as vendored or minified, are listed with the reason)."""
    if not settings.code.enabled:
        return {}
    return {path: blob for path, blob in conn.execute(
        "SELECT path, blob_sha FROM repo_files WHERE source = ? AND blob_sha IS NOT NULL",
        [source]).fetchall()
        if grammar_for(path) is not None}


def _rows(source: str, path: str, blob: str, parsed: ParsedFile, parse_ms: float
          ) -> tuple[dict, list[dict], list[dict]]:
    file_row = {"source": source, "path": path, "blob_sha": blob, "language": parsed.language,
                "status": parsed.status, "reason": parsed.reason,
                "symbols": len(parsed.symbols), "parse_ms": round(parse_ms, 3)}
    symbols = [{"source": source, "path": path, "language": parsed.language, **vars(symbol)}
               for symbol in parsed.symbols]
    references = [{"source": source, "path": path, **vars(reference)}
                  for reference in parsed.references]
    return file_row, symbols, references


def _unreadable(source: str, path: str, blob: str, reason: str) -> dict:
    return {"source": source, "path": path, "blob_sha": blob,
            "language": language_name(grammar_for(path)),
            "status": "skipped", "reason": reason, "symbols": 0, "parse_ms": 0.0}


def parse_batch(checkout, source: str, batch: list[tuple[str, str]], settings
                ) -> tuple[list[dict], list[dict], list[dict]]:
    """The code rows of one batch of (path, blob sha)."""
    blobs = read_blobs(checkout, (blob for _, blob in batch))
    files, symbols, references = [], [], []
    for path, blob in batch:
        data = blobs.get(blob)
        if not isinstance(data, bytes):
            files.append(_unreadable(source, path, blob, data or f"object {blob} is missing"))
            continue
        started = time.perf_counter()
        parsed = parse_file(path, data, settings.code)
        elapsed = (time.perf_counter() - started) * 1000
        if parsed is None:  # the parser reads no such language after all
            continue
        file_row, symbol_rows, reference_rows = _rows(source, path, blob, parsed, elapsed)
        files.append(file_row)
        symbols += symbol_rows
        references += reference_rows
    return files, symbols, references


def write_batch(conn: duckdb.DuckDBPyConnection, source: str, remove: list[str],
                rows: tuple[list[dict], list[dict], list[dict]]) -> None:
    for table, table_rows in zip((CODE_FILES, CODE_SYMBOLS, CODE_REFERENCES), rows,
                                 strict=True):
        tables.replace_rows(conn, table, source=source, remove_paths=remove, rows=table_rows)


def code_figures(conn: duckdb.DuckDBPyConnection, source: str) -> dict:
    """Stored totals: files by status and language, symbols by kind, the skipped and partial
    files with their reasons."""
    def pairs(sql: str) -> dict:
        return dict(conn.execute(sql, [source]).fetchall())

    return {
        "files_by_status": pairs("SELECT status, count(*) FROM code_files WHERE source = ? "
                                 "GROUP BY 1 ORDER BY 2 DESC"),
        "files_by_language": pairs("SELECT language, count(*) FROM code_files "
                                   "WHERE source = ? GROUP BY 1 ORDER BY 2 DESC, 1"),
        "symbols_by_kind": pairs("SELECT kind, count(*) FROM code_symbols WHERE source = ? "
                                 "GROUP BY 1 ORDER BY 2 DESC, 1"),
        "not_parsed": [{"path": path, "status": status, "reason": reason}
                       for path, status, reason in conn.execute(
                           "SELECT path, status, reason FROM code_files WHERE source = ? "
                           "AND status <> ? ORDER BY path LIMIT 50",
                           [source, PARSED]).fetchall()],
    }


def map_pending_commits(run: IngestRun, checkout, settings_id: str) -> None:
    """The symbols the pending commits modified into ``commit_symbols``; a commit leaves the
    pending list only with its rows written, so a failed run maps it again."""
    source, repo = run.source, run.settings
    with run.connect() as conn:
        pending = [sha for (sha,) in conn.execute(
            "SELECT sha FROM commit_symbols_pending WHERE source = ?", [source]).fetchall()]
    if not pending:
        return

    def spans_at_head(versions):
        with run.connect() as conn:
            return stored_spans(conn, source, versions, settings_id)

    rows, undiffed = modified_symbols(checkout, source, pending, repo.code, repo.exclude,
                                      spans_at_head)
    if undiffed:
        sha, reason = undiffed[0]
        run.warn(f"{source}: the symbols {len(undiffed)} commits modified are unknown, git "
                 f"could not diff them (commit {sha[:12]}: {reason})")
    with run.connect() as conn:
        for table, table_rows in ((COMMIT_SYMBOLS, rows), (COMMIT_SYMBOLS_PENDING, [])):
            tables.replace_rows(conn, table, source=source, remove_paths=pending,
                                rows=table_rows, key_column="sha")


def ingest(run: IngestRun) -> Ingested:
    """Parse the files at the head whose blob is not parsed yet; drop the files gone."""
    source, repo, watch = run.source, run.settings, Stopwatch()
    if repo is None:  # the raw repository layer removes every row of a vanished source
        with run.connect() as conn:
            for table in CODE_TABLES:
                tables.replace_rows(conn, table, source=source, remove_paths=None, rows=[])
        return Ingested(counts={}, rows=0, location=None)
    settings_id = code_settings_id(repo)
    with run.connect() as conn:
        wanted = wanted_files(conn, source, repo)
        stored = dict(conn.execute("SELECT path, blob_sha FROM code_files WHERE source = ?",
                                   [source]).fetchall())
        state = conn.execute("SELECT settings FROM code_state WHERE source = ?",
                             [source]).fetchone()
    same_settings = state is not None and state[0] == settings_id
    todo = sorted((path, blob) for path, blob in wanted.items()
                  if not same_settings or stored.get(path) != blob)
    gone = sorted(set(stored) - set(wanted))
    checkout = repo.checkout(run.data_dir, source)
    statuses: Counter[str] = Counter()
    with run.connect() as conn:
        write_batch(conn, source, gone, ([], [], []))
    for start in range(0, len(todo), BLOB_BATCH):
        batch = todo[start:start + BLOB_BATCH]
        rows = parse_batch(checkout, source, batch, repo)
        for row in rows[0]:
            statuses[row["status"]] += 1
            if row["status"] != PARSED:
                run.warn(f"{source}/{row['path']}: {row['status']}: {row['reason']}")
        with run.connect() as conn:
            write_batch(conn, source, [path for path, _ in batch], rows)
    with run.connect() as conn:
        tables.replace_rows(conn, CODE_STATE, source=source, remove_paths=None,
                            rows=[{"source": source, "settings": settings_id}])
    watch.lap("parse")
    map_pending_commits(run, checkout, settings_id)
    watch.lap("commit_symbols")
    with run.connect() as conn:
        figures = code_figures(conn, source)
        totals = conn.execute("SELECT (SELECT count(*) FROM code_files WHERE source = $1), "
                              "(SELECT count(*) FROM code_symbols WHERE source = $1), "
                              "(SELECT count(*) FROM commit_symbols WHERE source = $1)",
                              [source]).fetchone()
    changed = sum(1 for path, _ in todo if path in stored)
    counts = ItemCounts(new=len(todo) - changed, changed=changed,
                        unchanged=len(wanted) - len(todo), deleted=len(gone),
                        failed=statuses["skipped"])
    return Ingested(
        counts=counts.as_dict(), rows=totals[1], location=str(checkout),
        preview=figures["not_parsed"], preview_columns=("path", "status", "reason"),
        figures={"code_files": totals[0], "code_symbols": totals[1],
                 "commit_symbols": totals[2],
                 "partial": figures["files_by_status"].get("partial", 0),
                 "skipped": figures["files_by_status"].get("skipped", 0)},
        tables={"files_by_language": figures["files_by_language"],
                "symbols_by_kind": figures["symbols_by_kind"],
                "files_by_status": figures["files_by_status"]},
        seconds=watch.seconds)

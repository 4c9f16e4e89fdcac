"""Which symbols a commit modified: the lines its hunks touch (hunks.py) laid over the
symbols of each changed file as the commit left it, so ``commit_symbols`` can say that a
commit changed ``UserService.create_user`` and the graph can draw MODIFIES from the commit
to that symbol.

A changed line belongs to the innermost symbol whose span holds it (a method, not its
class; the class only for lines of its own, outside its methods); a pure deletion touches
the innermost symbol holding the deletion point (both the line before and the line after
it). Blank lines touch nothing. A file's symbols are the parser's at that blob: the rows
``code_symbols`` holds for a blob still at the head are reused, any other blob is read and
parsed once per run, whatever number of commits left it. A symbol is kept by its
``symbol_id`` (its qualified name), so a commit links to the head's symbol of that path and
id while it exists.
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import duckdb
import polars as pl

from jarvis_core.sources.repo.code.languages import EXTENSIONS
from jarvis_core.sources.repo.code.parse import PARSER_VERSION, parse_file
from jarvis_core.sources.repo.git import read_blobs
from jarvis_core.sources.repo.hunks import FileChange, Hunk, read_hunks
from jarvis_core.sources.repo.settings import CodeSettings
from jarvis_core.sources.repo.sync import matches

BLOB_BATCH = 500  # blobs read from git and parsed at a time
# How lines are laid over symbols; a change finds the newest commits' symbols again.
MODIFIES_VERSION = 1

# A file version: (path, blob sha).
Version = tuple[str, str]


@dataclass(frozen=True)
class Span:
    symbol_id: str
    start_line: int
    end_line: int


class _Spans:
    """A file's symbol spans, for finding the innermost one holding some lines."""

    def __init__(self, spans: Iterable[Span]) -> None:
        # an enclosing span sorts before the spans it holds
        self.spans = sorted(spans, key=lambda s: (s.start_line, -s.end_line))
        self.starts = [span.start_line for span in self.spans]

    def holder(self, first: int, last: int) -> Span | None:
        """The innermost span holding lines ``first`` to ``last``."""
        for at in range(bisect.bisect_right(self.starts, first) - 1, -1, -1):
            if self.spans[at].end_line >= last:
                return self.spans[at]
        return None


@dataclass
class Touch:
    """What one commit did to one symbol: the lines it touched, added and deleted."""

    first: int
    last: int
    additions: int = 0
    deletions: int = 0

    def at(self, line: int) -> None:
        self.first, self.last = min(self.first, line), max(self.last, line)


def touched_symbols(spans: Iterable[Span], hunks: Sequence[Hunk]) -> dict[str, Touch]:
    """The symbols (by symbol_id) the hunks touch, and how."""
    index, touched = _Spans(spans), {}

    def touch(span: Span | None, line: int) -> Touch | None:
        if span is None:
            return None
        found = touched.setdefault(span.symbol_id, Touch(line, line))
        found.at(line)
        return found

    for hunk in hunks:
        for line in hunk.added:
            found = touch(index.holder(line, line), line)
            if found is not None:
                found.additions += 1
        if hunk.deleted:
            point = (index.holder(hunk.start, hunk.start) if hunk.new_count
                     else index.holder(hunk.start, hunk.start + 1))
            found = touch(point, max(hunk.start, 1))
            if found is not None:
                found.deletions += hunk.deleted
    return touched


def symbol_settings(limits: CodeSettings) -> str:
    """What the symbols commits modified are found with: the parser, the code settings and
    this module's version (empty when the code is not read: no commit has symbols)."""
    if not limits.enabled:
        return ""
    return json.dumps([MODIFIES_VERSION, PARSER_VERSION, limits.model_dump(mode="json")],
                      sort_keys=True)


def stored_spans(conn: duckdb.DuckDBPyConnection, source: str, versions: Iterable[Version],
                 code_settings: str) -> dict[Version, list[Span]]:
    """The spans the code tables hold for those of ``versions`` still at the head (a file
    the code layer skipped has none), when the code layer last ran with ``code_settings``
    (its parser and settings are the ones in use)."""
    wanted = pl.DataFrame(sorted(versions), schema={"path": pl.Utf8, "blob_sha": pl.Utf8},
                          orient="row")
    conn.register("jarvis_versions", wanted.to_arrow())
    try:
        rows = conn.execute("""
            SELECT f.path, f.blob_sha, s.symbol_id, s.start_line, s.end_line
            FROM code_files f JOIN jarvis_versions v USING (path, blob_sha)
            JOIN code_state c ON c.source = f.source AND c.settings = $2
            LEFT JOIN code_symbols s ON s.source = f.source AND s.path = f.path
            WHERE f.source = $1""", [source, code_settings]).fetchall()
    finally:
        conn.unregister("jarvis_versions")
    found: dict[Version, list[Span]] = {}
    for path, blob, symbol_id, start, end in rows:
        spans = found.setdefault((path, blob), [])
        if symbol_id is not None:
            spans.append(Span(symbol_id, start, end))
    return found


def code_pathspecs(limits: CodeSettings) -> list[str]:
    """Git pathspecs of the files the parser reads, vendored and built ones left out so
    their diffs are not even produced. Git's globs match no more than ``matches`` does, so
    the files are filtered again after; a pattern git would refuse (outside the repository)
    or read as every file (empty) is left to that filter."""
    return [*(f":(glob,icase)**/*{suffix}" for suffix in sorted(EXTENSIONS)),
            *(f":(glob,exclude){pattern}" for pattern in limits.exclude
              if pattern and not pattern.startswith(("/", ":"))
              and ".." not in pattern.split("/"))]


def parsed_spans(checkout: Path, versions: Iterable[Version], limits: CodeSettings
                 ) -> dict[Version, list[Span]]:
    """The symbol spans of each file version, read from git and parsed in batches; a blob
    git cannot read, or a file the parser skips, has none."""
    wanted, found = sorted(versions), {}
    for begin in range(0, len(wanted), BLOB_BATCH):
        batch = wanted[begin:begin + BLOB_BATCH]
        blobs = read_blobs(checkout, (blob for _, blob in batch))
        for path, blob in batch:
            data = blobs.get(blob)
            parsed = parse_file(path, data, limits) if isinstance(data, bytes) else None
            found[path, blob] = [Span(s.symbol_id, s.start_line, s.end_line)
                                 for s in (parsed.symbols if parsed else ())]
    return found


def modified_symbols(checkout: Path, source: str, shas: Sequence[str], limits: CodeSettings,
                     exclude: Sequence[str],
                     stored: Callable[[set[Version]], dict[Version, list[Span]]]
                     ) -> tuple[list[dict], list[tuple[str, str]]]:
    """The ``commit_symbols`` rows of the commits ``shas`` and the commits git could not
    diff (sha, reason). ``stored`` gives the spans the code tables already hold for some of
    the file versions (those at the head); the others are parsed."""
    if not shas or not limits.enabled:
        return [], []
    changes, failures = read_hunks(checkout, shas, code_pathspecs(limits))
    changes = {sha: [change for change in files
                     if not matches(change.path, (*exclude, *limits.exclude))]
               for sha, files in changes.items()}
    versions = {(change.path, change.blob_sha) for files in changes.values()
                for change in files}
    spans = stored(versions)
    spans |= parsed_spans(checkout, versions - spans.keys(), limits)
    return commit_symbol_rows(source, changes, spans), failures


def commit_symbol_rows(source: str, changes: dict[str, list[FileChange]],
                       spans: dict[Version, list[Span]]) -> list[dict]:
    rows = []
    for sha, files in changes.items():
        for change in files:
            touched = touched_symbols(spans.get((change.path, change.blob_sha), ()),
                                      change.hunks)
            rows += [{"source": source, "sha": sha, "path": change.path,
                      "symbol_id": symbol_id, "start_line": touch.first,
                      "end_line": touch.last, "additions": touch.additions,
                      "deletions": touch.deletions}
                     for symbol_id, touch in sorted(touched.items())]
    return rows

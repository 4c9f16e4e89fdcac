"""Scored chunk ids joined with the published chunk rows: what every search answers with."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from jarvis_query.snapshot import Snapshot

SNIPPET_CHARS = 300


@dataclass(frozen=True)
class SearchResult:
    path: str
    vault: str
    heading: str
    score: float
    snippet: str
    title: str
    chunk_id: str
    source_type: str

    def as_dict(self) -> dict:
        return asdict(self)


class SearchResults(list):
    """Search results, best first, with how far the embeddings of the version that answered
    were (``embeddings``: complete, done, total, message; see Snapshot.embeddings): a list,
    so callers that only want the results iterate it as before."""

    def __init__(self, results: list, embeddings: dict) -> None:
        super().__init__(results)
        self.embeddings = embeddings


def sql_strings(values: list[str]) -> str:
    """Strings as a list of SQL literals for an IN list (quotes doubled, the SQL escape).
    Inlined rather than bound: DuckDB's Python binding tries ``import pandas`` for every
    bound parameter, and without pandas each failed import rescans sys.path (~1 ms); an IN
    list of literals also uses the chunk_id index (10 ids: 8.4 ms bound, 1.0 ms inlined)."""
    return ", ".join("'" + value.replace("'", "''") + "'" for value in values)


def snippet(text: str, limit: int = SNIPPET_CHARS) -> str:
    """The start of a chunk on one line, cut at a word boundary."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    return flat[:limit].rsplit(" ", 1)[0] + " …"


def chunk_results(snapshot: Snapshot, scored: list[tuple[str, float]]) -> list[SearchResult]:
    """Join scored chunk ids with the snapshot's chunk rows, keeping the given order."""
    if not scored:
        return []
    rows = snapshot.cursor().execute(
        "SELECT chunk_id, path, source, heading_path, text, title, source_type FROM chunks "
        f"WHERE chunk_id IN ({sql_strings([chunk_id for chunk_id, _ in scored])})").fetchall()
    by_id = {row[0]: row for row in rows}
    results = []
    for chunk_id, score in scored:
        row = by_id.get(chunk_id)
        if row is None:  # a vector newer than the published tables (server mode only)
            continue
        _, path, source, heading_path, text, title, source_type = row
        results.append(SearchResult(
            path=path, vault=source, heading=heading_path[-1] if heading_path else "",
            score=round(float(score), 4), snippet=snippet(text), title=title,
            chunk_id=chunk_id, source_type=source_type))
    return results


def openings(snapshot: Snapshot, doc_keys: list[str]) -> dict[str, tuple[str, str]]:
    """doc key -> (chunk id, text) of each document's first chunk."""
    if not doc_keys:
        return {}
    rows = snapshot.cursor().execute(
        "SELECT doc_key, arg_min(chunk_id, position), arg_min(text, position) FROM chunks "
        f"WHERE doc_key IN ({sql_strings(doc_keys)}) GROUP BY doc_key").fetchall()
    return {doc_key: (chunk_id, text) for doc_key, chunk_id, text in rows}

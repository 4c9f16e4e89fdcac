"""Turning source documents into chunks incrementally, the same way for every source kind.

A document is re-chunked only when its text (hash) or the chunking configuration
changed; chunk ids are stable, so the layers below can tell kept chunks from new ones.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import duckdb
import polars as pl

from jarvis_core import progress
from jarvis_core.sources.kind import DOCUMENT_COLUMNS, SourceKind
from jarvis_core.sources.plan import ItemCounts
from jarvis_core.stores import tables
from jarvis_core.stores.transaction import transaction
from jarvis_core.text.chunking import chunk_document
from jarvis_core.text.code_chunking import chunk_code
from jarvis_core.text.tokens import TokenCounter

CHUNKER_VERSION = 2  # 2: a heading with nothing under it joins the section after it
PROGRESS_EVERY = 100  # documents between progress reports

@dataclass(frozen=True)
class Document:
    """The source-independent view of anything that gets chunked."""

    source: str
    source_type: str
    doc_key: str
    path: str
    title: str
    text: str
    doc_hash: str


def chunk_config_id(model: str, max_tokens: int, overlap_tokens: int) -> str:
    """Identifies everything that shapes chunks; a change re-chunks every document."""
    spec = f"v{CHUNKER_VERSION}|{model}|{max_tokens}|{overlap_tokens}"
    return hashlib.sha256(spec.encode()).hexdigest()[:16]


@dataclass
class ChunkPlan:
    source: str
    chunk_rows: list[dict] = field(default_factory=list)
    document_rows: list[dict] = field(default_factory=list)
    removed_paths: set[str] = field(default_factory=set)
    new: int = 0
    changed: int = 0
    unchanged: int = 0
    deleted: int = 0
    failed: list[tuple[str, str]] = field(default_factory=list)
    chunks_added: int = 0
    chunks_removed: int = 0
    chunks_kept: int = 0

    def counts(self) -> dict[str, int]:
        return ItemCounts(self.new, self.changed, self.unchanged, self.deleted,
                          len(self.failed)).as_dict() | {
            "chunks_added": self.chunks_added, "chunks_removed": self.chunks_removed,
            "chunks_kept": self.chunks_kept}


def stale_documents(current: pl.DataFrame, chunked: pl.DataFrame, config_id: str) -> tuple[
        list[str], list[str], list[str], int]:
    """Split documents into (new, changed, deleted) paths and an unchanged count. A document
    whose key moved (tickets took their source into it) is changed: its chunk ids hash it.

    ``current`` has path, doc_key, doc_hash; ``chunked`` has path, doc_key, doc_hash,
    chunk_config.
    """
    done = {r["path"]: (r["doc_key"], r["doc_hash"], r["chunk_config"])
            for r in chunked.iter_rows(named=True)}
    new, changed, unchanged = [], [], 0
    for row in current.iter_rows(named=True):
        previous = done.get(row["path"])
        if previous is None:
            new.append(row["path"])
        elif previous != (row["doc_key"], row["doc_hash"], config_id):
            changed.append(row["path"])
        else:
            unchanged += 1
    present = set(current["path"].to_list())
    deleted = [path for path in done if path not in present]
    return new, changed, deleted, unchanged


def plan_chunks(source: str, stale: StaleDocuments, counter: TokenCounter,
                overlap_tokens: int, config_id: str) -> ChunkPlan:
    """Chunk the new and changed documents and account for what was kept."""
    documents, new_paths, deleted = stale.documents, stale.new, stale.deleted
    existing_ids = stale.existing_ids
    plan = ChunkPlan(source=source, unchanged=stale.unchanged, deleted=len(deleted))
    plan.removed_paths.update(deleted)
    plan.chunks_removed += sum(len(existing_ids.get(path, ())) for path in deleted)
    for count, doc in enumerate(documents):
        if count % PROGRESS_EVERY == 0:
            progress.report(source, "chunks", count, len(documents))
        try:
            if doc.source_type in stale.code_types:
                chunks = chunk_code(doc.text, title=doc.title, path=doc.path,
                                    doc_key=doc.doc_key, counter=counter)
            else:
                chunks = chunk_document(doc.text, title=doc.title, doc_key=doc.doc_key,
                                        counter=counter, overlap_tokens=overlap_tokens)
        except Exception as exc:  # one bad document must not cost the others
            plan.failed.append((doc.path, f"{type(exc).__name__}: {exc}"))
            plan.removed_paths.add(doc.path)
            continue
        if doc.path in new_paths:
            plan.new += 1
        else:
            plan.changed += 1
        plan.removed_paths.add(doc.path)
        before = existing_ids.get(doc.path, set())
        after = {chunk.chunk_id for chunk in chunks}
        plan.chunks_kept += len(before & after)
        plan.chunks_added += len(after - before)
        plan.chunks_removed += len(before - after)
        plan.document_rows.append({
            "source": source, "doc_key": doc.doc_key, "path": doc.path,
            "doc_hash": doc.doc_hash, "chunk_config": config_id, "chunk_count": len(chunks)})
        plan.chunk_rows.extend({
            "chunk_id": chunk.chunk_id, "source": source, "source_type": doc.source_type,
            "doc_key": doc.doc_key, "path": doc.path, "title": doc.title,
            "position": chunk.position, "heading_path": list(chunk.heading_path),
            "context": chunk.context, "text": chunk.text, "token_count": chunk.token_count,
            "char_start": chunk.char_start, "char_end": chunk.char_end,
            "doc_hash": doc.doc_hash,
        } for chunk in chunks)
    progress.report(source, "chunks", len(documents), len(documents))
    return plan


@dataclass(frozen=True)
class StaleDocuments:
    """A source's documents that need chunking, and the bookkeeping of the rest."""

    documents: list[Document]           # new and changed, with their text
    new: set[str]
    deleted: list[str]
    unchanged: int
    existing_ids: dict[str, set[str]]   # path -> chunk ids stored now
    code_types: frozenset[str] = frozenset()  # source types whose text is code


def documents_sql(kind: SourceKind | None) -> str:
    """Every document of a source of ``kind`` ($1 is the source), with its text: the union of
    the kind's document selects; none for a source no longer configured."""
    if kind is None:
        return ("SELECT " + ", ".join(f"NULL AS {column}" for column in DOCUMENT_COLUMNS)
                + " WHERE $1 IS NULL")
    return "\nUNION ALL\n".join(document.select for document in kind.documents)


def write_documents(conn: duckdb.DuckDBPyConnection, source: str, kind: SourceKind | None
                    ) -> None:
    """The source's rows of the ``documents`` table, made again from its kind's selects
    (their text left out): cheap, and never stale when a date or label moves without the
    text."""
    with transaction(conn):
        conn.execute("DELETE FROM documents WHERE source = ?", [source])
        conn.execute("INSERT INTO documents BY NAME SELECT * EXCLUDE (text) "
                     f"FROM ({documents_sql(kind)})", [source])


def read_stale_documents(conn: duckdb.DuckDBPyConnection, source: str, kind: SourceKind | None,
                         config_id: str) -> StaleDocuments:
    """Compare the source's documents (written to ``documents`` first) with what was
    chunked, reading the text of only the new and changed ones."""
    write_documents(conn, source, kind)
    current = tables.read_frame(
        conn, "SELECT path, doc_key, doc_hash FROM documents WHERE source = ?", [source])
    chunked = tables.read_frame(conn, "SELECT path, doc_key, doc_hash, chunk_config "
                                      "FROM chunked_documents WHERE source = ?", [source])
    new, changed, deleted, unchanged = stale_documents(current, chunked, config_id)
    documents = [Document(**row) for row in tables.read_frame(
        conn, "SELECT source, source_type, doc_key, path, title, text, doc_hash "
              f"FROM ({documents_sql(kind)}) WHERE list_contains($2, path)",
        [source, new + changed]).iter_rows(named=True)]
    existing_ids: dict[str, set[str]] = {}
    for path, chunk_id in conn.execute("SELECT path, chunk_id FROM chunks WHERE source = ?",
                                       [source]).fetchall():
        existing_ids.setdefault(path, set()).add(chunk_id)
    code_types = frozenset(document.name for document in (kind.documents if kind else ())
                           if document.code)
    return StaleDocuments(documents, set(new), deleted, unchanged, existing_ids, code_types)


def write_chunks(conn: duckdb.DuckDBPyConnection, plan: ChunkPlan) -> tuple[int, int]:
    """Replace the chunks of the documents the plan touched; (chunks stored, most tokens in
    one chunk) after it."""
    for table, rows in ((tables.CHUNKS, plan.chunk_rows),
                        (tables.CHUNKED_DOCUMENTS, plan.document_rows)):
        tables.replace_rows(conn, table, source=plan.source, remove_paths=plan.removed_paths,
                            rows=rows)
    return conn.execute("SELECT count(*), coalesce(max(token_count), 0) FROM chunks "
                        "WHERE source = ?", [plan.source]).fetchone()

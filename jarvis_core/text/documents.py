"""Turning source documents into chunks incrementally, the same way for every source kind.

A document is re-chunked only when its text (hash) or the chunking configuration
changed; chunk ids are stable, so the layers below can tell kept chunks from new ones.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field

import duckdb

from jarvis_core import progress
from jarvis_core.sources.kind import DOCUMENT_COLUMNS, SourceKind
from jarvis_core.sources.plan import PREVIEW_ROWS, ItemCounts
from jarvis_core.stores import tables
from jarvis_core.stores.tables import Connect
from jarvis_core.stores.transaction import transaction
from jarvis_core.stores.vectors.base import embedding_text
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

    def add(self, batch: ChunkPlan) -> None:
        """Count a batch's documents and chunks into this run's."""
        self.new += batch.new
        self.changed += batch.changed
        self.failed += batch.failed
        self.chunks_added += batch.chunks_added
        self.chunks_removed += batch.chunks_removed
        self.chunks_kept += batch.chunks_kept

    def counts(self) -> dict[str, int]:
        return ItemCounts(self.new, self.changed, self.unchanged, self.deleted,
                          len(self.failed)).as_dict() | {
            "chunks_added": self.chunks_added, "chunks_removed": self.chunks_removed,
            "chunks_kept": self.chunks_kept}


def plan_chunks(source: str, batch: DocumentBatch, counter: TokenCounter,
                overlap_tokens: int, config_id: str) -> ChunkPlan:
    """Chunk a batch of new and changed documents and account for what was kept."""
    documents, new_paths, existing_ids = batch.documents, batch.new, batch.existing_ids
    plan = ChunkPlan(source=source)
    for count, doc in enumerate(documents):
        if count % PROGRESS_EVERY == 0:
            progress.report(source, "chunks", batch.done + count, batch.total)
        try:
            if doc.source_type in batch.code_types:
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
            "doc_hash": doc.doc_hash, "chunk_config": config_id, "chunk_count": len(chunks),
            "tokens_checked": False})
        plan.chunk_rows.extend({
            "chunk_id": chunk.chunk_id, "source": source, "source_type": doc.source_type,
            "doc_key": doc.doc_key, "path": doc.path, "title": doc.title,
            "position": chunk.position, "heading_path": list(chunk.heading_path),
            "context": chunk.context, "text": chunk.text, "token_count": chunk.token_count,
            "char_start": chunk.char_start, "char_end": chunk.char_end,
            "doc_hash": doc.doc_hash,
        } for chunk in chunks)
    return plan


@dataclass(frozen=True)
class StaleDocuments:
    """A source's documents by what chunking has to do with them (paths)."""

    new: list[str]
    changed: list[str]
    deleted: list[str]
    unchanged: int


@dataclass(frozen=True)
class DocumentBatch:
    """New and changed documents with their text, read a batch at a time."""

    documents: list[Document]
    new: set[str]
    existing_ids: dict[str, set[str]]   # path -> chunk ids stored now
    code_types: frozenset[str]          # source types whose text is code
    done: int                           # documents of the run's earlier batches
    total: int                          # documents the run chunks


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


def find_stale_documents(conn: duckdb.DuckDBPyConnection, source: str,
                         kind: SourceKind | None, config_id: str) -> StaleDocuments:
    """Compare the source's documents (written to ``documents`` first) with what was
    chunked. A document whose key moved (tickets took their source into it) is changed:
    its chunk ids hash it."""
    write_documents(conn, source, kind)
    stale = conn.execute("""
        SELECT d.path, c.path IS NULL AS new FROM documents d
        LEFT JOIN chunked_documents c ON c.source = d.source AND c.path = d.path
        WHERE d.source = $1 AND (c.path IS NULL OR c.doc_key IS DISTINCT FROM d.doc_key
            OR c.doc_hash IS DISTINCT FROM d.doc_hash OR c.chunk_config IS DISTINCT FROM $2)
        ORDER BY d.path""", [source, config_id]).fetchall()
    deleted = [path for (path,) in conn.execute("""
        SELECT c.path FROM chunked_documents c WHERE c.source = $1 AND NOT EXISTS (
            SELECT 1 FROM documents d WHERE d.source = c.source AND d.path = c.path)
        ORDER BY c.path""", [source]).fetchall()]
    current, = conn.execute("SELECT count(*) FROM documents WHERE source = ?",
                            [source]).fetchone()
    return StaleDocuments([path for path, new in stale if new],
                          [path for path, new in stale if not new], deleted,
                          current - len(stale))


def read_batch(conn: duckdb.DuckDBPyConnection, source: str, kind: SourceKind | None,
               paths: list[str], new: set[str], done: int, total: int) -> DocumentBatch:
    """The documents at ``paths`` with their text, and the chunk ids they have now."""
    documents = [Document(*row) for row in conn.execute(
        "SELECT source, source_type, doc_key, path, title, text, doc_hash "
        f"FROM ({documents_sql(kind)}) WHERE path IN (SELECT unnest($2::VARCHAR[])) "
        "ORDER BY path", [source, paths]).fetchall()]
    existing_ids: dict[str, set[str]] = {}
    for path, chunk_id in conn.execute(
            "SELECT path, chunk_id FROM chunks WHERE source = $1 AND path IN "
            "(SELECT unnest($2::VARCHAR[]))", [source, paths]).fetchall():
        existing_ids.setdefault(path, set()).add(chunk_id)
    code_types = frozenset(document.name for document in (kind.documents if kind else ())
                           if document.code)
    return DocumentBatch(documents, new & set(paths), existing_ids, code_types, done, total)


def write_chunks(conn: duckdb.DuckDBPyConnection, plan: ChunkPlan) -> None:
    """Replace the chunks of the documents the plan touched."""
    for table, rows in ((tables.CHUNKS, plan.chunk_rows),
                        (tables.CHUNKED_DOCUMENTS, plan.document_rows)):
        tables.replace_rows(conn, table, source=plan.source, remove_paths=plan.removed_paths,
                            rows=rows)


@dataclass
class ChunkRun:
    """What a run of the chunks layer did to one source."""

    counts: dict[str, int]
    failed: list[tuple[str, str]]   # (path, reason)
    preview: list[dict]             # the first batch's chunk rows
    total: int                      # chunks stored after it
    max_tokens: int                 # most tokens in one stored chunk


def chunk_source(connect: Connect, source: str, kind: SourceKind | None,
                 counter: TokenCounter, overlap_tokens: int, config_id: str,
                 batch_documents: int) -> ChunkRun:
    """Chunk the source's new and changed documents ``batch_documents`` at a time (their
    texts and chunks are never all in memory at once), each batch read and written in
    connections of its own, and drop the chunks of deleted ones. A run stopped between
    batches leaves the documents it did not reach stale for the next one."""
    with connect() as conn:
        stale = find_stale_documents(conn, source, kind, config_id)
        removed, = conn.execute(
            "SELECT count(*) FROM chunks WHERE source = $1 AND path IN "
            "(SELECT unnest($2::VARCHAR[]))", [source, stale.deleted]).fetchone()
        write_chunks(conn, ChunkPlan(source, removed_paths=set(stale.deleted)))
    stale_paths, new = stale.new + stale.changed, set(stale.new)
    counts = ChunkPlan(source, unchanged=stale.unchanged, deleted=len(stale.deleted),
                       chunks_removed=removed)
    preview: list[dict] = []
    for start in range(0, len(stale_paths), batch_documents):
        with connect() as conn:
            batch = read_batch(conn, source, kind, stale_paths[start:start + batch_documents],
                               new, start, len(stale_paths))
        plan = plan_chunks(source, batch, counter, overlap_tokens, config_id)
        with connect() as conn:
            write_chunks(conn, plan)
        counts.add(plan)
        preview = preview or plan.chunk_rows[:PREVIEW_ROWS]
    progress.report(source, "chunks", len(stale_paths), len(stale_paths))
    with connect() as conn:
        total, max_tokens = conn.execute(
            "SELECT count(*), coalesce(max(token_count), 0) FROM chunks WHERE source = ?",
            [source]).fetchone()
    return ChunkRun(counts.counts(), counts.failed, preview, total, max_tokens)


@dataclass
class TokenRecount:
    """What ``recount_unchecked_tokens`` found: chunks over the limit, stored counts that
    differ from the tokenizer's, and how many chunks of how many documents it recounted."""

    limit: int
    over: list[dict] = field(default_factory=list)
    miscounted: int = 0
    chunks: int = 0
    documents: int = 0
    largest: int = 0


def recount_unchecked_tokens(connect: Connect, source: str, counter: TokenCounter,
                             page: int) -> TokenRecount:
    """Recount the tokens of the chunks no check has recounted since their document was
    chunked (a document's chunks are recounted once, not at every run: a source's one
    edited note costs one note's recount, not the source's), ``page`` chunks' documents at
    a time, each page read in a connection of its own; documents whose chunks all fit and
    were counted right are marked checked."""
    with connect() as conn:
        pending = conn.execute(
            "SELECT doc_key, chunk_count FROM chunked_documents "
            "WHERE source = $1 AND NOT coalesce(tokens_checked, false) ORDER BY doc_key",
            [source]).fetchall()
    recount = TokenRecount(counter.max_tokens)
    for doc_keys in _pages_of_documents(pending, page):
        with connect() as conn:
            rows = conn.execute(
                "SELECT doc_key, chunk_id, path, context, text, token_count FROM chunks "
                "WHERE source = $1 AND doc_key IN (SELECT unnest($2))",
                [source, doc_keys]).fetchall()
        counted = counter.count([embedding_text(context, text)
                                 for _, _, _, context, text, _ in rows])
        failed: set[str] = set()
        for (doc_key, chunk_id, path, _, _, stored), tokens in zip(rows, counted):
            if tokens > counter.max_tokens:
                recount.over.append({"path": path, "chunk_id": chunk_id, "tokens": tokens})
            recount.miscounted += stored != tokens
            if tokens > counter.max_tokens or stored != tokens:
                failed.add(doc_key)
        recount.chunks += len(rows)
        recount.documents += len(doc_keys)
        recount.largest = max([recount.largest, *counted])
        checked = [key for key in doc_keys if key not in failed]
        with connect() as conn:
            conn.execute("UPDATE chunked_documents SET tokens_checked = true "
                         "WHERE source = $1 AND doc_key IN (SELECT unnest($2))",
                         [source, checked])
    return recount


def _pages_of_documents(documents: list[tuple[str, int]], page: int) -> Iterator[list[str]]:
    """Document keys in groups of about ``page`` chunks (a larger document alone)."""
    keys: list[str] = []
    chunks = 0
    for doc_key, chunk_count in documents:
        if keys and chunks + (chunk_count or 0) > page:
            yield keys
            keys, chunks = [], 0
        keys.append(doc_key)
        chunks += chunk_count or 0
    if keys:
        yield keys

"""The keyword index: BM25 over chunks and over document names, with Tantivy.

Why Tantivy (tantivy-py), measured on SciFact and at 100k chunks (README, "Keyword and
hybrid search"): SQLite FTS5 scores well but computes ``bm25()`` for every matching row, so
an OR query over 100k chunks took 40-100 ms; bm25s queries in ~1 ms but only builds whole
indexes (20+ s at 100k chunks, on every publish). Tantivy is Lucene's design in Rust: BM25
(k1 1.2, b 0.75) with block-max WAND top-k, per-document deletes and adds committed as new
immutable segments, and readers that open a directory without any lock.

Each chunk is one text field, title + heading path + text (Anserini's "flat" BEIR setting),
with Tantivy's analyzer, and a second field holding the identifiers in it, whole and split
into their words (keyword_fields.py); names (titles and paths of documents) are a second,
small index.

The index follows the chunks table per chunk id: a chunk id is a content hash, so a changed
chunk is a new id; vanished ids are deleted and new ids added, the rest is untouched. A
small SQLite ledger beside the index records what is indexed, with a fingerprint of the
indexed fields and metadata (a changed title or tag re-indexes the chunk although its id
stays); its ``user_version`` is the index's FORMAT, and an index of another format is
emptied when opened, so every chunk is indexed once more the new way. Writes and the
serving layer's copy of the committed segments take the index's write turn.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import tantivy

from jarvis_core.stores.chunk_rows import ChunkRows
from jarvis_core.stores.keyword_fields import (
    FORMAT,
    PART_WEIGHT,
    analyzer,
    chunk_body,
    chunk_schema,
    identifier_analyzer,
    identifier_terms,
    name_schema,
    open_index,
    query_identifiers,
    text_fields,
)
from jarvis_core.stores.keyword_filters import filter_queries, preview, utc
from jarvis_core.stores.locks import lock_path, write_turn
from jarvis_core.stores.places import PLACE_FIELDS, heading
from jarvis_core.stores.vectors.filters import VectorFilter

log = logging.getLogger(__name__)
WRITER_HEAP_BYTES = 50_000_000
SNIPPET_CHARS = 240
CHUNKS_DIR, NAMES_DIR, LEDGER_FILE = "chunks", "names", "ledger.sqlite"
_LOCK_FILES = (".tantivy-writer.lock", ".tantivy-meta.lock")

# The columns ``sync_source`` reads (chunk_rows.PAYLOAD_SQL selects all of them).
CHUNK_COLUMNS = ("chunk_id", "source_type", "doc_key", "path", "title", "heading_path", "text",
                 "tags", "modified_at")

_LEDGER = """
CREATE TABLE IF NOT EXISTS chunks (
    chunk_id TEXT PRIMARY KEY, source TEXT NOT NULL, fingerprint TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS chunks_by_source ON chunks(source);
CREATE TABLE IF NOT EXISTS documents (
    source TEXT NOT NULL, doc_key TEXT NOT NULL, fingerprint TEXT NOT NULL,
    PRIMARY KEY (source, doc_key));
"""


def _fingerprint(*parts: object) -> str:
    return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()[:32]


def _name_key(source: str, doc_key: str) -> str:
    return f"{source}\x1f{doc_key}"


@dataclass(frozen=True)
class KeywordSyncReport:
    """Chunks added, re-indexed (same id, changed title, tags or dates), removed, kept."""

    new: int
    changed: int
    deleted: int
    unchanged: int
    documents: int

    def as_dict(self) -> dict:
        return {"new": self.new, "changed": self.changed, "deleted": self.deleted,
                "unchanged": self.unchanged, "documents": self.documents}


@dataclass(frozen=True)
class KeywordHit:
    chunk_id: str
    score: float
    snippet: str = ""
    source: str = ""  # the chunk's place: empty in a version published before FORMAT 3
    doc_key: str = ""
    heading: str = ""


@dataclass(frozen=True)
class NameHit:
    source: str
    doc_key: str
    source_type: str
    path: str
    title: str
    score: float


class KeywordIndex:
    """The pipeline's working index under one directory: chunk and name indexes plus the
    ledger. Opening it is cheap; writes are made first, then written in a turn."""

    def __init__(self, directory: Path, *, busy_timeout: float = 30.0) -> None:
        self.directory = Path(directory)
        self.busy_timeout = busy_timeout
        self.directory.mkdir(parents=True, exist_ok=True)
        self._ledger = sqlite3.connect(self.directory / LEDGER_FILE, timeout=busy_timeout,
                                       isolation_level=None, check_same_thread=False)
        try:
            self._empty_if_outdated()
            self._ledger.executescript(_LEDGER)
            self._chunks = open_index(self.directory / CHUNKS_DIR, chunk_schema(), create=True)
            self._names = open_index(self.directory / NAMES_DIR, name_schema(), create=True)
        except BaseException:
            self._ledger.close()
            raise

    def _empty_if_outdated(self) -> None:
        """An index of another FORMAT (its schema differs) is emptied, ledger and all: the
        next sync of each source, or the healing that finds its sources missing, indexes
        every chunk again."""
        conn = self._ledger
        conn.execute("BEGIN IMMEDIATE")  # one process empties it; the others find it done
        try:
            (made_as,) = conn.execute("PRAGMA user_version").fetchone()
            if made_as != FORMAT:
                if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'chunks'").fetchone():
                    log.warning(f"keyword index {self.directory} is of format {made_as}, not "
                                f"{FORMAT}: emptied, to index every chunk again")
                conn.execute("DROP TABLE IF EXISTS chunks")
                conn.execute("DROP TABLE IF EXISTS documents")
                for name in (CHUNKS_DIR, NAMES_DIR):
                    shutil.rmtree(self.directory / name, ignore_errors=True)
                conn.execute(f"PRAGMA user_version = {FORMAT}")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def close(self) -> None:
        self._ledger.close()

    def __enter__(self) -> KeywordIndex:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _turn(self):
        """The index's write turn across processes (``jarvis_core.stores.locks``)."""
        return write_turn(lock_path(self.directory), f"keyword index {self.directory}")

    @contextmanager
    def _writers(self) -> Iterator[tuple[tantivy.IndexWriter, tantivy.IndexWriter]]:
        """Both writers, taken in a fixed order (in a turn); released when the block ends
        (Tantivy's writer lock guards against writers that take no turn)."""
        deadline = time.monotonic() + self.busy_timeout
        writers: list[tantivy.IndexWriter] = []
        try:
            for index in (self._chunks, self._names):
                while True:
                    try:
                        writers.append(index.writer(WRITER_HEAP_BYTES, 1))
                        break
                    except ValueError as exc:
                        if "LockBusy" not in str(exc) or time.monotonic() > deadline:
                            raise
                        time.sleep(0.1)
            yield writers[0], writers[1]
        finally:
            for writer in writers:
                writer.wait_merging_threads()  # consumes the writer, releasing its lock

    def sync_source(self, source: str, chunks: ChunkRows) -> KeywordSyncReport:
        """Make the index hold exactly ``chunks`` for ``source``: the rows are read a page
        at a time twice (their fingerprints, then the entries to add), never held."""
        prints: dict[str, str] = {}
        documents: dict[str, tuple] = {}  # doc_key -> (source_type, path, title)
        for page in chunks.pages(chunks.ids()):
            for row in page:
                prints[row["chunk_id"]] = _fingerprint(
                    row["source_type"], row["doc_key"], row["path"],
                    chunk_body(row["title"], row["heading_path"], row["text"]),
                    sorted(row["tags"] or []), utc(row["modified_at"]))
                documents.setdefault(row["doc_key"],
                                     (row["source_type"], row["path"], row["title"]))
        doc_prints = {key: _fingerprint(*document) for key, document in documents.items()}
        stored = dict(self._ledger.execute(
            "SELECT chunk_id, fingerprint FROM chunks WHERE source = ?", [source]))
        stored_docs = dict(self._ledger.execute(
            "SELECT doc_key, fingerprint FROM documents WHERE source = ?", [source]))
        stale = [chunk_id for chunk_id, fp in stored.items() if prints.get(chunk_id) != fp]
        fresh = [chunk_id for chunk_id in prints if stored.get(chunk_id) != prints[chunk_id]]
        stale_docs = [key for key, fp in stored_docs.items() if doc_prints.get(key) != fp]
        fresh_docs = [key for key in documents if stored_docs.get(key) != doc_prints[key]]
        if stale or fresh or stale_docs or fresh_docs:
            with self._turn(), self._writers() as (chunk_writer, name_writer):
                # Fresh ids are deleted too: a crash between commit and ledger write leaves
                # them indexed, and a delete applies to documents added before it. A source
                # the ledger holds nothing of is cleared by its name: one delete, where one
                # per chunk was held until the commit (310 MB more at 200k chunks).
                if not stored and not stored_docs:
                    chunk_writer.delete_documents_by_term("source", source)
                    name_writer.delete_documents_by_term("source", source)
                else:
                    for chunk_id in {*stale, *fresh}:
                        chunk_writer.delete_documents_by_term("chunk_id", chunk_id)
                    for key in {*stale_docs, *fresh_docs}:
                        name_writer.delete_documents_by_term("name_key", _name_key(source, key))
                for page in chunks.pages(fresh):
                    for row in page:
                        chunk_writer.add_document(self._chunk_document(source, row))
                for key in fresh_docs:
                    source_type, path, title = documents[key]
                    name_writer.add_document(tantivy.Document(
                        name_key=_name_key(source, key), source=source, doc_key=key,
                        source_type=source_type, title=title or "", path=path))
                chunk_writer.commit()
                name_writer.commit()
                self._record(source, stale, ((c, prints[c]) for c in fresh), stale_docs,
                             ((k, doc_prints[k]) for k in fresh_docs))
        changed = len(set(stale) & set(fresh))
        return KeywordSyncReport(new=len(fresh) - changed, changed=changed,
                                 deleted=len(stale) - changed,
                                 unchanged=len(prints) - len(fresh), documents=len(documents))

    @staticmethod
    def _chunk_document(source: str, row: dict) -> tantivy.Document:
        body = chunk_body(row["title"], row["heading_path"], row["text"])
        document = tantivy.Document(
            chunk_id=row["chunk_id"], source=source, source_type=row["source_type"], body=body,
            identifiers=" ".join(identifier_terms(body)), doc_key=row["doc_key"],
            heading=heading(row["heading_path"]))
        for tag in row["tags"] or []:
            document.add_text("tags", tag)
        modified = utc(row["modified_at"])
        if modified is not None:
            document.add_date("modified_at", modified)
        return document

    def _record(self, source: str, stale: list[str], fresh: Iterable[tuple[str, str]],
                stale_docs: list[str], fresh_docs: Iterable[tuple[str, str]]) -> None:
        """The ledger after a commit: rows streamed in, never listed whole."""
        conn = self._ledger
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.executemany("DELETE FROM chunks WHERE chunk_id = ?", ((c,) for c in stale))
            conn.executemany("INSERT OR REPLACE INTO chunks VALUES (?, ?, ?)",
                             ((c, source, fp) for c, fp in fresh))
            conn.executemany("DELETE FROM documents WHERE source = ? AND doc_key = ?",
                             ((source, k) for k in stale_docs))
            conn.executemany("INSERT OR REPLACE INTO documents VALUES (?, ?, ?)",
                             ((source, k, fp) for k, fp in fresh_docs))
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def chunk_ids(self, source: str) -> set[str]:
        """The chunk ids the ledger says are indexed for ``source``."""
        return {chunk_id for (chunk_id,) in self._ledger.execute(
            "SELECT chunk_id FROM chunks WHERE source = ?", [source])}

    def indexed_count(self, source: str) -> int:
        """Live documents of ``source`` in the Tantivy index itself."""
        self._chunks.reload()
        searcher = self._chunks.searcher()
        query = tantivy.Query.term_query(self._chunks.schema, "source", source)
        return searcher.search(query, 1, count=True).count

    def counts(self) -> dict[str, int]:
        """Indexed chunks per source (from the ledger)."""
        return dict(self._ledger.execute(
            "SELECT source, count(*) FROM chunks GROUP BY source ORDER BY source"))

    def publish_copy(self, dest: Path) -> None:
        """Copy the committed indexes to ``dest`` (which must not exist), holding the writer
        locks so no commit or merge changes the files meanwhile; appears atomically."""
        dest = Path(dest)
        if dest.exists():
            raise FileExistsError(f"publish destination already exists: {dest}")
        staging = dest.with_name(f".{dest.name}.partial")
        ignore = shutil.ignore_patterns(*_LOCK_FILES)
        try:
            with self._turn(), self._writers():
                for name in (CHUNKS_DIR, NAMES_DIR):
                    shutil.copytree(self.directory / name, staging / name, ignore=ignore)
            staging.rename(dest)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise


class KeywordSearcher:
    """A published copy, opened for queries: no lock is taken, any number of processes and
    threads can search it."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self._chunks = open_index(self.directory / CHUNKS_DIR, chunk_schema(), create=False)
        self._names = open_index(self.directory / NAMES_DIR, name_schema(), create=False)
        self._chunk_searcher = self._chunks.searcher()
        self._name_searcher = self._names.searcher()
        self._text_fields = text_fields(self.directory / CHUNKS_DIR)
        self._analyzer = analyzer()
        self._identifier_analyzer = identifier_analyzer()
        self._lock = threading.Lock()  # the analyzers are not shared across threads

    def terms(self, query: str) -> list[str]:
        """The query's words as the body and the names are indexed."""
        with self._lock:
            return list(dict.fromkeys(self._analyzer.analyze(query)))

    def chunk_terms(self, query: str) -> dict[str, float]:
        """The query's words and the names and parts of its identifiers (keyword_fields.py),
        each with its weight: an identifier's parts count PART_WEIGHT, so its whole match
        ranks above its words found apart."""
        names, parts = query_identifiers(query)
        with self._lock:
            weights = dict.fromkeys(self._analyzer.analyze(query), 1.0)
            weights |= dict.fromkeys(self._identifier_analyzer.analyze(" ".join(parts)),
                                     PART_WEIGHT)
            return weights | dict.fromkeys(
                self._identifier_analyzer.analyze(" ".join(names)), 1.0)

    def _any_term(self, schema: tantivy.Schema, fields: Mapping[str, float],
                  terms: Mapping[str, float]) -> tantivy.Query:
        """Any of ``terms`` in any of ``fields``, each match's score times the weights of
        its term and its field."""
        matches = []
        for term, term_weight in terms.items():
            for field, field_weight in fields.items():
                match = tantivy.Query.term_query(schema, field, term)
                weight = term_weight * field_weight
                matches.append(match if weight == 1.0 else
                               tantivy.Query.boost_query(match, weight))
        return tantivy.Query.boolean_query([(tantivy.Occur.Should, m) for m in matches])

    def search(self, query: str, limit: int = 10, filters: VectorFilter | None = None,
               snippets: bool = False) -> list[KeywordHit]:
        """Chunks holding any of the query's terms, best BM25 score first (ties by chunk
        id); ``snippets`` adds a preview with the matched words in bold. Filters mean what
        they mean for the vector store (an empty list matches nothing)."""
        terms = self.chunk_terms(query)
        schema = self._chunks.schema
        conditions = filter_queries(schema, filters)
        if not terms or conditions is None:
            return []
        text_query = self._any_term(schema, self._text_fields, terms)
        full = tantivy.Query.boolean_query(
            [(tantivy.Occur.Must, text_query)]
            + [(tantivy.Occur.Must, tantivy.Query.const_score_query(c, 0.0))
               for c in conditions]) if conditions else text_query
        searcher = self._chunk_searcher
        generator = None
        if snippets:
            generator = tantivy.SnippetGenerator.create(searcher, text_query, schema, "body")
            generator.set_max_num_chars(SNIPPET_CHARS)
        hits = []
        for score, address in searcher.search(full, limit, count=False).hits:
            document = searcher.doc(address)
            snippet = preview(generator, document["body"][0]) if generator else ""
            hits.append(KeywordHit(document["chunk_id"][0], float(score), snippet,
                                   *(document.get_first(field) or "" for field in PLACE_FIELDS)))
        return sorted(hits, key=lambda hit: (-hit.score, hit.chunk_id))

    def search_names(self, query: str, limit: int = 10,
                     sources: Sequence[str] | None = None) -> list[NameHit]:
        """Documents whose title or path holds any of the query's terms, best first."""
        terms = self.terms(query)
        if not terms or (sources is not None and not sources):
            return []
        schema = self._names.schema
        name_query = self._any_term(schema, {"title": 1.0, "path": 1.0},
                                    dict.fromkeys(terms, 1.0))
        if sources is not None:
            name_query = tantivy.Query.boolean_query([
                (tantivy.Occur.Must, name_query),
                (tantivy.Occur.Must, tantivy.Query.const_score_query(
                    tantivy.Query.term_set_query(schema, "source", list(sources)), 0.0))])
        searcher = self._name_searcher
        hits = []
        for score, address in searcher.search(name_query, limit, count=False).hits:
            document = searcher.doc(address)
            hits.append(NameHit(*(document[f][0] for f in ("source", "doc_key", "source_type",
                                                           "path", "title")), float(score)))
        return sorted(hits, key=lambda hit: (-hit.score, hit.path))

"""Identifier retrieval: the documents a query names outright, which every search puts first.

A query that is, or holds, an exact name of a stored item asks for that item: a ticket key
('LUM-4', any case), a GitHub issue ('owner/repo#12' or 'repo#12'), a commit hash or a
prefix of at least 7 hex digits, a Message-ID (with or without its angle brackets), a
Confluence page id; and, as the whole query, a note's or page's title or a document's path.
Those shapes are looked for in the query (``query_names``); the published
``document_names`` table (every document's lower-cased names from its kind's DocumentType,
its path, and an issue ref without its owner, one a row: jarvis_core/stores/serving.py)
says which of them name a document. Titles count only as the whole query: a word of a question that
happens to be a note's title does not name that note.

The lookup reads the snapshot's ``document_names`` and ``documents`` views, so a profile's
snapshot finds only its own sources' items (jarvis_query/scoped.py), and it keeps to the
search's filters. A search that names nothing pays one comparison of a column of strings.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from jarvis_core.stores.serving import DOCUMENT_NAMES
from jarvis_core.stores.vectors.filters import VectorFilter, filter_conditions
from jarvis_query.results import Hit, sql_strings
from jarvis_query.retrievers.base import Retriever
from jarvis_query.retrievers.grouping import CHUNK, DOCUMENT, places
from jarvis_query.snapshot import Snapshot

_EDGES = "\"'`()[]{},;:!?<>"  # what prose puts around a word; a final '.' ends a sentence
_TICKET_KEY = re.compile(r"[a-z][a-z0-9_]*-\d+")
_ISSUE_REF = re.compile(r"(?:[\w.-]+/)?([\w.-]+#\d+)")
_MESSAGE_ID = re.compile(r"[^\s<>@]+@[^\s<>@]+")
_HASH_PREFIX = re.compile(r"[0-9a-f]{7,64}")
_NUMBER = re.compile(r"\d+")
_FULL_HASH = "[0-9a-f]{40}|[0-9a-f]{64}"  # a commit's name: SHA-1, or SHA-256 repositories
MAX_NAMED = 10  # documents one query can name (a title several notes share)


@dataclass(frozen=True)
class QueryNames:
    """What in a query may name a document, lower-cased: ``exact`` names (a document's name,
    its path, or its source and path), and hash ``prefixes`` (of a commit's full hash)."""

    exact: frozenset[str] = frozenset()
    prefixes: frozenset[str] = frozenset()

    def found_by(self, name: str) -> str:
        """The name of these that a document's ``name`` answers to."""
        return next((prefix for prefix in sorted(self.prefixes) if name.startswith(prefix)),
                    name)


def query_names(query: str) -> QueryNames:
    """The identifiers ``query`` holds and, whole, the title or path it may be (a path with
    or without its '.md')."""
    whole = query.strip().strip(_EDGES).strip().lower()
    exact, prefixes = {whole, f"{whole}.md"}, set()
    for word in query.lower().split():
        token = word.strip(_EDGES).removesuffix(".").strip(_EDGES)
        if _TICKET_KEY.fullmatch(token) or _MESSAGE_ID.fullmatch(token) \
                or _NUMBER.fullmatch(token) or token.endswith(".md"):
            exact.add(token)
        if ref := _ISSUE_REF.fullmatch(token):
            exact |= {token, ref.group(1)}
        if _HASH_PREFIX.fullmatch(token):
            prefixes.add(token)
    return QueryNames(frozenset(exact - {"", ".md"}), frozenset(prefixes))


def _named(names: QueryNames) -> str:
    """SQL over a ``document_names`` row: ``names`` hold its name, or a prefix of it when it
    is a commit's full hash. Plain comparisons of one column: no list function per row."""
    conditions = [f"name IN ({sql_strings(sorted(names.exact))})"]
    conditions += [f"(name >= {sql_strings([prefix])} AND name < {sql_strings([prefix + '~'])} "
                   f"AND regexp_full_match(name, '{_FULL_HASH}'))"
                   for prefix in sorted(names.prefixes)]
    return " OR ".join(conditions)


def _naive_utc(moment: datetime) -> str:
    """A bound as the published tables hold times: naive UTC (a naive bound is UTC)."""
    aware = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    return aware.astimezone(UTC).replace(tzinfo=None).isoformat(sep=" ")


def _passing(filters: VectorFilter | None) -> str | None:
    """SQL over a ``documents`` row: it passes ``filters`` as a search's chunks would; None
    when nothing can (an empty list)."""
    if filter_conditions(filters) is None:
        return None
    if filters is None:
        return "true"
    sql = ["true"]
    for column, values in (("source", filters.sources), ("source_type", filters.source_types)):
        if values is not None:
            sql.append(f"{column} IN ({sql_strings(values)})")
    if filters.tags_any is not None:
        sql.append(f"list_has_any(tags, [{sql_strings(filters.tags_any)}]::VARCHAR[])")
    if filters.modified_from is not None:
        sql.append(f"modified_at >= '{_naive_utc(filters.modified_from)}'")
    if filters.modified_to is not None:
        sql.append(f"modified_at <= '{_naive_utc(filters.modified_to)}'")
    return " AND ".join(sql)


class IdentifierRetriever:
    def retrieve(self, snapshot: Snapshot, query: str, limit: int = MAX_NAMED,
                 filters: VectorFilter | None = None) -> list[Hit]:
        """The documents ``query`` names that pass ``filters``, by source and key, at most
        ``limit``: each a hit on its opening chunk with its place and the name it answers to
        (``identifier``), scored 0 (``first`` scores it)."""
        names = query_names(query)
        passing = _passing(snapshot.restrict(filters))
        tables = snapshot.table_names()
        if not names.exact or passing is None or "documents" not in tables:
            return []
        # a version published before document_names: the same rows, made from its documents
        listed = "document_names" if "document_names" in tables else f"({DOCUMENT_NAMES})"
        cursor = snapshot.cursor()
        named = cursor.execute(f"SELECT source, doc_key, min(name) FROM {listed} "
                               f"WHERE {_named(names)} GROUP BY source, doc_key").fetchall()
        if not named:
            return []
        answers = {(source, doc_key): name for source, doc_key, name in named}
        keys = sql_strings(sorted({doc_key for _, doc_key, _ in named}))
        rows = cursor.execute(
            "SELECT source, doc_key, source_type, path, title FROM documents "
            f"WHERE doc_key IN ({keys}) AND {passing} ORDER BY source, doc_key").fetchall()
        rows = [row for row in rows if (row[0], row[1]) in answers][:limit]
        # the opening chunks, through the doc key index
        openings = {(source, doc_key): chunk_id for source, doc_key, chunk_id in cursor.execute(
            "SELECT source, doc_key, arg_min(chunk_id, position) FROM chunks "
            f"WHERE doc_key IN ({keys}) GROUP BY source, doc_key").fetchall()}
        return [Hit(chunk_id=openings[source, doc_key], score=0.0, vault=source,
                    doc_key=doc_key, source_type=source_type, path=path, title=title,
                    identifier=names.found_by(answers[source, doc_key]))
                for source, doc_key, source_type, path, title in rows
                if (source, doc_key) in openings]

    def first(self, snapshot: Snapshot, query: str, hits: list[Hit],
              filters: VectorFilter | None = None, group: str = CHUNK) -> list[Hit]:
        """``hits`` (chunks, or documents when ``group`` is "document", best first) led by
        the documents ``query`` names: each one's best hit among them, else its opening
        chunk (a document with no matching chunk). A named document scores as the best hit
        (1.0 when there is none); a found one keeps its legs' ranks and scores."""
        named = self.retrieve(snapshot, query, filters=filters)
        if not named:
            return hits
        found = places(snapshot, hits)
        documents = [(found[hit.chunk_id].source, found[hit.chunk_id].doc_key)
                     if hit.chunk_id in found else (hit.vault, hit.doc_key) for hit in hits]
        best = max((hit.score for hit in hits), default=1.0)
        leading, taken = [], set()
        for name in named:
            at = next((i for i, document in enumerate(documents)
                       if document == (name.vault, name.doc_key)), None)
            if at is None:
                unmatched = {"chunks": 0, "headings": ()} if group == DOCUMENT else {}
                leading.append(replace(name, score=best, **unmatched,
                                       fusion=hits[0].fusion if hits else None))
                continue
            taken.add(at)
            leading.append(replace(hits[at], score=max(best, hits[at].score),
                                   identifier=name.identifier))
        return leading + [hit for i, hit in enumerate(hits) if i not in taken]


class IdentifiersFirst:
    """A retriever whose hits start with the documents the query names (``first``): what
    GraphRAG searches with, so that a named item is its first seed."""

    def __init__(self, inner: Retriever, identifiers: IdentifierRetriever) -> None:
        self.inner = inner
        self.identifiers = identifiers

    def retrieve(self, snapshot: Snapshot, query: str, limit: int,
                 filters: VectorFilter | None = None) -> list[Hit]:
        hits = self.inner.retrieve(snapshot, query, limit, filters)
        return self.identifiers.first(snapshot, query, hits, filters)[:limit]

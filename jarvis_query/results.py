"""The one search hit of the query side, from retriever to renderer (as LlamaIndex's
NodeWithScore is): a retriever makes it with what it knows, ``published`` fills in the rest
from the published chunk rows, the CLI and the MCP tools render it, and its JSON
(``Hit.as_dict``) is the MCP tools' search hit, whose schema derives from its fields
(jarvis_query/mcp_schemas.py)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from jarvis_core.stores.places import heading

if TYPE_CHECKING:
    from jarvis_query.snapshot import Snapshot

SNIPPET_CHARS = 300
SCORE_DIGITS = 4
# The fields of every hit's JSON, in order; then a keyword hit's ``match``, a fused hit's
# legs, a document hit's matching chunks and an identified hit's identifier, present only on
# hits of those kinds.
SHOWN = ("path", "vault", "heading", "score", "snippet", "title", "chunk_id", "source_type")
FUSED = ("fusion", "keyword_rank", "keyword_score", "semantic_rank", "semantic_score")
GROUPED = ("chunks", "headings")
OPTIONAL = ("match", *FUSED, *GROUPED, "identifier")


@dataclass(frozen=True, kw_only=True)
class Hit:
    """A chunk, or a document, that a search found.

    Retrievers set the score and what they know: the chunk id (dense, keyword), the preview
    with the matched words in bold (keyword content search), the document (name search), each
    leg's rank and score (hybrid search: None where that leg did not find it), the number of
    a document's matching chunks and their headings (a document hit: its chunk is the best
    one, jarvis_query/retrievers/grouping.py), the name a query gave the document
    (jarvis_query/retrievers/identifiers.py). ``published`` sets where the chunk is (path,
    vault, heading, title, source type) and its snippet."""

    path: str = ""
    vault: str = ""
    heading: str = ""
    score: float
    snippet: str = ""
    title: str = ""
    chunk_id: str = ""
    source_type: str = ""
    match: str | None = None            # keyword search: "name" or "content"
    fusion: str | None = None           # hybrid search: "rrf", "alpha=…" or "keyword only"
    keyword_rank: int | None = None
    keyword_score: float | None = None
    semantic_rank: int | None = None
    semantic_score: float | None = None
    doc_key: str = ""                   # the document's (a name search's: its opening is shown)
    chunks: int | None = None           # a document hit: how many of its chunks matched ...
    headings: tuple[str, ...] | None = None  # ... and their headings, best first
    identifier: str | None = None       # the name the query gave it (it is ranked first)

    @classmethod
    def scored(cls, chunk_id: str, score: float) -> Hit:
        """A hit that knows only its chunk and score (a dense or keyword leaf's), equal to
        ``Hit(chunk_id=…, score=…)``: its other fields read their defaults from the class,
        as a dataclass keeps them there. Made without the frozen ``__init__``'s eighteen
        guarded writes (0.3 µs instead of 1.9): a hybrid search makes two hundred."""
        hit = object.__new__(cls)
        vars(hit).update(chunk_id=chunk_id, score=score)
        return hit

    @classmethod
    def placed(cls, chunk_id: str, score: float, source: str, doc_key: str,
               heading: str) -> Hit:
        """A leaf's hit that also knows the chunk's place (its document and heading: the
        vector payload and the keyword index keep them), so grouping it by document reads
        no table; made as ``scored`` makes one."""
        hit = cls.scored(chunk_id, score)
        vars(hit).update(vault=source, doc_key=doc_key, heading=heading)
        return hit

    @property
    def fused(self) -> bool:
        return self.fusion is not None

    def as_dict(self) -> dict:
        """The hit's JSON: the SHOWN fields with scores to four decimals, then ``match`` on a
        keyword hit, the legs on a fused one, the matching chunks on a document hit and the
        identifier on a hit the query named."""
        shown = {name: getattr(self, name) for name in SHOWN}
        shown["score"] = _rounded(self.score)
        if self.match is not None:
            shown["match"] = self.match
        if self.fused:
            shown.update(fusion=self.fusion,
                         keyword_rank=self.keyword_rank,
                         keyword_score=_rounded(self.keyword_score),
                         semantic_rank=self.semantic_rank,
                         semantic_score=_rounded(self.semantic_score))
        if self.chunks is not None:
            shown.update(chunks=self.chunks, headings=list(self.headings or ()))
        if self.identifier is not None:
            shown["identifier"] = self.identifier
        return shown


def _rounded(score: float | None) -> float | None:
    return None if score is None else round(float(score), SCORE_DIGITS)


class Hits(list):
    """A search's hits, best first, with how far the embeddings of the version that answered
    were (``embeddings``: complete, done, total, message; see Snapshot.embeddings; None for
    keyword search, which does not need them)."""

    def __init__(self, hits: list[Hit], embeddings: dict | None = None) -> None:
        super().__init__(hits)
        self.embeddings = embeddings

    def answer(self, query: str) -> dict:
        """The search's answer as the CLI and the MCP tools give it."""
        answer = {"query": query, "results": self}
        if self.embeddings is not None:
            answer["embeddings"] = self.embeddings
        return answer


def jsonable(answer: object) -> object:
    """An answer with every hit in it as its JSON (``Hit.as_dict``)."""
    if isinstance(answer, Hit):
        return answer.as_dict()
    if isinstance(answer, dict):
        return {key: jsonable(value) for key, value in answer.items()}
    if isinstance(answer, list):
        return [jsonable(value) for value in answer]
    return answer


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


def published(snapshot: Snapshot, hits: list[Hit]) -> list[Hit]:
    """``hits`` in their order with what the snapshot's chunk rows say of them: a chunk hit
    its place, heading, title and source type, and the chunk's start as snippet unless it
    has a preview; a document hit (no chunk id) its opening chunk. A chunk hit without a row
    (a vector newer than the published tables, server mode only) is left out."""
    rows = _chunk_rows(snapshot, [hit.chunk_id for hit in hits if hit.chunk_id])
    first_chunks = _openings(snapshot, [hit.doc_key for hit in hits if not hit.chunk_id])
    joined = []
    for hit in hits:
        if not hit.chunk_id:
            chunk_id, text = first_chunks.get(hit.doc_key, ("", ""))
            joined.append(replace(hit, chunk_id=chunk_id, snippet=snippet(text)))
            continue
        row = rows.get(hit.chunk_id)
        if row is None:
            continue
        path, source, heading_path, text, title, source_type = row
        joined.append(replace(hit, path=path, vault=source,
                              heading=heading(heading_path),
                              snippet=hit.snippet or snippet(text), title=title,
                              source_type=source_type))
    return joined


def _chunk_rows(snapshot: Snapshot, chunk_ids: list[str]) -> dict[str, tuple]:
    """chunk id -> (path, source, heading path, text, title, source type)."""
    if not chunk_ids:
        return {}
    rows = snapshot.cursor().execute(
        "SELECT chunk_id, path, source, heading_path, text, title, source_type FROM chunks "
        f"WHERE chunk_id IN ({sql_strings(chunk_ids)})").fetchall()
    return {row[0]: row[1:] for row in rows}


def _openings(snapshot: Snapshot, doc_keys: list[str]) -> dict[str, tuple[str, str]]:
    """doc key -> (chunk id, text) of each document's first chunk."""
    if not doc_keys:
        return {}
    rows = snapshot.cursor().execute(
        "SELECT doc_key, arg_min(chunk_id, position), arg_min(text, position) FROM chunks "
        f"WHERE doc_key IN ({sql_strings(doc_keys)}) GROUP BY doc_key").fetchall()
    return {doc_key: (chunk_id, text) for doc_key, chunk_id, text in rows}

"""Documents, not chunks: a ranking of chunk hits folded to one hit per document.

A search answers with documents by default (``group="document"``): each document ranks
where its best chunk ranks, scores what that chunk scores, shows that chunk (its place and
snippet) and says how many of its chunks matched and under which headings. So a long mail
thread whose every chunk matches takes one place, not ten. ``group="chunk"`` keeps the
chunks (the behaviour before grouping).

Hybrid search fuses documents (``fuse_documents``): each leg keeps a document's best
``FUSED_CHUNKS`` chunks, the two legs' chunks are fused, and a document scores as its best
fused chunk. The passage both legs agree on is what fusion rewards: fusing one entry per
document (its best chunk in each leg, which may be two different passages) scored SciFact
nDCG@10 0.6974 against 0.7072 for fused chunks, and keeping a document's best one or two
chunks 0.5382 and 0.6983; three keep 0.7072. The cap is what stops a long thread's many
chunks from pushing every other document down a leg's ranking.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

from jarvis_core.stores.places import heading
from jarvis_query.fusion import fuse
from jarvis_query.results import Hit, sql_strings
from jarvis_query.snapshot import Snapshot
from jarvis_query.validation import QueryError

DOCUMENT, CHUNK = "document", "chunk"
GROUPS = (DOCUMENT, CHUNK)
GROUPED_CANDIDATES = 100  # chunks fetched to fill ``limit`` documents of many chunks
CHUNKS_PER_DOCUMENT = 3  # chunks fetched first per document asked for
FUSED_CHUNKS = 3  # a document's chunks that each leg of a hybrid search fuses


def check_group(group: object) -> None:
    if group not in GROUPS:
        raise QueryError(f"group must be one of {', '.join(GROUPS)}, got "
                         f"'{str(group)[:40]}'", "group")


@dataclass(frozen=True)
class Place:
    """Where a chunk is: its document (source, doc key) and heading."""

    source: str
    doc_key: str
    heading: str


def places(snapshot: Snapshot, hits: Iterable[Hit]) -> dict[str, Place]:
    """chunk id -> its place, for the chunk hits: what a hit knows of it (the dense and
    keyword leaves read it with the hit), else the snapshot's chunk rows, whose lookup is
    most of a search's time at a million chunks (a chunk without a row, a vector newer than
    the published tables, has none)."""
    found, wanted = {}, set()
    for hit in hits:
        if hit.chunk_id and hit.doc_key:
            found[hit.chunk_id] = Place(hit.vault, hit.doc_key, hit.heading)
        elif hit.chunk_id:
            wanted.add(hit.chunk_id)
    wanted -= found.keys()
    if wanted:
        rows = snapshot.cursor().execute(
            "SELECT chunk_id, source, doc_key, heading_path FROM chunks "
            f"WHERE chunk_id IN ({sql_strings(sorted(wanted))})").fetchall()
        found |= {chunk_id: Place(source, doc_key, heading(heading_path))
                  for chunk_id, source, doc_key, heading_path in rows}
    return found


@dataclass
class Document:
    """A document's hits among a ranking, best first."""

    source: str
    doc_key: str
    hits: list[Hit] = field(default_factory=list)

    @property
    def identity(self) -> str:
        return f"{self.source}\x1f{self.doc_key}"

    def hit(self, found: dict[str, Place], score: float | None = None, **legs) -> Hit:
        """The document as one hit: its best chunk's, with ``score`` (that chunk's when
        None), the number of its matching chunks and their headings (distinct, best
        first)."""
        chunk_ids = list(dict.fromkeys(hit.chunk_id for hit in self.hits))
        headings = [found[chunk_id].heading for chunk_id in chunk_ids]
        best = self.hits[0]
        return replace(best, score=best.score if score is None else score,
                       vault=self.source, doc_key=self.doc_key, chunks=len(chunk_ids),
                       headings=tuple(dict.fromkeys(h for h in headings if h)), **legs)


def documents(hits: list[Hit], found: dict[str, Place]) -> list[Document]:
    """``hits`` (chunks, best first) by document, in the order of each one's best chunk; a
    hit without a place is left out."""
    grouped: dict[str, Document] = {}
    for hit in hits:
        place = found.get(hit.chunk_id)
        if place is None:
            continue
        document = Document(place.source, place.doc_key)
        grouped.setdefault(document.identity, document).hits.append(hit)
    return list(grouped.values())


def by_document(snapshot: Snapshot, hits: list[Hit]) -> list[Hit]:
    """Chunk hits, best first, as one hit per document, best first."""
    found = places(snapshot, hits)
    return [document.hit(found) for document in documents(hits, found)]


def grouped(snapshot: Snapshot, fetch: Callable[[int], list[Hit]], limit: int) -> list[Hit]:
    """One hit per document for ``limit`` documents from ``fetch`` (n -> the best n chunk
    hits): ``limit`` × CHUNKS_PER_DOCUMENT chunks first, GROUPED_CANDIDATES when those hold
    fewer than ``limit`` documents and more may follow (a few long documents took them).
    Fetching three per document rather than a hundred keeps keyword previews cheap."""
    asked = limit * CHUNKS_PER_DOCUMENT
    hits = fetch(asked)
    found = by_document(snapshot, hits)
    if len(found) < limit and len(hits) == asked < GROUPED_CANDIDATES:
        found = by_document(snapshot, fetch(GROUPED_CANDIDATES))
    return found


def _capped(leg: list[Hit], found: dict[str, Place]) -> list[tuple[str, float]]:
    """A leg's (chunk id, score), best first, with at most FUSED_CHUNKS of each document."""
    kept: dict[tuple[str, str], int] = {}
    capped = []
    for hit in leg:
        place = found.get(hit.chunk_id)
        if place is None:
            continue
        document = (place.source, place.doc_key)
        kept[document] = kept.get(document, 0) + 1
        if kept[document] <= FUSED_CHUNKS:
            capped.append((hit.chunk_id, hit.score))
    return capped


def fuse_documents(keyword: list[Hit], dense: list[Hit], found: dict[str, Place],
                   alpha: float | None = None) -> list[tuple[Document, float]]:
    """Two legs' chunk hits fused over documents (fusion.py: RRF, or weighted by
    ``alpha``): each document with its fused score (its best fused chunk's), best first, its
    hits that chunk first and then its other matching chunks of either leg."""
    fused = documents([Hit.scored(chunk_id, score) for chunk_id, score in
                       fuse(_capped(keyword, found), _capped(dense, found), alpha)], found)
    matching = {document.identity: document.hits for document in documents(keyword + dense,
                                                                             found)}
    return [(Document(document.source, document.doc_key,
                      document.hits[:1] + matching[document.identity]), document.hits[0].score)
            for document in fused]

"""What the keyword index's searches share with the filters of the other retrievers: a
``VectorFilter`` as Tantivy queries; and a chunk's preview, its text's best passage with the
matched words marked."""

from __future__ import annotations

from datetime import UTC, datetime

import tantivy

from jarvis_core.stores.keyword_fields import TEXT_MARK
from jarvis_core.stores.vectors.filters import VectorFilter

HIGHLIGHT = ("**", "**")


def utc(value: datetime | None) -> datetime | None:
    """Naive datetimes are UTC, as everywhere in Jarvis."""
    if value is None:
        return None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)



def filter_queries(schema: tantivy.Schema, filters: VectorFilter | None
                    ) -> list[tantivy.Query] | None:
    """The filter as queries that must all match; None when it matches nothing."""
    if filters is None:
        return []
    queries = []
    for field, values in (("source", filters.sources), ("source_type", filters.source_types),
                          ("tags", filters.tags_any)):
        if values is not None:
            if not values:
                return None
            queries.append(tantivy.Query.term_set_query(schema, field, list(values)))
    if filters.modified_from is not None or filters.modified_to is not None:
        queries.append(tantivy.Query.range_query(
            schema, "modified_at", tantivy.FieldType.Date, utc(filters.modified_from),
            utc(filters.modified_to)))
    return queries


def _highlighted(snippet: tantivy.Snippet) -> str:
    """The snippet's fragment on one line with its matched words between HIGHLIGHT marks
    (Tantivy's highlight ranges are UTF-8 byte offsets)."""
    fragment, parts, position = snippet.fragment().encode(), [], 0
    for span in sorted(snippet.highlighted(), key=lambda s: s.start):
        parts += [fragment[position:span.start].decode(errors="replace"), HIGHLIGHT[0],
                  fragment[span.start:span.end].decode(errors="replace"), HIGHLIGHT[1]]
        position = span.end
    parts.append(fragment[position:].decode(errors="replace"))
    return " ".join("".join(parts).split())


def preview(generator: tantivy.SnippetGenerator, body: str) -> str:
    """The chunk text's best passage with the matched words marked, without the title and
    headings indexed before it (a body indexed before ``TEXT_MARK`` existed is shown
    whole); "" when only they matched, and the caller shows the text's start."""
    prefix, mark, text = body.partition(TEXT_MARK)
    snippet = generator.snippet_from_doc(tantivy.Document(body=text if mark else prefix))
    return _highlighted(snippet) if snippet.fragment() else ""

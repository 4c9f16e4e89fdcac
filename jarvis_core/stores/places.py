"""A chunk's place: its source, document and heading. The vector payload and the keyword index
keep it with each chunk under the same names, so a search hit knows its document without
reading the chunk table."""

from __future__ import annotations

from collections.abc import Sequence

PLACE_FIELDS = ("source", "doc_key", "heading")


def heading(heading_path: Sequence[str] | None) -> str:
    """A chunk's heading: the last of its heading path ("" at a document's top)."""
    return heading_path[-1] if heading_path else ""

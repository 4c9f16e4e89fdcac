"""A text file's graph: its document node, and a tag node for each ``#hashtag`` in it, each
edge citing the chunk that holds the tag."""

import re

from jarvis_core.sources.collector import DocumentText, GraphCollector
from jarvis_core.sources.extraction import GraphExtractor, SourceGraph
from jarvis_core.sources.people import PersonDirectory
from jarvis_core.stores.graph.elements import Node

_HASHTAG = re.compile(r"(?<!\w)#([a-z][\w-]*)")


def document_key(source: str, path: str) -> str:
    return f"text:{source}/{path}"


def _extract(source: str, settings, graph, rows: dict[str, list[dict]],
             chunk_rows: list[dict]) -> SourceGraph:
    collector = GraphCollector(source, PersonDirectory(()))
    for row in rows["files"]:
        key = document_key(source, row["path"])
        collector.document(Node(key, "text", row["title"], source, {"path": row["path"]}))
        text = DocumentText(row["text"], [c for c in chunk_rows if c["doc_key"] == key])
        for match in _HASHTAG.finditer(row["text"]):
            tag = collector.tag(match.group(1))
            collector.edge(key, "TAGGED", tag, "hashtag", key,
                           text.at(match.start(), match.end()))
    return collector.graph()


EXTRACTOR = GraphExtractor({"files": "SELECT path, title, text FROM text_files WHERE source = ?"},
                           _extract)

"""How each source kind becomes a graph: the rows its extractor reads and the pure function
over them. Every extractor returns one ``SourceGraph`` shape."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from jarvis_core.config import JarvisConfig
from jarvis_core.sources.confluence.graph import extract_page_graph
from jarvis_core.sources.extraction import SourceGraph
from jarvis_core.sources.mail.graph import extract_mail_graph
from jarvis_core.sources.people import identities_of
from jarvis_core.sources.repo.graph import extract_repo_graph
from jarvis_core.sources.tickets.graph import extract_ticket_graph
from jarvis_core.sources.vault.graph import extract_vault_graph

_NOTE_COLUMNS = ("path, note_key, title, aliases, tags, tag_lines, wikilinks, embeds, links, "
                 "relations, frontmatter_links, body, body_start_line, frontmatter, "
                 "created_at, modified_at")


@dataclass(frozen=True)
class GraphExtractor:
    """The rows one source kind's graph is made from (SQL with the source as its one
    parameter) and the pure function over them and the source's chunks."""

    queries: dict[str, str]
    extract: Callable[[str, JarvisConfig, dict[str, list[dict]], list[dict]], SourceGraph]


def _vault_graph(source: str, config: JarvisConfig, rows: dict[str, list[dict]],
                 chunk_rows: list[dict]) -> SourceGraph:
    return extract_vault_graph(source, rows["notes"], chunk_rows,
                               attachments={row["path"] for row in rows["attachments"]},
                               relation_fields=config.graph.relation_fields)


def _ticket_graph(source: str, config: JarvisConfig, rows: dict[str, list[dict]],
                  chunk_rows: list[dict]) -> SourceGraph:
    return extract_ticket_graph(source, rows["tickets"], chunk_rows)


def _repo_graph(source: str, config: JarvisConfig, rows: dict[str, list[dict]],
                chunk_rows: list[dict]) -> SourceGraph:
    return extract_repo_graph(source, rows["commits"], rows["commit_files"], rows["repo_files"],
                              rows["repo_docs"], rows["repo_knowledge"], chunk_rows,
                              knowledge_dir=config.repos[source].knowledge_dir,
                              known_people=identities_of(row["properties"]
                                                         for row in rows["people"]))


def _mail_graph(source: str, config: JarvisConfig, rows: dict[str, list[dict]],
                chunk_rows: list[dict]) -> SourceGraph:
    return extract_mail_graph(source, rows["threads"], rows["messages"], chunk_rows,
                              known_people=identities_of(row["properties"]
                                                         for row in rows["people"]))


def _page_graph(source: str, config: JarvisConfig, rows: dict[str, list[dict]],
                chunk_rows: list[dict]) -> SourceGraph:
    return extract_page_graph(source, rows["pages"], chunk_rows,
                              known_people=identities_of(row["properties"]
                                                         for row in rows["people"]))


# Person nodes of the other sources: their spellings fold a source's people into theirs.
_OTHER_PEOPLE = "SELECT properties FROM graph_nodes WHERE type = 'person' AND source <> ?"

# By source kind; a source no longer configured extracts nothing, so its graph is removed.
GRAPH_EXTRACTORS: dict[str, GraphExtractor] = {
    "vault": GraphExtractor(
        {"notes": f"SELECT {_NOTE_COLUMNS} FROM notes WHERE source = ?",
         "attachments": "SELECT path FROM attachments WHERE source = ?"},
        _vault_graph),
    "tickets": GraphExtractor(
        {"tickets": "SELECT * EXCLUDE (source, path, file_hash, content_hash, warnings, "
                    "ingested_at) FROM tickets WHERE source = ?"},
        _ticket_graph),
    "repo": GraphExtractor(
        {"commits": "SELECT * EXCLUDE (source, ingested_at) FROM commits WHERE source = ?",
         "commit_files": "SELECT * EXCLUDE (source) FROM commit_files WHERE source = ?",
         "repo_files": "SELECT path, language FROM repo_files WHERE source = ?",
         "repo_docs": "SELECT path, title, text FROM repo_docs WHERE source = ?",
         "repo_knowledge": "SELECT path, components FROM repo_knowledge WHERE source = ?",
         "people": _OTHER_PEOPLE},
        _repo_graph),
    "mail": GraphExtractor(
        {"threads": "SELECT thread_id, subject, message_ids, started_at, last_at, text, "
                    "sections FROM mail_threads WHERE source = ?",
         "messages": "SELECT message_id, sender, recipients, cc FROM mail_messages "
                     "WHERE source = ?",
         "people": _OTHER_PEOPLE},
        _mail_graph),
    "confluence": GraphExtractor(
        {"pages": "SELECT * EXCLUDE (source, revision, file, item, warnings, content_hash, "
                  "parser_version, row_hash, ingested_at) FROM pages WHERE source = ?",
         "people": _OTHER_PEOPLE},
        _page_graph),
}
NO_GRAPH = GraphExtractor({}, lambda *_: SourceGraph([], [], [], [], {}))


def extractor_for(kind: str | None) -> GraphExtractor:
    return GRAPH_EXTRACTORS.get(kind, NO_GRAPH)

"""The knowledge graph of one mail source, from its stored threads and messages.

A thread is the document (``thread:<source>/<Message-ID of its first message>``); messages
are not nodes of their own. The thread is what is chunked, embedded and searched, and a
message holds nothing its thread's document does not: message nodes would double the nodes
of a mailbox while every edge they carried would also be an edge of their thread. What is
per message stays visible anyway: an edge read from one message cites that message's chunks
and line (its heading for the sender, its To/Cc line for the recipients), and the thread's
``message_ids`` property lets a citation of any Message-ID resolve to the thread holding it.

Edges (origin: the thread): ``person -AUTHORED-> thread`` for every sender,
``thread -SENT_TO-> person`` for To and Cc (people folded across sources by
``jarvis_core.sources.people``: a sender is the same person as the commit author and the
Jira assignee with that email), ``thread -MENTIONS-> thread`` when a message cites a
Message-ID of another thread of the source. Tickets, commits, files, notes, pages and
messages of other sources cited in the text are references for ``cross_source_links``.
"""

from __future__ import annotations

from collections.abc import Iterable

from jarvis_core.settings import GraphSettings
from jarvis_core.sources.collector import DocumentText, GraphCollector
from jarvis_core.sources.export_rows import identity_of
from jarvis_core.sources.extraction import (
    OTHER_PEOPLE,
    DocumentBatches,
    GraphExtractor,
    SourceGraph,
    other_people,
)
from jarvis_core.sources.people import Identity, PersonDirectory
from jarvis_core.sources.references import MESSAGE, document_name, find_references
from jarvis_core.stores.graph.elements import Node

THREAD_PREFIX = "thread:"


def thread_key(source: str, thread_id: str) -> str:
    return f"{THREAD_PREFIX}{source}/{thread_id}"


def thread_path(thread_id: str) -> str:
    """The thread's document path within its source (chunks and search results show it)."""
    return f"threads/{thread_id}"


def _node(source: str, thread: dict) -> Node:
    properties = {"thread_id": thread["thread_id"], "path": thread_path(thread["thread_id"]),
                  "message_ids": list(thread["message_ids"]),
                  "messages": len(thread["message_ids"])}
    for name, column in (("started", "started_at"), ("last", "last_at")):
        if thread[column]:
            properties[name] = thread[column].isoformat()
    return Node(thread_key(source, thread["thread_id"]), "thread", thread["subject"], source,
                properties)


def _message_people(graph: GraphCollector, key: str, text: DocumentText, message: dict,
                    start: int, end: int) -> None:
    """AUTHORED from the sender (the message's heading line) and SENT_TO the recipients
    (its To/Cc line)."""
    heading_end = text.text.find("\n", start, end)
    heading_end = end if heading_end < 0 else heading_end
    sender = graph.person(identity_of(message["sender"]))
    if sender:
        graph.edge(sender, "AUTHORED", key, "mail_header", key, text.at(start, heading_end))
    recipients = [identity_of(p) for p in (*(message["recipients"] or ()),
                                           *(message["cc"] or ()))]
    line_end = text.text.find("\n", heading_end + 1, end)
    line = text.text[heading_end + 1:end if line_end < 0 else line_end]
    evidence = text.at(heading_end + 1, heading_end + 1 + len(line)) \
        if line.startswith(("To: ", "Cc: ")) else text.at(start, heading_end)
    for identity in recipients:
        person = graph.person(identity)
        if person:
            graph.edge(key, "SENT_TO", person, "mail_header", key, evidence)


def extract_mail_graph(source: str, threads: list[dict], messages: list[dict],
                       chunks: list[dict], known_people: Iterable[Identity] = (),
                       identities: Iterable[Identity] | None = None,
                       all_threads: Iterable[dict] | None = None) -> SourceGraph:
    """The graph of one mail source from its ``mail_threads`` rows (thread_id, subject,
    message_ids, started_at, last_at, text, sections), ``mail_messages`` rows (message_id,
    sender, recipients, cc) and chunks (chunk_id, doc_key, char_start, char_end), in a
    deterministic order; ``known_people`` are identities other sources recorded. Given a
    batch of the threads, ``identities`` are every person the source's messages name and
    ``all_threads`` (thread_id, message_ids) every thread a message can be cited in; by
    default, those of ``messages`` and ``threads``."""
    by_message = {row["message_id"]: row for row in messages}
    if identities is None:
        identities = [identity for row in messages
                      for identity in map(identity_of, (row["sender"], *(row["recipients"] or ()),
                                                        *(row["cc"] or ()))) if identity]
    graph = GraphCollector(source, PersonDirectory([*known_people, *identities]))
    thread_of = {document_name(mid): thread_key(source, row["thread_id"])
                 for row in (threads if all_threads is None else all_threads)
                 for mid in row["message_ids"]}
    chunks_by_doc: dict[str, list[dict]] = {}
    for chunk in chunks:
        chunks_by_doc.setdefault(chunk["doc_key"], []).append(chunk)
    for thread in sorted(threads, key=lambda row: row["thread_id"]):
        key = thread_key(source, thread["thread_id"])
        graph.document(_node(source, thread))
        text = DocumentText(thread["text"], chunks_by_doc.get(key, []))
        for section in thread["sections"]:
            if (message := by_message.get(section["message_id"])) is not None:
                _message_people(graph, key, text, message, section["char_start"],
                                section["char_end"])
        for ref in find_references(text.text):
            evidence = text.at(ref.start, ref.end)
            cited = thread_of.get(document_name(ref.target)) if ref.kind == MESSAGE else None
            if cited:
                graph.edge(key, ref.relation, cited, "reference", key, evidence)
            else:
                graph.cite(key, ref.relation, ref.kind, ref.target, ref.written, evidence)
    return graph.graph()


def _extract(source: str, settings, graph: GraphSettings, rows: dict[str, list[dict]],
             chunk_rows: list[dict]) -> SourceGraph:
    return extract_mail_graph(
        source, rows["threads"], rows["messages"], chunk_rows, known_people=other_people(rows),
        identities=[identity_of(row["identity"]) for row in rows["identities"]],
        all_threads=rows["thread_messages"])


# Every person the source's messages name, once, in the order the messages were stored: the
# person directory of every batch (a batch's own messages would fold fewer spellings).
_IDENTITIES = """
    SELECT person AS identity FROM (
        SELECT rowid AS message, unnest(people) AS person,
               generate_subscripts(people, 1) AS place
        FROM (SELECT rowid, [sender] || coalesce(recipients, []) || coalesce(cc, []) AS people
              FROM mail_messages WHERE source = ?))
    WHERE person IS NOT NULL GROUP BY person ORDER BY min(message), min(place)"""

# Threads are extracted a batch at a time: the texts of a large mailbox's threads, their
# messages and chunk spans held at once were most of a mail refresh's peak.
EXTRACTOR = GraphExtractor(
    {"identities": _IDENTITIES,
     "thread_messages": "SELECT thread_id, message_ids FROM mail_threads WHERE source = ?",
     "people": OTHER_PEOPLE},
    _extract,
    DocumentBatches(
        "threads",
        "SELECT thread_id, subject, message_ids, started_at, last_at, text, sections "
        "FROM mail_threads WHERE source = ?", "thread_id",
        lambda source, row: thread_key(source, row["thread_id"]),
        {"messages": "SELECT message_id, sender, recipients, cc FROM mail_messages "
                     "WHERE source = ? AND thread_id IN (SELECT unnest(?))"}))

"""The graphs of mail sources and Confluence exports, from rows made the way the pipeline
makes them (real mail files and a REST export, parsed, through the tables' schemas), and the
cross-source resolution of what they cite and of what cites them."""

from datetime import datetime

import duckdb

from jarvis_core.graph.cross_source import resolve_references
from jarvis_core.graph.sync import GraphRun
from jarvis_core.sources import registry
from jarvis_core.sources.confluence.graph import EXTRACTOR as PAGES_EXTRACTOR
from jarvis_core.sources.confluence.graph import extract_page_graph, page_key
from jarvis_core.sources.confluence.ingest import page_row
from jarvis_core.sources.confluence.read import read_confluence_export
from jarvis_core.sources.mail.graph import EXTRACTOR as MAIL_EXTRACTOR
from jarvis_core.sources.mail.graph import extract_mail_graph, thread_key
from jarvis_core.sources.mail.ingest import message_row, thread_row
from jarvis_core.sources.mail.read import read_mail_source
from jarvis_core.sources.people import Identity
from jarvis_core.sources.references import (
    COMMIT,
    JIRA,
    MESSAGE,
    NOTE,
    PAGE,
    PAGE_TITLE,
    ReferenceIndex,
)
from jarvis_core.stores import tables
from jarvis_core.stores.graph.sqlite import SqliteGraphStore
from tests.export_helpers import (
    DANIEL,
    MAYA,
    MAYA_ACCOUNT,
    SAM,
    SAM_ACCOUNT,
    WIKI,
    jira_macro,
    mention,
    message,
    page_link,
    rest_page,
    write_mbox,
    write_rest_export,
)
from tests.graph_helpers import graph_rows, synced, write_rows

NOW = datetime(2026, 11, 1)
GIT_MAYA = Identity("Maya Chen", "maya.chen@lumen.example")   # as a commit spells her
JIRA_SAM = Identity("Sam Novak", "sam.novak@lumen.example", (f"jira:{SAM_ACCOUNT}",))
DEDUPE = thread_key("mail", "a@lumen.example")
ALERTS = thread_key("mail", "alerts-1@lumen.example")


def section_chunks(doc_key: str, text: str, marker: str) -> list[dict]:
    """Chunks split where ``marker`` starts a section, as a heading-aware chunker would."""
    starts = [0] + [at + 2 for at in _find_all(text, "\n\n" + marker)]
    ends = starts[1:] + [len(text)]
    return [{"chunk_id": f"{doc_key}#{i}", "doc_key": doc_key, "char_start": start,
             "char_end": end} for i, (start, end) in enumerate(zip(starts, ends, strict=True))]


def _find_all(text: str, needle: str) -> list[int]:
    found, at = [], text.find(needle)
    while at >= 0:
        found.append(at)
        at = text.find(needle, at + 1)
    return found


def mail_graph(folder, *messages, known=(GIT_MAYA,)):
    write_mbox(folder / "box.mbox", *messages)
    read = read_mail_source(folder)
    thread_of = {mid: t.thread_id for t in read.threads for mid in t.message_ids}
    threads = registry.table("mail_threads").frame([thread_row("mail", t, NOW)
                                            for t in read.threads]).to_dicts()
    rows = registry.table("mail_messages").frame([{**message_row("mail", m, thread_of[mid]),
                                            "ingested_at": NOW}
                                           for mid, m in read.messages.items()]).to_dicts()
    chunks = [chunk for t in threads
              for chunk in section_chunks(thread_key("mail", t["thread_id"]), t["text"], "## ")]
    return extract_mail_graph("mail", threads, rows, chunks, known_people=known)


DEDUPE_THREAD = (
    message("a@lumen.example", "Dedupe key", "LUM-4 needs its key settled.\n", cc=DANIEL),
    message("b@lumen.example", "Re: Dedupe key",
            "observed_at drifts since 1d2941d.\n\nOn Fri, 9 Oct 2026, Maya Chen wrote:\n"
            "> LUM-4 needs its key settled.\n", sender=SAM, to=MAYA, hour=11,
            reply_to="a@lumen.example", refs=("a@lumen.example",)),
    message("c@lumen.example", "Re: Dedupe key",
            "Decision: (station_id, boot_id, seq), landed in 5d24297.\nThe alert side is in "
            "Message-ID: <alerts-1@lumen.example>.\n",
            sender="Chen, Maya <MAYA.CHEN@lumen.example>", to="lumen-dev@lumen.example",
            day=12, reply_to="b@lumen.example", refs=("a@lumen.example", "b@lumen.example")),
    message("alerts-1@lumen.example", "Alert rules", "Evaluate in bulk.\n", sender=DANIEL,
            to=MAYA, day=15),
)


def test_threads_are_the_nodes_with_folded_people_and_evidence_per_message(tmp_path):
    graph = mail_graph(tmp_path, *DEDUPE_THREAD)

    assert {(n.key, n.type) for n in graph.nodes if n.type not in ("person",)} == {
        (DEDUPE, "thread"), (ALERTS, "thread")}
    [dedupe] = [n for n in graph.nodes if n.key == DEDUPE]
    assert dedupe.title == "Dedupe key" and dedupe.source == "mail"
    assert dedupe.properties["message_ids"] == ["a@lumen.example", "b@lumen.example",
                                                "c@lumen.example"]
    assert dedupe.properties["path"] == "threads/a@lumen.example"
    # "Chen, Maya <MAYA.CHEN@...>" is the commit author Maya Chen: one person
    assert {n.key for n in graph.nodes if n.type == "person"} == {
        "person:maya.chen@lumen.example", "person:sam.novak@lumen.example",
        "person:daniel.okafor@lumen.example", "person:lumen-dev@lumen.example"}
    edges = {(e.src, e.relation, e.dst): e for e in graph.edges}
    authored = edges[("person:maya.chen@lumen.example", "AUTHORED", DEDUPE)]
    assert authored.evidence == (f"{DEDUPE}#1", f"{DEDUPE}#3")  # messages a and c
    assert authored.evidence_text.startswith("## Maya Chen <maya.chen@lumen.example> · "
                                             "2026-10-09 08:00 UTC · Dedupe key")
    cc = edges[(DEDUPE, "SENT_TO", "person:daniel.okafor@lumen.example")]
    assert cc.evidence_text == "To: Sam Novak · Cc: Daniel Okafor"
    assert cc.evidence == (f"{DEDUPE}#1",)
    assert (DEDUPE, "SENT_TO", "person:lumen-dev@lumen.example") in edges
    # a Message-ID of another thread of the source is an edge between the threads
    assert edges[(DEDUPE, "MENTIONS", ALERTS)].evidence == (f"{DEDUPE}#3",)
    assert all(e.evidence and e.evidence_text and e.origin in (DEDUPE, ALERTS)
               for e in graph.edges)


def test_what_a_thread_cites_in_other_sources_is_a_reference_quoted_text_once(tmp_path):
    graph = mail_graph(tmp_path, *DEDUPE_THREAD)

    cited = {(r.origin, r.kind, r.target): r for r in graph.references}
    assert set(cited) == {(DEDUPE, JIRA, "LUM-4"), (DEDUPE, COMMIT, "1d2941d"),
                          (DEDUPE, COMMIT, "5d24297")}
    lum4 = cited[(DEDUPE, JIRA, "LUM-4")]  # the quote in the reply was collapsed
    assert lum4.evidence == (f"{DEDUPE}#1",) and lum4.evidence_text == \
        "LUM-4 needs its key settled."
    assert {m.node_key for m in graph.mentions if m.chunk_id == f"{DEDUPE}#3"} >= {
        ALERTS, "person:maya.chen@lumen.example"}


def test_a_new_reply_changes_only_its_threads_fingerprint(tmp_path):
    first = mail_graph(tmp_path / "before", *DEDUPE_THREAD)
    reply = message("alerts-2@lumen.example", "Re: Alert rules", "Agreed, bulk.\n",
                    sender=SAM, day=16, reply_to="alerts-1@lumen.example")
    grown = mail_graph(tmp_path / "after", *DEDUPE_THREAD, reply)

    assert {key for key, value in grown.fingerprints.items()
            if first.fingerprints.get(key) != value} == {ALERTS}


# --- pages ---------------------------------------------------------------------------------

HOME, ARCHITECTURE, INGEST = "65537", "65538", "65541"
CRUMBS = [(HOME, "Lumen Home"), (ARCHITECTURE, "Architecture")]


def export_pages() -> list[dict]:
    return [
        rest_page(HOME, "Lumen Home", "<p>Start here.</p>", labels=("lumen",),
                  creator=(MAYA_ACCOUNT, "Maya Chen"), editor=(SAM_ACCOUNT, "Sam Novak")),
        rest_page(ARCHITECTURE, "Architecture",
                  f"<p>Storage is {jira_macro('LUM-2')}; ingest: "
                  f"{page_link('Ingest: idempotency and the dedupe key', 'the dedupe page')}. "
                  f"Owner {mention(SAM_ACCOUNT)}.</p>", ancestors=CRUMBS[:1]),
        rest_page(INGEST, "Ingest: idempotency and the dedupe key",
                  f"<h2>Decision</h2><p>Recorded in {jira_macro('LUM-4')}, landed in 5d24297. "
                  f"Alerts: {page_link('Alert rule evaluation', 'alert rules')}. Home: "
                  f'<a href="{WIKI}/pages/viewpage.action?pageId={HOME}">start</a>. Argued in '
                  "mid:c@lumen.example and in [[Ingest API]].</p>"
                  '<ac:structured-macro ac:name="code"><ac:plain-text-body><![CDATA['
                  "-- LUM-9 is not a reference here]]></ac:plain-text-body>"
                  "</ac:structured-macro>", ancestors=CRUMBS, labels=("adr", "ingest"),
                  version=7),
    ]


def page_graph(folder, pages, known=(JIRA_SAM,)):
    read = read_confluence_export(write_rest_export(folder / "content.json", pages))
    rows = registry.table("pages").frame([{**page_row("wiki", page), "ingested_at": NOW}
                                  for page in read.pages.values()]).to_dicts()
    chunks = [chunk for row in rows for chunk in section_chunks(
        page_key("wiki", row["page_id"]), row["text"], "## ")]
    return extract_page_graph("wiki", rows, chunks, known_people=known)


def test_pages_form_a_hierarchy_with_links_labels_and_folded_people(tmp_path):
    graph = page_graph(tmp_path, export_pages())
    home, architecture, ingest = (page_key("wiki", pid) for pid in (HOME, ARCHITECTURE, INGEST))
    edges = {(e.src, e.relation, e.dst): e for e in graph.edges}

    assert {(e.src, e.dst) for e in graph.edges if e.relation == "PARENT"} == {
        (architecture, home), (ingest, architecture)}
    assert edges[(ingest, "PARENT", architecture)].evidence_text.startswith(
        "Space: LUM · Path: Lumen Home › Architecture · Labels: adr, ingest")
    assert {(e.src, e.dst) for e in graph.edges if e.relation == "LINKS_TO"} == {
        (architecture, ingest), (ingest, home)}
    # the storage format names the linked page by title; the text shows the link's words
    assert edges[(architecture, "LINKS_TO", ingest)].evidence_text == \
        "link: Ingest: idempotency and the dedupe key"
    assert edges[(ingest, "LINKS_TO", home)].evidence_text == \
        f"link: {WIKI}/pages/viewpage.action?pageId={HOME}"
    assert {(e.src, e.dst) for e in graph.edges if e.relation == "TAGGED"} == {
        (home, "tag:lumen"), (ingest, "tag:adr"), (ingest, "tag:ingest")}
    # Sam's Confluence account is the Jira user with his email
    sam = "person:sam.novak@lumen.example"
    assert (sam, "AUTHORED", ingest) in edges and (home, "EDITED_BY", sam) in edges
    assert (architecture, "MENTIONS", sam) in edges
    assert all(e.evidence and e.evidence_text for e in graph.edges)
    [node] = [n for n in graph.nodes if n.key == ingest]
    assert (node.type, node.properties["version"], node.properties["space"]) == ("page", 7,
                                                                                 "LUM")


def test_links_outside_the_export_are_broken_and_cited_and_code_is_skipped(tmp_path):
    graph = page_graph(tmp_path, export_pages())
    ingest = page_key("wiki", INGEST)

    assert [(b.origin, b.target) for b in graph.broken] == [(ingest, "Alert rule evaluation")]
    cited = {(r.origin, r.relation, r.kind, r.target) for r in graph.references}
    assert cited == {
        (page_key("wiki", ARCHITECTURE), "MENTIONS", JIRA, "LUM-2"),
        (ingest, "MENTIONS", JIRA, "LUM-4"), (ingest, "MENTIONS", COMMIT, "5d24297"),
        (ingest, "LINKS_TO", PAGE_TITLE, "Alert rule evaluation"),
        (ingest, "MENTIONS", MESSAGE, "c@lumen.example"), (ingest, "MENTIONS", NOTE, "Ingest API")}
    assert all(r.evidence and r.evidence_text for r in graph.references)


def test_a_deleted_page_changes_only_the_pages_that_pointed_at_it(tmp_path):
    first = page_graph(tmp_path / "before", export_pages())
    pages = [page for page in export_pages() if page["id"] != ARCHITECTURE]
    after = page_graph(tmp_path / "after", pages)

    changed = {key for key, value in after.fingerprints.items()
               if first.fingerprints.get(key) != value}
    assert changed == {page_key("wiki", INGEST)}  # its parent is gone
    assert set(first.fingerprints) - set(after.fingerprints) == {page_key("wiki", ARCHITECTURE)}
    assert not [e for e in after.edges if page_key("wiki", ARCHITECTURE) in (e.src, e.dst)]


# --- resolution across sources -----------------------------------------------------------------

NODES = [
    {"node_key": page_key("wiki", INGEST), "type": "page",
     "title": "Ingest: idempotency and the dedupe key", "properties": {"page_id": INGEST}},
    {"node_key": DEDUPE, "type": "thread", "title": "Dedupe key",
     "properties": {"message_ids": ["a@lumen.example", "c@lumen.example"]}},
    {"node_key": "note:notes/Projects/Ingest API.md", "type": "note", "title": "Ingest API",
     "properties": {"path": "Projects/Ingest API.md", "aliases": ["API"]}},
    {"node_key": "note:notes/Other/Ingest API.md", "type": "note", "title": "Ingest API (old)",
     "properties": {"path": "Other/Ingest API.md"}},
]


def reference(origin: str, kind: str, target: str, relation: str = "MENTIONS") -> dict:
    return {"source": origin.split(":")[1].split("/")[0], "origin": origin, "src": origin,
            "relation": relation, "kind": kind, "target": target, "written": target, "line": 3,
            "evidence": [f"{origin}#0"], "evidence_text": f"cites {target}", "inverse": False}


def test_notes_pages_and_threads_resolve_by_title_id_and_message_id():
    index = ReferenceIndex(NODES)
    assert index.resolve(PAGE_TITLE, "ingest:  IDEMPOTENCY and the dedupe key") == (
        (page_key("wiki", INGEST),), "resolved")
    assert index.resolve(PAGE, INGEST)[1] == "resolved"
    assert index.resolve(MESSAGE, "C@lumen.example") == ((DEDUPE,), "resolved")
    assert index.resolve(NOTE, "Projects/Ingest API") == (("note:notes/Projects/Ingest API.md",),
                                                          "resolved")
    assert index.resolve(NOTE, "Ingest API")[1] == "ambiguous_document"  # two files so named
    assert index.resolve(NOTE, "api")[1] == "resolved"
    assert index.resolve(MESSAGE, "nobody@x") == ((), "no_such_message")
    assert index.resolve(PAGE_TITLE, "Alert rule evaluation") == ((), "no_such_page")


def test_citations_become_edges_both_ways_and_ambiguity_is_listed_without_warning():
    note = "note:notes/Projects/Ingest API.md"
    references = [reference(note, PAGE_TITLE, "Ingest: idempotency and the dedupe key",
                            "LINKS_TO"),
                  reference(page_key("wiki", INGEST), MESSAGE, "c@lumen.example"),
                  reference(DEDUPE, NOTE, "Ingest API"),
                  reference(DEDUPE, PAGE, "99999")]
    edges, unresolved = resolve_references(references, ReferenceIndex(NODES))

    assert {(e.src, e.relation, e.dst, e.origin) for e in edges} == {
        (note, "LINKS_TO", page_key("wiki", INGEST), f"xref:{note}"),
        (page_key("wiki", INGEST), "MENTIONS", DEDUPE, f"xref:{page_key('wiki', INGEST)}")}
    assert [(u["target"], u["reason"]) for u in unresolved] == [
        ("Ingest API", "ambiguous_document")]


def _synced_mail(folder, conn, store, batch_documents: int, *messages) -> GraphRun:
    """The mail source of ``messages`` through the graph sync, its threads extracted
    ``batch_documents`` at a time."""
    write_mbox(folder / "box.mbox", *messages)
    read = read_mail_source(folder)
    thread_of = {mid: t.thread_id for t in read.threads for mid in t.message_ids}
    threads = [thread_row("mail", t, NOW) for t in read.threads]
    write_rows(conn, "mail", {
        "mail_threads": threads,
        "mail_messages": [{**message_row("mail", m, thread_of[mid]), "ingested_at": NOW}
                          for mid, m in read.messages.items()],
        "chunks": [{**chunk, "path": "box.mbox"} for t in threads
                   for chunk in section_chunks(thread_key("mail", t["thread_id"]),
                                               t["text"], "## ")]})
    return synced(conn, store, "mail", MAIL_EXTRACTOR, batch_documents)


def test_threads_extracted_a_batch_at_a_time_make_the_graph_one_batch_makes(tmp_path):
    """A thread citing one of a later batch (its edge waits for the end), then that thread
    deleted: a batch of one thread at a time writes the tables and the store one batch
    writes."""
    runs = {}
    for size in (1, 100):
        with duckdb.connect() as conn, SqliteGraphStore(tmp_path / f"{size}.sqlite") as store:
            tables.ensure_schema(conn, registry.declared_tables())
            first = _synced_mail(tmp_path / f"mail-{size}", conn, store, size, *DEDUPE_THREAD)
            assert first.dangling == 0 and first.counts.new == 2
            assert conn.execute("SELECT count(*) FROM graph_edges WHERE src = ? AND dst = ?",
                                [DEDUPE, ALERTS]).fetchone() == (1,)  # cited across batches
            whole = graph_rows(conn, store)
            (tmp_path / f"mail-{size}" / "box.mbox").unlink()
            gone = _synced_mail(tmp_path / f"mail-{size}", conn, store, size,
                                *DEDUPE_THREAD[:3])
            assert gone.removed == {ALERTS} and gone.dangling == 0
            runs[size] = whole, graph_rows(conn, store)
    assert runs[1] == runs[100]
    assert any(ALERTS in str(row) for row in runs[1][0]["store edges"])
    assert not any(ALERTS in str(row) for table in ("store nodes", "graph_nodes", "graph_edges")
                   for row in runs[1][1][table])


def test_pages_extracted_a_batch_at_a_time_make_the_graph_one_batch_makes(tmp_path):
    """Links and parents across batches (their edges wait for the end), then a page deleted:
    a page at a time writes what one batch writes."""
    runs = {}
    for size in (1, 100):
        with duckdb.connect() as conn, SqliteGraphStore(tmp_path / f"{size}.sqlite") as store:
            tables.ensure_schema(conn, registry.declared_tables())
            found = []
            for step, pages in enumerate((export_pages(), [
                    page for page in export_pages() if page["id"] != ARCHITECTURE])):
                read = read_confluence_export(write_rest_export(
                    tmp_path / f"{size}-{step}" / "content.json", pages))
                rows = [{**page_row("wiki", page), "ingested_at": NOW}
                        for page in read.pages.values()]
                write_rows(conn, "wiki", {"pages": rows, "chunks": [
                    {**chunk, "path": "content.json"} for row in rows
                    for chunk in section_chunks(page_key("wiki", row["page_id"]), row["text"],
                                                "## ")]})
                run = synced(conn, store, "wiki", PAGES_EXTRACTOR, size)
                assert run.dangling == 0
                found.append(graph_rows(conn, store))
            assert run.removed == {page_key("wiki", ARCHITECTURE)}
            runs[size] = found
    assert runs[1] == runs[100]
    home, architecture, ingest = (page_key("wiki", pid) for pid in (HOME, ARCHITECTURE, INGEST))
    assert {(row[1], row[2]) for row in runs[1][0]["store edges"] if row[3] == "LINKS_TO"} == {
        (architecture, ingest), (ingest, home)}  # in key order, ingest's batch is the last

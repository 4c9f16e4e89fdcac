"""Mentions of source-code symbols in notes, tickets and commit messages (``UserService.
createUser``, ``createUser()``, a backticked name, ``path:line``), resolved against symbol
nodes of the code graph's shape (``jarvis_core.sources.repo.code.model``) made by hand."""

import dataclasses
import json
from contextlib import nullcontext
from datetime import datetime

import duckdb
import pytest

from jarvis_core.graph.cross_source import link_sources, resolve_references
from jarvis_core.sources.code_references import (
    AMBIGUOUS_SYMBOL,
    CANDIDATES_LISTED,
    LINE,
    SYMBOL,
)
from jarvis_core.sources.references import PATH, ReferenceIndex, find_references
from jarvis_core.sources.repo.code.model import symbol_key
from jarvis_core.sources.repo.graph import extract_repo_graph
from jarvis_core.sources.tickets.fields import document_text
from jarvis_core.sources.tickets.graph import extract_ticket_graph, ticket_key
from jarvis_core.sources.tickets.jira import jira_ticket
from jarvis_core.stores import tables
from jarvis_core.stores.graph.sqlite import SqliteGraphStore

JAVA = "src/main/java/com/shop/UserService.java"
# (path, qualified name, kind, first line, last line) of the repository 'shop'
SYMBOLS = [
    ("app/user_service.py", "create_user", "function", 1, 9),
    ("app/user_service.py", "Cache", "class", 11, 30),
    ("app/user_service.py", "Cache.get", "method", 13, 16),
    ("app/parser.py", "parse_file", "function", 1, 20),
    ("app/parser.py", "get", "function", 22, 25),
    (JAVA, "UserService", "class", 3, 40),
    (JAVA, "UserService.UserService", "method", 5, 7),   # its constructor
    (JAVA, "UserService.createUser", "method", 9, 20),
    (JAVA, "UserService.get", "method", 22, 25),
]
FILES = ["app/user_service.py", "app/parser.py", JAVA, "tests/parser.py",
         "config/settings.yaml"]


def symbol_node(repo: str, path: str, qualified: str, kind: str, start: int, end: int) -> dict:
    name = qualified.rpartition(".")[2]
    return {"node_key": symbol_key(repo, path, qualified), "type": "symbol",
            "title": qualified, "node_source": repo, "properties": json.dumps({
                "kind": kind, "name": name, "qualified_name": qualified,
                "symbol_id": qualified, "signature": f"{name}()", "path": path,
                "start_line": start, "end_line": end, "language": "python"})}


def code_nodes(repo: str = "shop") -> list[dict]:
    return [*(symbol_node(repo, *row) for row in SYMBOLS),
            *({"node_key": f"file:{repo}/{path}", "type": "file", "title": path,
               "node_source": repo, "properties": json.dumps({"path": path})}
              for path in FILES)]


def key(path: str, qualified: str) -> str:
    return symbol_key("shop", path, qualified)


NOTE = {"node_key": "note:notes/Design.md", "type": "note", "title": "Design",
        "node_source": "notes", "properties": json.dumps({"path": "Design.md"})}


def reference(kind: str, target: str, origin: str = NOTE["node_key"]) -> dict:
    return {"source": "notes", "origin": origin, "src": origin, "relation": "MENTIONS",
            "kind": kind, "target": target, "written": target, "line": 3,
            "evidence": ["c1"], "evidence_text": f"the line citing {target}", "inverse": False}


def mentions(text: str) -> list[tuple[str, str, str]]:
    return [(ref.kind, ref.target, ref.written) for ref in find_references(text)
            if ref.kind in (SYMBOL, LINE)]


def test_each_form_is_found_with_its_span():
    assert mentions("UserService.createUser and user_service.create_user") == [
        (SYMBOL, "UserService.createUser", "UserService.createUser"),
        (SYMBOL, "user_service.create_user", "user_service.create_user")]
    assert mentions("then createUser() fails") == [(SYMBOL, "createUser", "createUser")]
    assert mentions("self.parse_file() twice") == [(SYMBOL, "parse_file", "self.parse_file")]
    assert mentions("the `createUser` and `UserService#get(id)` and `Repo::find()` calls") == [
        (SYMBOL, "createUser", "createUser"), (SYMBOL, "UserService.get", "UserService#get"),
        (SYMBOL, "Repo.find", "Repo::find")]
    assert mentions("fails at src/app/service.py:42, service.py:7 and Service.java#L9") == [
        (LINE, "src/app/service.py:42", "src/app/service.py:42"),
        (LINE, "service.py:7", "service.py:7"), (LINE, "Service.java:9", "Service.java#L9")]
    assert mentions('  File "/srv/shop/app/parser.py", line 23, in get') == [
        (LINE, "/srv/shop/app/parser.py:23", 'File "/srv/shop/app/parser.py", line 23')]
    assert mentions("see https://github.com/o/shop/blob/4f2a9c1/app/parser.py#L23-L25 and "
                    "https://gitlab.com/g/o/shop/-/blob/main/app/parser.py#L3") == [
        (LINE, "app/parser.py:23", "https://github.com/o/shop/blob/4f2a9c1/app/parser.py#L23"),
        (LINE, "app/parser.py:3", "https://gitlab.com/g/o/shop/-/blob/main/app/parser.py#L3")]
    # with a line, a path is a place in the file: no second reference to the file itself
    assert not [ref for ref in find_references("src/app/service.py:42") if ref.kind == PATH]


def test_a_document_mentions_a_symbol_once_at_its_first_place():
    text = "at Foo.bar_baz(Foo.java:3)\nat Foo.bar_baz(Foo.java:3)\nthen `bar_baz` and bar_baz()\n"
    assert [(ref.target, ref.line) for ref in find_references(text)
            if ref.kind in (SYMBOL, LINE)] == [
        ("Foo.bar_baz", 1), ("Foo.java:3", 1), ("bar_baz", 3)]


def test_prose_words_never_link():
    text = ("We create the user, then get and run the job (see e.g. the guide at example.com,\n"
            "node.js and the file(s) in https://example.com/app/parser.py:22, v1.2.3,\n"
            "https://example.com/search?q=parse_file(), app/user_service.py or\n"
            "ops.team_lead@shop.example); a function() { return x; } pasted in prose;\n"
            "`not code at all`, `ls -la` and `null` are backticked too.\n")
    assert mentions(text) == []
    nodes = code_nodes() + [symbol_node("shop", "app/words.py", word, "function", 1, 2)
                            for word in ("create", "user", "run", "job", "guide")]
    refs = [{**reference(ref.kind, ref.target), "written": ref.written}
            for ref in find_references(text)]
    edges, unresolved = resolve_references(refs, ReferenceIndex([NOTE, *nodes]))
    assert not [edge for edge in edges if edge.dst.startswith("symbol:")]
    assert not unresolved


@pytest.mark.parametrize(("target", "expected"), [
    ("UserService.createUser", key(JAVA, "UserService.createUser")),
    ("com.shop.UserService.createUser", key(JAVA, "UserService.createUser")),  # package
    ("user_service.create_user", key("app/user_service.py", "create_user")),  # module
    ("app.parser.parse_file", key("app/parser.py", "parse_file")),
    ("Parser.parse_file", key("app/parser.py", "parse_file")),   # a module in any case
    ("createUser", key(JAVA, "UserService.createUser")),
    ("parse_file", key("app/parser.py", "parse_file")),
    ("UserService", key(JAVA, "UserService")),   # not its constructor inside it
])
def test_each_form_resolves_to_the_one_symbol_it_names(target, expected):
    assert ReferenceIndex(code_nodes()).resolve(SYMBOL, target) == ((expected,), "resolved")


def test_a_symbol_in_two_configured_copies_of_a_repository_resolves_to_both():
    index = ReferenceIndex(code_nodes() + code_nodes("shop-mirror"))
    assert index.resolve(SYMBOL, "parse_file") == ((
        symbol_key("shop-mirror", "app/parser.py", "parse_file"),
        key("app/parser.py", "parse_file")), "resolved")


def test_an_ambiguous_name_lists_its_candidates_and_an_unknown_one_is_dropped():
    index = ReferenceIndex(code_nodes())
    assert index.resolve(SYMBOL, "get") == (tuple(sorted((
        key("app/user_service.py", "Cache.get"), key("app/parser.py", "get"),
        key(JAVA, "UserService.get")))), AMBIGUOUS_SYMBOL)
    assert index.resolve(SYMBOL, "id") == ((), "no_such_symbol")
    many = ReferenceIndex([NOTE, *code_nodes(), *(
        symbol_node("shop", f"app/m{n}.py", "get", "function", 1, 2) for n in range(12))])
    edges, unresolved = resolve_references(
        [reference(SYMBOL, "get"), reference(SYMBOL, "id"), reference(SYMBOL, "createUser")],
        many)
    assert [(row["target"], row["reason"], len(row["candidates"])) for row in unresolved] == [
        ("get", AMBIGUOUS_SYMBOL, CANDIDATES_LISTED)]
    assert [edge.dst for edge in edges] == [key(JAVA, "UserService.createUser")]


@pytest.mark.parametrize(("target", "expected"), [
    (f"{JAVA}:12", (key(JAVA, "UserService.createUser"),)),   # the method holding line 12
    ("UserService.java:4", (key(JAVA, "UserService"),)),       # in the class, in no method
    ("UserService.java:6", (key(JAVA, "UserService.UserService"),)),
    ("app/parser.py:23", (key("app/parser.py", "get"),)),
    ("app/parser.py:21", ("file:shop/app/parser.py",)),        # between its functions
    ("settings.yaml:3", ("file:shop/config/settings.yaml",)),  # a file without symbols
])
def test_path_and_line_resolve_to_the_innermost_symbol_holding_the_line(target, expected):
    assert ReferenceIndex(code_nodes()).resolve(LINE, target) == (expected, "resolved")


def test_a_file_name_several_folders_hold_is_ambiguous():
    index = ReferenceIndex(code_nodes())
    assert index.resolve(LINE, "parser.py:23") == (
        ("file:shop/tests/parser.py", key("app/parser.py", "get")), AMBIGUOUS_SYMBOL)
    assert index.resolve(LINE, "nowhere.py:3") == ((), "no_such_file")


def resolved_mentions(graph, citing_node) -> set[tuple[str, str, str, tuple, str]]:
    """The MENTIONS edges to symbols cross_source_links makes from a source's references."""
    references = [dataclasses.asdict(ref) for ref in graph.references]
    nodes = code_nodes() + [{"node_key": citing_node.key, "type": citing_node.type,
                             "title": citing_node.title, "node_source": citing_node.source,
                             "properties": json.dumps(citing_node.properties, default=str)}]
    edges, _ = resolve_references(references, ReferenceIndex(nodes))
    return {(edge.src, edge.dst, edge.origin, edge.evidence, edge.evidence_text)
            for edge in edges if edge.relation == "MENTIONS"
            and edge.dst.startswith("symbol:")}


def test_cross_source_links_reads_symbol_nodes_and_writes_mentions_and_ambiguities(tmp_path):
    conn = duckdb.connect()
    tables.ensure_schema(conn, tables.SHARED_TABLES)
    nodes = [{**node, "source": "shop"} for node in code_nodes()] + [{**NOTE, "source": "notes"}]
    references = [reference(SYMBOL, "createUser"), reference(SYMBOL, "get"),
                  reference(SYMBOL, "id")]
    for table, rows in ((tables.GRAPH_NODES, nodes), (tables.GRAPH_REFERENCES, references)):
        conn.register("rows", table.frame(rows).to_arrow())
        conn.execute(f"INSERT INTO {table.name} BY NAME SELECT * FROM rows")
        conn.unregister("rows")
    with SqliteGraphStore(tmp_path / "graph.sqlite") as store:
        run = link_sources(lambda: nullcontext(conn), store, origins=1, batch_rows=2)
    assert (run.references, run.edges, run.dangling) == (3, 1, 0)
    assert conn.execute("SELECT src, relation, dst, origin, evidence, evidence_text "
                        "FROM graph_edges").fetchall() == [
        (NOTE["node_key"], "MENTIONS", key(JAVA, "UserService.createUser"),
         f"xref:{NOTE['node_key']}", ["c1"], "the line citing createUser")]
    assert conn.execute("SELECT chunk_id, node_key FROM chunk_mentions").fetchall() == [
        ("c1", key(JAVA, "UserService.createUser"))]
    assert conn.execute("SELECT target, reason, len(candidates) FROM unresolved_references"
                        ).fetchall() == [("get", AMBIGUOUS_SYMBOL, 3)]


def test_a_ticket_links_to_the_symbols_its_text_names():
    ticket = jira_ticket({"key": "SHOP-7", "fields": {
        "summary": "Signup fails", "status": {"name": "Open"},
        "description": "{{createUser}} throws when the cache is cold.\n\n"
                       "Trace: at UserService.java:12\n\nMaybe get() again?"}})
    text = document_text(ticket)
    origin = ticket_key("shop-jira", "SHOP-7")
    graph = extract_ticket_graph("shop-jira", [{**ticket, "text": text}], [
        {"chunk_id": "t1", "doc_key": origin, "char_start": 0, "char_end": len(text)}])
    [node] = [node for node in graph.nodes if node.key == origin]
    method = key(JAVA, "UserService.createUser")
    assert resolved_mentions(graph, node) == {
        (origin, method, f"xref:{origin}", ("t1",), "`createUser` throws when the cache is cold."),
    }


def test_a_note_links_to_the_symbols_its_body_names_outside_code(tmp_path):
    from jarvis_core.text.tokens import token_counter
    from tests.source_helpers import Extracted

    (tmp_path / "vault").mkdir()
    (tmp_path / "vault" / "Design.md").write_text(
        "# Design\n\nSignup goes through `UserService.createUser`, parsing through\n"
        "app/parser.py:3.\n\n```python\nparse_file()\n```\n", "utf-8")
    extracted = Extracted(tmp_path / "vault", token_counter("all-MiniLM-L6-v2"))
    [node] = [node for node in extracted.graph.nodes if node.type == "note"]
    [chunk] = [chunk["chunk_id"] for chunk in extracted.chunks]
    assert resolved_mentions(extracted.graph, node) == {
        (node.key, key(JAVA, "UserService.createUser"), f"xref:{node.key}", (chunk,),
         "Signup goes through `UserService.createUser`, parsing through"),
        (node.key, key("app/parser.py", "parse_file"), f"xref:{node.key}", (chunk,),
         "app/parser.py:3."),   # through the line, not the code block's call
    }


def test_a_commit_message_links_to_the_symbol_it_names():
    sha = "5d24297" + "a" * 33
    when = datetime(2026, 11, 1, 12)
    graph = extract_repo_graph("shop", [{
        "sha": sha, "parents": [], "author_name": "Maya Chen",
        "author_email": "maya.chen@shop.example", "authored_at": when, "committed_at": when,
        "subject": "Speed up parse_file()", "message": "Speed up parse_file()\n\nCaches.\n",
        "additions": 1, "deletions": 1, "files_changed": 1}], [], [], [], [], [])
    [node] = [node for node in graph.nodes if node.type == "commit"]
    assert resolved_mentions(graph, node) == {
        (node.key, key("app/parser.py", "parse_file"), f"xref:{node.key}", (),
         "Speed up parse_file()")}


def test_a_mail_thread_and_a_wiki_page_link_to_the_symbols_they_name(tmp_path):
    from tests.export_helpers import message, rest_page
    from tests.unit.test_mail_page_graph import mail_graph, page_graph

    (tmp_path / "mail").mkdir()
    mail = mail_graph(tmp_path / "mail", message(
        "s1@shop.example", "Signup", "Since Monday it fails in UserService.java:12.\n"))
    page = page_graph(tmp_path, [rest_page("65537", "Signup", "<p>The form calls "
                                           "<code>parse_file</code> first.</p>")])
    for graph, kind, dst in ((mail, "thread", key(JAVA, "UserService.createUser")),
                             (page, "page", key("app/parser.py", "parse_file"))):
        [node] = [node for node in graph.nodes if node.type == kind]
        [(src, target, origin, evidence, _)] = resolved_mentions(graph, node)
        assert (src, target, origin) == (node.key, dst, f"xref:{node.key}") and evidence

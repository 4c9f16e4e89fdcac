"""The code graph of a repository from code-table rows written by hand, as the parser writes
them (jarvis_core/sources/repo/code/model.py): containment, imports per language, name
resolution with its confidence, and which files' fingerprints move when a definition moves."""

import posixpath

import duckdb
import pytest

from jarvis_assets.checks.code import code_edges_without_ends
from jarvis_core.graph.sync import store_in_sync
from jarvis_core.sources import registry
from jarvis_core.sources.repo.code.graph import CodeRows
from jarvis_core.sources.repo.graph import extract_repo_graph
from jarvis_core.sources.repo.kind import REPO as REPO_KIND
from jarvis_core.stores import tables
from jarvis_core.stores.graph.elements import EXPLICIT, INFERRED

REPO = "shop"
LANGUAGES = {".py": "python", ".ts": "typescript", ".tsx": "typescript", ".js": "javascript",
             ".go": "go", ".java": "java"}


def sym(path, symbol_id, kind="function", *, parent=None, line=1, end=None, signature=None):
    name = symbol_id.split("@")[0].split(".")[-1]
    return {"path": path, "symbol_id": symbol_id, "kind": kind, "name": name,
            "qualified_name": symbol_id.split("@")[0],
            "signature": signature or f"def {name}():", "start_line": line,
            "end_line": end or line + 3, "parent": parent,
            "language": LANGUAGES[posixpath.splitext(path)[1]]}


def ref(path, kind, name, qualifier=None, scope=None, line=1):
    return {"path": path, "kind": kind, "name": name, "qualifier": qualifier, "scope": scope,
            "line": line}


def extract(paths, symbols=(), references=(), chunks=()):
    files = [{"path": p, "language": LANGUAGES[posixpath.splitext(p)[1]]} for p in paths]
    return extract_repo_graph(REPO, [], [], [{"path": p, "language": "Python"} for p in paths],
                              [], [], list(chunks),
                              code=CodeRows(files, list(symbols), list(references)))


def edges(graph, relation):
    return {(e.src, e.dst): e for e in graph.edges if e.relation == relation}


def f(path):
    return f"file:{REPO}/{path}"


def s(path, symbol_id):
    return f"symbol:{REPO}/{path}::{symbol_id}"


def test_contains_follows_nesting_with_the_signature_line_and_the_symbol_chunk():
    path = "app/service.py"
    graph = extract([path], [
        sym(path, "Service", "class", line=3, end=20, signature="class Service:"),
        sym(path, "Service.create", "method", parent="Service", line=5, end=12,
            signature="def create(self, name):"),
        sym(path, "Service.create.check", parent="Service.create", line=7, end=9),
        sym(path, "main", line=22)],
        chunks=[{"chunk_id": "c-create", "doc_key": f"code:{REPO}/{path}::Service.create",
                 "path": path, "char_start": 0, "char_end": 80}])
    contains = edges(graph, "CONTAINS")
    assert set(contains) == {(f(path), s(path, "Service")), (f(path), s(path, "main")),
                             (s(path, "Service"), s(path, "Service.create")),
                             (s(path, "Service.create"), s(path, "Service.create.check"))}
    create = contains[(s(path, "Service"), s(path, "Service.create"))]
    assert create.evidence_text == "app/service.py:5  def create(self, name):"
    assert create.evidence == ("c-create",) and create.origin == f(path)
    assert contains[(f(path), s(path, "Service"))].evidence == ()  # no chunk: none cited
    node = {n.key: n for n in graph.nodes}[s(path, "Service.create")]
    assert (node.type, node.title) == ("symbol", "Service.create")
    assert node.properties == {"kind": "method", "name": "create",
                               "qualified_name": "Service.create", "symbol_id": "Service.create",
                               "signature": "def create(self, name):", "path": path,
                               "start_line": 5, "end_line": 12, "language": "python"}


def test_extends_and_implements_resolve_same_file_imported_elsewhere_or_stay_unresolved():
    files = ["models.py", "other.py", "views.py", "loose.py", "mixins.py", "repo.ts", "svc.ts"]
    graph = extract(files, [
        sym("models.py", "Base", "class"), sym("models.py", "Child", "class", line=10),
        sym("other.py", "Base", "class"), sym("mixins.py", "Audited", "class"),
        sym("views.py", "View", "class", line=3, signature="class View(Base, Audited):"),
        sym("loose.py", "Loose", "class", line=2), sym("loose.py", "Failure", "class", line=9),
        sym("repo.ts", "Repo", "interface"), sym("svc.ts", "UserService", "class", line=2)], [
        ref("models.py", "extends", "Base", scope="Child", line=10),
        ref("views.py", "import", "models", "Base", line=1),
        ref("views.py", "extends", "Base", scope="View", line=3),
        ref("views.py", "extends", "Audited", scope="View", line=3),
        ref("loose.py", "extends", "Base", line=2),  # no scope: the type holding the line
        ref("loose.py", "extends", "Exception", scope="Failure", line=9),
        ref("loose.py", "extends", "metaclass=ABCMeta", scope="Failure", line=9),
        ref("svc.ts", "import", "'./repo'", "Repo", line=1),
        ref("svc.ts", "implements", "Repo<User>", scope="UserService", line=2)])
    extends = edges(graph, "EXTENDS")
    assert {pair: (e.confidence, e.extractor) for pair, e in extends.items()} == {
        (s("models.py", "Child"), s("models.py", "Base")): (EXPLICIT, "code_name_high"),
        (s("views.py", "View"), s("models.py", "Base")): (EXPLICIT, "code_name_high"),
        (s("views.py", "View"), s("mixins.py", "Audited")): (INFERRED, "code_name_medium")}
    assert extends[(s("views.py", "View"), s("models.py", "Base"))].evidence_text == \
        "views.py:3  class View(Base, Audited):"
    assert set(edges(graph, "IMPLEMENTS")) == {(s("svc.ts", "UserService"), s("repo.ts", "Repo"))}
    broken = {(b.origin, b.target): (b.reason, b.candidates, b.line) for b in graph.broken}
    assert broken == {
        (f("loose.py"), "Base"): ("ambiguous", (s("models.py", "Base"), s("other.py", "Base")), 2),
        (f("loose.py"), "Exception"): ("unresolved", (), 9)}


def imports(graph):
    return {(e.src.removeprefix(f"file:{REPO}/"), e.dst.removeprefix(f"file:{REPO}/"))
            for e in graph.edges if e.relation == "IMPORTS"}


def test_python_imports_resolve_modules_packages_roots_and_relative_imports():
    files = ["pkg/__init__.py", "pkg/mod.py", "pkg/sub/__init__.py", "pkg/sub/deep.py",
             "src/app/__init__.py", "src/app/core.py", "main.py", "tools/run.py",
             "tools/gen.py"]
    graph = extract(files, references=[
        ref("main.py", "import", "pkg.mod"), ref("main.py", "import", "pkg", "sub", line=2),
        ref("main.py", "import", "pkg.sub.deep", "thing", line=3),
        ref("main.py", "import", "os", line=4), ref("main.py", "import", "app.core", line=5),
        ref("main.py", "import", "json", "loads", line=6),
        ref("pkg/sub/deep.py", "import", "..", "mod"),
        ref("pkg/sub/deep.py", "import", "..mod", "x", line=2),
        ref("pkg/sub/deep.py", "import", ".", "nothing_here", line=3),
        ref("tools/run.py", "import", "gen")])
    assert imports(graph) == {
        ("main.py", "pkg/mod.py"), ("main.py", "pkg/sub/__init__.py"),
        ("main.py", "pkg/sub/deep.py"), ("main.py", "src/app/core.py"),
        ("pkg/sub/deep.py", "pkg/mod.py"), ("pkg/sub/deep.py", "pkg/sub/__init__.py"),
        ("tools/run.py", "tools/gen.py")}
    main = {n.key: n for n in graph.nodes}[f("main.py")]
    assert main.properties["external_imports"] == ["json", "os"]
    [edge] = [e for e in graph.edges if e.relation == "IMPORTS" and e.dst == f("pkg/mod.py")
              and e.src == f("main.py")]
    assert edge.evidence_text == "main.py:1  import pkg.mod" and edge.confidence == EXPLICIT


def test_script_imports_resolve_relative_paths_extensions_and_index_files():
    files = ["web/app.ts", "web/util.ts", "web/widget.tsx", "lib/index.js", "web/legacy.js"]
    graph = extract(files, references=[
        ref("web/app.ts", "import", "'./util'", "format"),
        ref("web/app.ts", "import", "'../lib'", "lib", line=2),
        ref("web/app.ts", "import", "'./widget.js'", "Widget", line=3),
        ref("web/app.ts", "import", "'react'", "React", line=4),
        ref("web/app.ts", "import", "'./missing'", None, line=5),
        ref("web/legacy.js", "import", "\"./app\"", None)])
    assert imports(graph) == {("web/app.ts", "web/util.ts"), ("web/app.ts", "lib/index.js"),
                              ("web/app.ts", "web/widget.tsx"), ("web/legacy.js", "web/app.ts")}


def test_go_imports_are_packages_by_folder_and_qualified_calls_resolve_into_them():
    files = ["internal/store/store.go", "internal/store/cache.go",
             "internal/store/store_test.go", "cmd/server/main.go"]
    cache, store = "internal/store/cache.go", "internal/store/store.go"
    graph = extract(files, [
        sym(cache, "Cache", "struct", signature="type Cache struct {"),
        sym(store, "Cache.Get", "method", parent="*Cache", line=3,
            signature="func (c *Cache) Get(key string) string {"),
        sym(cache, "Cache.Refresh", "method", parent="Cache", line=8,
            signature="func (c *Cache) Refresh() {"),
        sym(cache, "Open", signature="func Open() *Cache {"),
        sym("cmd/server/main.go", "Open", signature="func Open() {"),
        sym("cmd/server/main.go", "main", line=10, end=20, signature="func main() {")], [
        ref("cmd/server/main.go", "import", '"github.com/acme/shop/internal/store"'),
        ref("cmd/server/main.go", "import", '"fmt"', line=2),
        ref("cmd/server/main.go", "call", "Open", "store", scope="main", line=12),
        ref("cmd/server/main.go", "call", "Println", "fmt", scope="main", line=13),
        ref(cache, "call", "Get", "c", scope="Cache.Refresh", line=9)])  # c: the receiver
    assert imports(graph) == {("cmd/server/main.go", "internal/store/store.go"),
                              ("cmd/server/main.go", "internal/store/cache.go")}
    calls = edges(graph, "CALLS")
    assert {pair: e.confidence for pair, e in calls.items()} == {
        (s("cmd/server/main.go", "main"), s(cache, "Open")): EXPLICIT,
        (s(cache, "Cache.Refresh"), s(store, "Cache.Get")): EXPLICIT}
    assert calls[(s("cmd/server/main.go", "main"), s(cache, "Open"))].evidence_text == \
        "cmd/server/main.go:12  store.Open()"
    # a method of a type declared in another file of the package is its own file's
    assert (f(store), s(store, "Cache.Get")) in edges(graph, "CONTAINS")


def test_java_imports_by_package_path_and_names_seen_through_the_package_and_this():
    root = "src/main/java/com/x"
    service, base, audit = f"{root}/service/UserService.java", f"{root}/repo/BaseRepo.java", \
        f"{root}/service/Audit.java"
    strings, user = f"{root}/util/Strings.java", f"{root}/model/User.java"
    graph = extract([service, base, audit, strings, user], [
        sym(service, "UserService", "class", line=5, end=30),
        sym(service, "UserService.create", "method", parent="UserService", line=8, end=20),
        sym(base, "BaseRepo", "class"), sym(base, "BaseRepo.save", "method", parent="BaseRepo"),
        sym(audit, "Audit", "class"), sym(strings, "Strings", "class"),
        sym(strings, "Strings.join", "method", parent="Strings"), sym(user, "User", "class")], [
        ref(service, "import", "com.x.repo.BaseRepo"),
        ref(service, "import", "static com.x.util.Strings.join", line=2),
        ref(service, "import", "com.x.model.*", line=3),
        ref(service, "import", "java.util.List", line=4),
        ref(service, "extends", "BaseRepo", scope="UserService", line=5),
        ref(service, "call", "save", scope="UserService.create", line=9),  # this.save()
        ref(service, "call", "Audit", scope="UserService.create", line=10),  # new Audit()
        ref(service, "call", "User", scope="UserService.create", line=11)])
    assert imports(graph) == {(service, base), (service, strings), (service, user)}
    create = s(service, "UserService.create")
    assert {(e.src, e.dst): e.confidence for e in graph.edges if e.relation == "CALLS"} == {
        (create, s(base, "BaseRepo.save")): EXPLICIT, (create, s(audit, "Audit")): EXPLICIT,
        (create, s(user, "User")): EXPLICIT}
    assert set(edges(graph, "EXTENDS")) == {(s(service, "UserService"), s(base, "BaseRepo"))}


def test_calls_are_high_when_exact_medium_when_unique_elsewhere_and_ambiguous_otherwise():
    files = ["app.py", "util.py", "text.py", "a.py", "b.py", "far.py"]
    graph = extract(files, [
        sym("app.py", "helper"), sym("app.py", "run", line=10, end=30),
        sym("util.py", "fmt"), sym("text.py", "fmt"),
        sym("a.py", "dup"), sym("b.py", "dup"), sym("far.py", "unique_elsewhere"),
        sym("far.py", "Joiner", "class", line=5), sym("far.py", "Joiner.join", "method",
                                                     parent="Joiner", line=6)], [
        ref("app.py", "import", "util", "fmt"), ref("app.py", "import", "os", line=2),
        ref("app.py", "import", "text", "tx", line=3),  # import text as tx
        ref("app.py", "call", "fmt", "tx", scope="run", line=17),
        ref("app.py", "call", "helper", scope="run", line=11),
        ref("app.py", "call", "fmt", scope="run", line=12),
        ref("app.py", "call", "unique_elsewhere", scope="run", line=13),
        ref("app.py", "call", "dup", scope="run", line=14),
        ref("app.py", "call", "print", scope="run", line=15),
        ref("app.py", "call", "join", "os.path", scope="run", line=16),
        ref("app.py", "call", "helper", line=40)], chunks=[
        {"chunk_id": "c-run", "doc_key": f"code:{REPO}/app.py::run", "path": "app.py",
         "char_start": 0, "char_end": 100}])
    run = s("app.py", "run")
    calls = {(e.src, e.dst): (e.confidence, e.extractor) for e in graph.edges
             if e.relation == "CALLS"}
    assert calls == {
        (run, s("app.py", "helper")): (EXPLICIT, "code_name_high"),
        (run, s("util.py", "fmt")): (EXPLICIT, "code_name_high"),
        (run, s("text.py", "fmt")): (EXPLICIT, "code_name_high"),
        (run, s("far.py", "unique_elsewhere")): (INFERRED, "code_name_medium"),
        (f("app.py"), s("app.py", "helper")): (EXPLICIT, "code_name_high")}
    [edge] = [e for e in graph.edges if e.src == run and e.dst == s("app.py", "helper")]
    assert edge.evidence == ("c-run",) and edge.evidence_text == "app.py:11  helper()"
    [ambiguous] = graph.broken
    assert (ambiguous.origin, ambiguous.target, ambiguous.reason, ambiguous.line) == \
        (f("app.py"), "dup()", "ambiguous", 14)
    assert ambiguous.candidates == (s("a.py", "dup"), s("b.py", "dup"))
    assert ambiguous.evidence == ("c-run",)


def test_self_calls_resolve_in_the_enclosing_class_then_its_bases():
    path = "models.py"
    graph = extract([path, "other.py"], [
        sym(path, "Store", "class", line=1, end=20),
        sym(path, "Store.save", "method", parent="Store", line=2),
        sym(path, "Store.run", "method", parent="Store", line=5, end=9),
        sym(path, "Store.run.inner", parent="Store.run", line=6),
        sym(path, "Cached", "class", line=21, end=40),
        sym(path, "Cached.go", "method", parent="Cached", line=22),
        sym("other.py", "Queue", "class"), sym("other.py", "Queue.save", "method",
                                             parent="Queue", line=2),
        sym("other.py", "Queue.flush", "method", parent="Queue", line=5)], [
        ref(path, "call", "save", "self", scope="Store.run.inner", line=7),
        ref(path, "extends", "Store", scope="Cached", line=21),
        ref(path, "call", "save", "self", scope="Cached.go", line=23),
        ref(path, "call", "flush", "self", scope="Cached.go", line=24)])
    calls = {(e.src, e.dst): e.confidence for e in graph.edges if e.relation == "CALLS"}
    assert calls == {
        (s(path, "Store.run.inner"), s(path, "Store.save")): EXPLICIT,
        (s(path, "Cached.go"), s(path, "Store.save")): EXPLICIT,  # inherited
        (s(path, "Cached.go"), s("other.py", "Queue.flush")): INFERRED}


def test_a_moved_callee_rewrites_its_callers_and_nothing_else():
    files = ["a.py", "b.py", "c.py", "d.py"]
    caller = [sym("a.py", "run"), sym("d.py", "alone")]
    calls = [ref("a.py", "call", "helper", scope="run", line=2)]
    before = extract(files, [*caller, sym("b.py", "helper")], calls)
    after = extract(files, [*caller, sym("c.py", "helper")], calls)
    moved = {origin for origin, fingerprint in after.fingerprints.items()
             if before.fingerprints[origin] != fingerprint}
    assert moved == {f("a.py"), f("b.py"), f("c.py")}
    assert set(before.fingerprints) == {f(p) for p in files}
    longer = extract(files, [*caller, sym("b.py", "helper", end=30)], calls)
    assert {o for o, fp in longer.fingerprints.items() if before.fingerprints[o] != fp} == \
        {f("b.py")}  # a symbol's node is its file's: a longer body rewrites that file


def test_the_store_is_in_sync_without_document_nodes_for_source_files():
    previous = {"commit:shop/abc": "1", f("a.py"): "2", "repo_doc:shop/README.md": "3"}
    assert store_in_sync({"commit:shop/abc", "repo_doc:shop/README.md"}, previous)
    assert not store_in_sync({"commit:shop/abc"}, previous)


@pytest.fixture
def conn():
    with duckdb.connect() as connection:
        tables.ensure_schema(connection, registry.declared_tables())
        yield connection


def test_code_checks_pass_on_a_whole_graph_and_fail_on_a_missing_end_or_a_stale_symbol(conn):
    conn.execute("INSERT INTO repo_files (source, path) VALUES ('shop', 'a.py')")
    conn.execute("INSERT INTO code_symbols (source, path, symbol_id) VALUES "
                 "('shop', 'a.py', 'run'), ('shop', 'gone.py', 'old'), ('shop', 'gone.py', 'x')")
    for key, kind in ((f("a.py"), "file"), (s("a.py", "run"), "symbol"),
                      (s("a.py", "helper"), "symbol")):
        conn.execute("INSERT INTO graph_nodes (source, node_key, type) VALUES ('shop', ?, ?)",
                     [key, kind])
    edge = ("INSERT INTO graph_edges (source, origin, src, dst, relation) "
            "VALUES ('shop', ?, ?, ?, ?)")
    conn.execute(edge, [f("a.py"), s("a.py", "run"), s("a.py", "helper"), "CALLS"])
    conn.execute(edge, [f("a.py"), f("a.py"), s("a.py", "helper"), "CALLS"])
    assert code_edges_without_ends(conn, "shop") == []
    conn.execute(edge, [f("a.py"), s("a.py", "run"), s("b.py", "gone"), "CALLS"])
    conn.execute(edge, [f("a.py"), f("a.py"), s("a.py", "helper"), "EXTENDS"])  # a file: wrong
    assert [(r["relation"], r["dst"]) for r in code_edges_without_ends(conn, "shop")] == [
        ("CALLS", s("b.py", "gone")), ("EXTENDS", s("a.py", "helper"))]
    assert code_edges_without_ends(conn, "other") == []
    [at_head] = [check for check in REPO_KIND.layers[0].checks
                 if check.name == "symbol_files_at_head"]
    assert conn.execute(at_head.sql, ["shop"]).fetchall() == [("gone.py", 2)]
    conn.execute("INSERT INTO repo_files (source, path) VALUES ('shop', 'gone.py')")
    assert conn.execute(at_head.sql, ["shop"]).fetchall() == []


def generated(count: int) -> tuple[list[dict], list[dict], list[dict]]:
    """A Python repository of ``count`` files of 10 symbols and 20 references each (what a
    10,000-file repository holds, ~200k references): a class extending the previous file's,
    its methods, functions; calls same-file, imported, on self, unique elsewhere, ambiguous
    (every class has ``process``) and to the standard library."""
    files, symbols, references = [], [], []
    for i in range(count):
        path, previous = f"pkg{i // 100}/mod{i}.py", f"pkg{(i - 1) // 100}.mod{i - 1}"
        files.append({"path": path, "language": "python"})
        symbols += [sym(path, f"C{i}", "class", line=1, end=30),
                    *(sym(path, f"C{i}.{m}", "method", parent=f"C{i}", line=2 + 5 * n)
                      for n, m in enumerate(("m0", "m1", "process"))),
                    *(sym(path, f"f{i}_{n}", line=40 + 5 * n) for n in range(6))]
        scope = f"C{i}.m0"
        references += [
            ref(path, "import", previous, f"C{i - 1}"),
            ref(path, "import", previous, f"f{i - 1}_0"),
            ref(path, "import", "os"), ref(path, "import", "json"),
            ref(path, "extends", f"C{i - 1}", scope=f"C{i}"),
            *(ref(path, "call", "m1", "self", scope=scope, line=3) for _ in range(2)),
            *(ref(path, "call", f"f{i}_{n}", scope=scope, line=4 + n) for n in range(4)),
            ref(path, "call", f"f{i - 1}_0", scope=scope, line=9),
            *(ref(path, "call", f"f{(i * 7 + n) % count}_5", scope=f"f{i}_{n}", line=41 + n)
              for n in range(4)),
            *(ref(path, "call", "process", "item", scope=scope, line=12) for _ in range(2)),
            ref(path, "call", "join", "os.path", scope=scope, line=13),
            ref(path, "call", "dumps", "json", scope=scope, line=14),
            ref(path, "call", f"C{i - 1}", scope=f"f{i}_5", line=60)]
    return files, symbols, references

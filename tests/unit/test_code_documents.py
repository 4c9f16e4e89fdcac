"""A code document per symbol, as the repository kind's select makes it: the doc comment
above a definition heads its text (a Python docstring is already in the body), and its
names are what an identifier lookup matches."""

import duckdb

from jarvis_core.sources import registry
from jarvis_core.sources.repo.kind import REPO
from jarvis_core.stores import tables

ROWS = [
    ("a.go", "Foo", "function", "Foo", "Foo", "go", "Foo does the thing.\nSecond line.",
     "func Foo() int {\n\treturn 1\n}"),
    ("b.py", "Shop.run", "method", "run", "Shop.run", "python", "Run it.",
     'def run(self):\n    """Run it."""\n    return 1'),
]


def test_code_documents_carry_their_doc_comment_once_and_their_names():
    [code] = [document for document in REPO.documents if document.name == "code"]
    with duckdb.connect() as conn:
        tables.ensure_schema(conn, registry.declared_tables())
        conn.executemany("INSERT INTO code_symbols (source, path, symbol_id, kind, name, "
                         "qualified_name, language, doc, text) VALUES ('r', ?, ?, ?, ?, ?, ?, "
                         "?, ?)", ROWS)
        documents = {row[0]: row[1:] for row in conn.execute(
            f"SELECT path, doc_key, title, text, names FROM ({code.select}) ORDER BY path",
            ["r"]).fetchall()}
    assert documents["a.go::Foo"] == (
        "code:r/a.go::Foo", "Foo",
        "// Foo does the thing.\n// Second line.\nfunc Foo() int {\n\treturn 1\n}", ["foo"])
    doc_key, title, text, names = documents["b.py::Shop.run"]
    assert (doc_key, title, text.count("Run it.")) == ("code:r/b.py::Shop.run", "Shop.run", 1)
    assert sorted(names) == ["run", "shop.run"]

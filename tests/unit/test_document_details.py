"""What opening a document shows of each kind (``DocumentType.details``) is read from what a
serving version keeps of that kind (``SourceKind.serving``): every details query runs against
a version's tables as publishing makes them, none against a table or column it leaves out."""

import duckdb
import pytest

from jarvis_core.sources import registry

DOCUMENT_TYPES = [(kind, document) for kind in registry.kinds() for document in kind.documents]


@pytest.fixture(scope="module")
def served():
    """An empty serving version's tables: the working tables copied as publishing copies
    them (into schema ``served``, the working ones dropped after), and nothing else."""
    with duckdb.connect() as conn:
        for table in registry.declared_tables():
            conn.execute(table.create_sql())
        conn.execute("CREATE SCHEMA served")
        for name, sql in registry.published_tables().items():
            conn.execute(f"CREATE TABLE served.{name} AS SELECT * FROM ({sql}) LIMIT 0")
        for table in registry.declared_tables():
            conn.execute(f"DROP TABLE main.{table.name}")
        conn.execute("SET schema = 'served'")
        yield conn


@pytest.mark.parametrize(("kind", "document"), DOCUMENT_TYPES,
                         ids=[document.name for _, document in DOCUMENT_TYPES])
def test_details_read_only_what_a_serving_version_keeps(served, kind, document):
    queries = [document.details.facts, *document.details.lists.values()]
    for sql in filter(None, queries):
        served.execute(sql, ["source", "path"]).fetchall()
    assert document.from_file or document.details.facts, \
        f"{kind.name}'s {document.name} documents open with no facts"


def test_a_detail_left_out_of_the_serving_version_is_caught(served):
    [commit] = [d for kind in registry.kinds() for d in kind.documents if d.name == "commit"]
    served.execute("ALTER TABLE commit_files RENAME TO commit_files_gone")
    try:
        with pytest.raises(duckdb.CatalogException, match="commit_files"):
            served.execute(commit.details.lists["files"], ["source", "path"])
    finally:
        served.execute("ALTER TABLE commit_files_gone RENAME TO commit_files")

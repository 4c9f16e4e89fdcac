"""Profile scoping fails closed: every public attribute of a snapshot, of the vector and graph
stores behind it and of the knowledge base the tools call is listed in jarvis_query/scoped.py
as scoped, shared (with why) or withheld (with why), and a profile's view serves nothing else.
A tiny version with two sources is published with the real stores (tables, Edge vectors,
SQLite graph), no pipeline."""

from types import SimpleNamespace

import duckdb
import numpy as np
import pytest

from jarvis_core.audit import AuditLog, audit_path
from jarvis_core.config import config_from_mapping
from jarvis_core.profiles import resolve_profile
from jarvis_core.sources import registry
from jarvis_core.stores import serving
from jarvis_core.stores.graph.base import GraphStore
from jarvis_core.stores.graph.elements import Edge, Node
from jarvis_core.stores.graph.sqlite import SqliteGraphStore
from jarvis_core.stores.tables import ensure_schema
from jarvis_core.stores.vectors.base import VectorPoint, VectorStore
from jarvis_core.stores.vectors.edge import EdgeVectorStore
from jarvis_query.knowledge_base import KnowledgeBase
from jarvis_query.mcp_access import Access, Caller
from jarvis_query.scoped import (
    GRAPH,
    KNOWLEDGE_BASE,
    SNAPSHOT,
    VECTORS,
    NotScoped,
    ScopedGraph,
    ScopedSnapshot,
    ScopedVectors,
    scoped_knowledge_base,
)
from jarvis_query.snapshot import open_newest

DIMENSION = 4
# source -> its one document: (chunk id, doc key, title)
DOCUMENTS = {"notes": ("0" * 31 + "1", "note:notes/Plan.md", "Plan"),
             "jira": ("0" * 31 + "2", "ticket:jira/OPS-1", "Secret outage")}


def public(names) -> set[str]:
    return {name for name in names if not name.startswith("_")}


def interface(store: type, *init_arguments) -> set[str]:
    """A store's public attributes: its class's, its annotations' and those its own
    ``__init__`` sets (run on a bare namespace)."""
    probe = SimpleNamespace()
    if store.__init__ is not object.__init__:
        store.__init__(probe, *init_arguments)
    return public([*dir(store), *getattr(store, "__annotations__", {}), *vars(probe)])


def unlisted(surface, names: set[str]) -> dict[str, set[str]]:
    listed = surface.scoped | set(surface.shared) | set(surface.withheld)
    return {"neither scoped, shared nor withheld": names - listed,
            "listed but gone": listed - names}


def _publish(data_dir, staging) -> dict:
    """Each source's document as tables, vectors and graph in ``staging``; the manifest."""
    with duckdb.connect(str(staging / serving.SERVING_TABLES_FILE)) as conn:
        ensure_schema(conn, registry.declared_tables())
        for source, (chunk_id, key, title) in DOCUMENTS.items():
            conn.execute("INSERT INTO chunks (chunk_id, source, source_type, doc_key, path, "
                         "title, position, text) VALUES (?, ?, 'note', ?, ?, ?, 0, ?)",
                         [chunk_id, source, key, key.split("/", 1)[1], title, title])
            conn.execute("INSERT INTO graph_nodes (source, node_key, type, title, node_source)"
                         " VALUES (?, ?, 'note', ?, ?)", [source, key, title, source])
    with EdgeVectorStore(data_dir / "work", "chunks", DIMENSION, "test/model") as vectors:
        vectors.upsert([VectorPoint(chunk_id, np.eye(DIMENSION)[number], {"source": source})
                        for number, (source, (chunk_id, _, _)) in enumerate(DOCUMENTS.items())])
        vectors.publish_copy(staging / serving.VECTORS_DIR)
    with SqliteGraphStore(data_dir / "graph.sqlite") as graph:
        graph.apply([], [Node(key, "note", title, source)
                         for source, (_, key, title) in DOCUMENTS.items()],
                    [Edge(DOCUMENTS["notes"][1], DOCUMENTS["jira"][1], "LINKS_TO", "EXPLICIT",
                          "wikilink", DOCUMENTS["notes"][1], "notes", (), "[[OPS-1]]")])
        graph.publish_copy(staging / serving.GRAPH_FILE)
    return {"model": "test/model", "dimension": DIMENSION, "vector_backend": "edge",
            "collection": "chunks", "graph_backend": "embedded", "chunks": 2,
            "vectors": {"notes": 1, "jira": 1}, "keyword": {"notes": 1, "jira": 1},
            "vectors_complete": True}


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("scoping")
    (tmp_path / "notes").mkdir()
    config = config_from_mapping({"data_dir": "data", "vaults": {"notes": "notes"},
                                  "tickets": {"jira": "jira"},
                                  "profiles": {"personal": ["notes"]}}, base_dir=tmp_path)
    name, staging = serving.begin_version(config.data_dir)
    serving.commit_version(config.data_dir, name, staging, _publish(config.data_dir, staging))
    snapshot = open_newest(config, name)
    scoped = ScopedSnapshot(snapshot, resolve_profile(config, "personal"))
    yield config, snapshot, scoped
    scoped.close()
    snapshot.close()


def test_every_public_attribute_is_scoped_shared_or_withheld(published):
    config, snapshot, _ = published
    surfaces = [(SNAPSHOT, public(dir(snapshot))),
                (VECTORS, interface(VectorStore, "chunks", DIMENSION, "test/model")),
                (GRAPH, interface(GraphStore)),
                (KNOWLEDGE_BASE, public(dir(KnowledgeBase(config))))]
    for surface, names in surfaces:
        assert unlisted(surface, names) == {"neither scoped, shared nor withheld": set(),
                                            "listed but gone": set()}, surface.store
        assert not surface.scoped & set(surface.shared) | set(surface.shared) & set(
            surface.withheld) | surface.scoped & set(surface.withheld), surface.store
        assert all(surface.shared.values()) and all(surface.withheld.values())


def test_a_view_answers_its_scoped_attributes_itself(published):
    config, _, scoped = published
    assert public(dir(scoped)) == SNAPSHOT.scoped  # dir() lists no forwarded attribute
    assert public(dir(ScopedVectors)) == VECTORS.scoped
    assert public(dir(ScopedGraph)) == GRAPH.scoped
    kb = KnowledgeBase(config)
    view = scoped_knowledge_base(kb, resolve_profile(config, "personal"))
    for name in KNOWLEDGE_BASE.scoped:
        assert getattr(view, name) is not getattr(kb, name), name


def test_what_is_not_listed_raises_on_every_view(published, monkeypatch):
    _, snapshot, scoped = published
    monkeypatch.setattr(snapshot, "every_source", "an attribute added tomorrow", raising=False)
    with pytest.raises(NotScoped, match=r"snapshot\.every_source is not scoped: a profile's "
                                        r"snapshot serves only the attributes"):
        _ = scoped.every_source
    with pytest.raises(NotScoped, match=r"snapshot\.tables is not scoped: the connection"):
        _ = scoped.tables
    assert scoped.model == snapshot.model == "test/model"  # shared
    assert isinstance(scoped.vectors, ScopedVectors)
    for store, name in [(scoped.vectors, "count"), (scoped.vectors, "counts_by_source"),
                        (scoped.vectors, "an_added_method"), (scoped.graph(), "counts"),
                        (scoped.graph(), "document_keys"), (scoped.graph(), "an_added_method")]:
        with pytest.raises(NotScoped, match=rf"\.{name} is not scoped"):
            getattr(store, name)


def test_the_views_hold_the_profile_s_sources_only(published):
    _, snapshot, scoped = published
    assert scoped.version.manifest["vectors"] == scoped.version.manifest["keyword"] == {
        "notes": 1}
    assert scoped.version.manifest["chunks"] == 1 and snapshot.version.manifest["chunks"] == 2
    assert scoped.embeddings == {"complete": True, "done": 1, "total": 1, "message": None}
    assert snapshot.embeddings["done"] == snapshot.embeddings["total"] == 2
    hits = scoped.vectors.search(np.ones(DIMENSION), limit=10)
    assert [hit.chunk_id for hit in hits] == [DOCUMENTS["notes"][0]]
    assert scoped.graph().node(DOCUMENTS["jira"][1]) is None
    assert snapshot.graph().node(DOCUMENTS["jira"][1]) is not None


def test_the_tools_router_serves_what_the_knowledge_base_surface_lists(published):
    config, _, _ = published
    kb = KnowledgeBase(config)
    audit = AuditLog(audit_path(config.data_dir), config.audit)
    access = Access(kb, audit, resolve_profile(config, "personal"))
    with pytest.raises(NotScoped, match=r"knowledge base\.vault_contexts is not scoped"):
        _ = access.router.vault_contexts  # withheld
    with pytest.raises(NotScoped, match=r"knowledge base\.people is not scoped"):
        _ = access.router.people  # unlisted
    with pytest.raises(RuntimeError, match="no MCP call"):
        _ = access.router.config  # listed, but outside a call
    caller = Caller("test", resolve_profile(config, "personal"), "stdio", None)
    assert access.as_caller(caller, lambda router: router.config.source_names) == ["notes"]
    assert access.as_caller(caller, lambda router: router.snapshots.current().version
                            .manifest["vectors"]) == {"notes": 1}
    audit.close()
    kb.close()

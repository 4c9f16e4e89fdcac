"""A published version as a client with a restricted profile sees it: every store narrowed to
the profile's sources in one place each, so no tool can return a document, node, edge, title
or count of another source, whatever it is asked.

- Tables: the version's DuckDB file is attached read-only to a private in-memory database
  whose views shadow every table under its own name, keeping the rows of the profile's
  sources. So every query of the query side (lookup, reading, GraphRAG, analytics, listings)
  runs unchanged and sees only those rows. Graph nodes are visible when a source of the
  profile produced them (documents of other sources never are); an edge is visible when its
  origin's source is in the profile and both its ends are visible, so an edge to a ticket of
  another source is gone, key and all. The views are built once per version and profile
  (~30 ms); a cursor costs nothing more.
- Vectors and the keyword index: every retriever narrows its filters through
  ``Snapshot.restrict``, which a scoped snapshot answers with the profile's sources.
- The graph store: neighbourhoods are walked over visible nodes and edges only, and a shared
  node (a tag, a person) shows the title the profile's own sources gave it.
- The version: its manifest's per-source figures keep the profile's sources only.

Scoping fails closed. Each store's view serves the attributes its ``Surface`` below lists
(SNAPSHOT, VECTORS, GRAPH, and KNOWLEDGE_BASE for the tools' router in mcp_access.py): the
scoped ones it answers itself, the shared ones it hands on with the reason that is safe. Any
other attribute, one added to the store tomorrow included, raises ``NotScoped``;
tests/unit/test_scoping_surface.py fails until a new attribute is listed here.
"""

from __future__ import annotations

import copy
import json
import threading
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cached_property

import duckdb

from jarvis_core.profiles import Profile
from jarvis_core.stores.graph.base import GraphNodeNotFound, NodeView, Subgraph
from jarvis_core.stores.serving import PublishedVersion
from jarvis_core.stores.vectors.filters import VectorFilter
from jarvis_query.context import VaultContexts
from jarvis_query.results import sql_strings
from jarvis_query.snapshot import Retired, embeddings_progress

PUBLISHED = "published"  # the catalog name the version's tables are attached under
WIDEN = 4                # a scoped neighbourhood reads this many times the nodes first ...
MIN_WIDE = 2000          # ... and at least this many, since hidden nodes take places


class NotScoped(AttributeError):
    """An attribute a profile's view of a store does not serve."""


@dataclass(frozen=True)
class Surface:
    """The public attributes of a store (its class's and those its ``__init__`` sets), as a
    profile's view of it serves them: ``scoped`` ones the view answers itself, over the
    profile's sources; ``shared`` ones it hands on as the store answers them, each with why
    that shows nothing of another source; ``withheld`` ones it never serves, each with why.
    Anything else is not served either."""

    store: str
    scoped: frozenset[str]
    shared: Mapping[str, str]
    withheld: Mapping[str, str]

    def refusal(self, name: str) -> NotScoped:
        reason = self.withheld.get(name) or (
            f"a profile's {self.store} serves only the attributes jarvis_query/scoped.py "
            "lists as scoped or shared")
        return NotScoped(f"{self.store}.{name} is not scoped: {reason}")


_RETRIEVER = ("a retriever: it reads only the snapshot it is handed, the profile's, and "
              "narrows each search through that snapshot's restrict")
_QUERY = "a query: it reads through the knowledge base's config and snapshots, the profile's"
_WHOLE_STORE = "reads over every source (ids, counts, stored vectors): the pipeline's, not a tool's"
_WRITES = "writes: a published version is read-only"

SNAPSHOT = Surface(
    "snapshot",
    scoped=frozenset({"close", "config", "cursor", "embeddings", "graph", "restrict",
                      "restrict_sources", "vectors", "version"}),
    shared={"model": "the embedding model's name: one model embeds every source of a version",
            "skipped": "newer versions that could not be read: their names, states and reasons",
            "table_names": "the names of the version's tables: the profile's views carry the "
                           "same names"},
    withheld={"tables": "the connection to every source's rows: a profile's snapshot reads "
                        "its views through cursor()"})
VECTORS = Surface(
    "vector store",
    scoped=frozenset({"search"}),
    shared={"load": "opens the store's parts before the first search: it returns nothing"},
    withheld={**dict.fromkeys(("upsert", "delete", "optimize", "flush", "drop"), _WRITES),
              **dict.fromkeys(("chunk_ids", "count", "counts_by_source", "check", "vectors"),
                              _WHOLE_STORE),
              **dict.fromkeys(("backend", "collection", "dimension", "model"),
                              "the collection's identity: read from the version's manifest"),
              "close": "the snapshot closes the store it opened"})
GRAPH = Surface(
    "graph store",
    scoped=frozenset({"neighbourhood", "node", "targets"}),
    shared={},
    withheld={"apply": _WRITES,
              **dict.fromkeys(("counts", "document_keys", "dangling_edges"),
                              "figures over every source's nodes and edges: the pipeline's"),
              "close": "the snapshot closes the store it opened"})
# What the tools (mcp_server.py, mcp_assistant.py and the modules they call) may read off the
# knowledge base: ProfileRouter (mcp_access.py) serves the scoped and shared names, from the
# knowledge base scoped_knowledge_base makes for the caller's profile.
KNOWLEDGE_BASE = Surface(
    "knowledge base",
    scoped=frozenset({"config", "snapshots"}),
    shared={**dict.fromkeys(("hybrid", "keyword"), _RETRIEVER),
            **dict.fromkeys(("search_semantic", "search_vault", "search_hybrid",
                             "search_graph", "search_graphrag", "search_code", "get_symbol",
                             "read_note", "list_vaults", "get_vault_context"), _QUERY)},
    withheld={**dict.fromkeys(("dense", "identifiers", "graph", "graphrag"),
                              "a retriever behind the queries: the tools call the queries"),
              "vault_contexts": "get-vault-context's cache (a profile's recounts the "
                                "cross-source figures): the tools call get_vault_context",
              **dict.fromkeys(("close", "load", "load_in_background"),
                              "the serving process's, not a tool's")})


def _views(conn: duckdb.DuckDBPyConnection, profile: Profile) -> None:
    """A view per published table, named as the table, holding the profile's rows."""
    sources = f"({sql_strings(sorted(profile.sources))})" if profile.sources else "(NULL)"
    in_scope = f"source IN {sources}"
    conn.execute(f"""CREATE TABLE visible_nodes AS SELECT DISTINCT node_key
        FROM {PUBLISHED}.main.graph_nodes
        WHERE {in_scope} AND (node_source IS NULL OR node_source IN {sources})""")
    visible = "(SELECT node_key FROM memory.main.visible_nodes)"
    columns: dict[str, set[str]] = defaultdict(set)
    for table, column in conn.execute(
            "SELECT table_name, column_name FROM duckdb_columns() "
            f"WHERE database_name = '{PUBLISHED}' AND schema_name = 'main'").fetchall():
        columns[table].add(column)
    for table, names in sorted(columns.items()):
        condition = in_scope if "source" in names else "false"
        if table == "graph_nodes":
            condition += f" AND (node_source IS NULL OR node_source IN {sources})"
        elif table == "graph_edges":
            condition += f" AND src IN {visible} AND dst IN {visible}"
        elif "node_key" in names:
            condition += f" AND node_key IN {visible}"
        conn.execute(f'CREATE VIEW memory.main."{table}" AS SELECT * FROM '
                     f'{PUBLISHED}.main."{table}" WHERE {condition}')


class ScopedVectors:
    """A version's vector store whose searches keep to the profile's sources: it serves what
    VECTORS lists, nothing else."""

    def __init__(self, vectors, profile: Profile) -> None:
        self._vectors = vectors
        self._profile = profile

    def search(self, vector, limit: int = 10, filters: VectorFilter | None = None,
               score_threshold: float | None = None, payload: Sequence[str] | None = None):
        return self._vectors.search(vector, limit=limit, filters=self._profile.restrict(filters),
                                    score_threshold=score_threshold, payload=payload)

    def __getattr__(self, name: str):
        if name in VECTORS.shared:
            return getattr(self._vectors, name)
        raise VECTORS.refusal(name)


class ScopedGraph:
    """A version's graph store walked over the profile's visible nodes and edges only: it
    serves what GRAPH lists, nothing else."""

    def __init__(self, store, profile: Profile, visible: frozenset[str],
                 shared: dict[str, tuple[str, dict]]) -> None:
        self._store = store
        self._profile = profile
        self._visible = visible
        self._shared = shared  # key -> (title, properties) as the profile's sources wrote them

    def _view(self, node: NodeView) -> NodeView:
        if node.source is None and node.key in self._shared:
            title, properties = self._shared[node.key]
            return replace(node, title=title, properties=properties)
        return node

    def _edge_visible(self, edge) -> bool:
        return (self._profile.allows(edge.source) and edge.src in self._visible
                and edge.dst in self._visible)

    def neighbourhood(self, center: str, depth: int, *, limit: int = 500) -> Subgraph:
        """As ``GraphStore.neighbourhood``, over visible nodes and edges: a node reached only
        through a hidden one is not reached."""
        if center not in self._visible:
            raise GraphNodeNotFound(center)
        wide = self._store.neighbourhood(center, depth, limit=max(limit * WIDEN, MIN_WIDE))
        nodes = {node.key: node for node in wide.nodes if node.key in self._visible}
        edges = [edge for edge in wide.edges if self._edge_visible(edge)]
        neighbours: dict[str, set[str]] = defaultdict(set)
        for edge in edges:
            neighbours[edge.src].add(edge.dst)
            neighbours[edge.dst].add(edge.src)
        distances, ring = {center: 0}, [center]
        for distance in range(1, depth + 1):
            ring = [other for key in ring for other in sorted(neighbours[key])
                    if other not in distances and other in nodes]
            for other in ring:
                distances.setdefault(other, distance)
        ordered = sorted(distances, key=lambda key: (distances[key], nodes[key].type, key))
        kept = ordered[:limit]
        members = set(kept)
        return Subgraph(center, depth,
                        tuple(replace(self._view(nodes[key]), distance=distances[key])
                              for key in kept),
                        tuple(edge for edge in edges
                              if edge.src in members and edge.dst in members),
                        wide.truncated or len(ordered) > limit)

    def node(self, key: str) -> NodeView | None:
        found = self._store.node(key) if key in self._visible else None
        return self._view(found) if found is not None else None

    def targets(self, sources, relation: str) -> dict[str, list[NodeView]]:
        found = self._store.targets([key for key in sources if key in self._visible], relation)
        kept = {key: [self._view(node) for node in nodes if node.key in self._visible]
                for key, nodes in found.items()}
        return {key: nodes for key, nodes in kept.items() if nodes}

    def __getattr__(self, name: str):
        if name in GRAPH.shared:
            return getattr(self._store, name)
        raise GRAPH.refusal(name)


class ScopedSnapshot:
    """A snapshot (jarvis_query/snapshot.py) narrowed to a profile: it serves what SNAPSHOT
    lists, nothing else."""

    def __init__(self, snapshot, profile: Profile) -> None:
        self._unscoped = snapshot
        self._profile = profile
        self.config = profile.configuration(snapshot.config)
        self._tables = duckdb.connect(":memory:")
        self._graph: ScopedGraph | None = None
        self._lock = threading.Lock()
        try:
            self._tables.execute(f"ATTACH '{snapshot.version.tables_path}' AS {PUBLISHED} "
                                 "(READ_ONLY)")
            _views(self._tables, profile)
        except BaseException:
            self._tables.close()
            raise

    def __getattr__(self, name: str):
        if name in SNAPSHOT.shared:
            return getattr(self._unscoped, name)
        raise SNAPSHOT.refusal(name)

    @cached_property
    def version(self) -> PublishedVersion:
        """The published version with the manifest the profile sees: each per-source figure
        (a map by source, such as vectors per source) of the profile's sources only and
        ``chunks`` counted over them; the version-wide entries (model, backends, settings,
        times) as published."""
        version = self._unscoped.version
        (chunks,) = self.cursor().execute("SELECT count(*) FROM chunks").fetchone()
        manifest = {key: {source: figure for source, figure in value.items()
                          if self._profile.allows(source)} if isinstance(value, dict) else value
                    for key, value in version.manifest.items()}
        return replace(version, manifest={**manifest, "chunks": chunks})

    @cached_property
    def embeddings(self) -> dict:
        """The embeddings progress of the profile's sources."""
        return embeddings_progress(self.version.manifest)

    def cursor(self) -> duckdb.DuckDBPyConnection:
        return self._tables.cursor()

    def restrict(self, filters: VectorFilter | None) -> VectorFilter | None:
        return self._profile.restrict(filters)

    def restrict_sources(self, sources: list[str] | None) -> list[str] | None:
        return self._profile.restrict_sources(sources)

    @property
    def vectors(self) -> ScopedVectors:
        return ScopedVectors(self._unscoped.vectors, self._profile)

    def graph(self) -> ScopedGraph:
        store = self._unscoped.graph()  # raises what the snapshot raises when unavailable
        with self._lock:
            if self._graph is None:
                cursor = self.cursor()
                visible = frozenset(key for (key,) in cursor.execute(
                    "SELECT node_key FROM visible_nodes").fetchall())
                shared = {key: (title, properties) for key, title, properties in cursor.execute(
                    "SELECT node_key, any_value(title), any_value(properties) FROM graph_nodes "
                    "WHERE node_source IS NULL GROUP BY node_key").fetchall()}
                self._graph = ScopedGraph(store, self._profile, visible,
                                          {key: (title, _properties(text))
                                           for key, (title, text) in shared.items()})
            return self._graph

    def close(self) -> None:
        with self._lock:
            self._tables.close()


def _properties(text: str | None) -> dict:
    try:
        value = json.loads(text) if text else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


class ScopedSnapshots:
    """The current snapshot narrowed to a profile, built once per published version; the
    one it replaces stays open a while, as SnapshotProvider's do (``Retired``)."""

    def __init__(self, snapshots, profile: Profile) -> None:
        self._unscoped = snapshots
        self._profile = profile
        self._current: ScopedSnapshot | None = None
        self._retired = Retired()
        self._lock = threading.Lock()

    def current(self) -> ScopedSnapshot:
        snapshot = self._unscoped.current()
        with self._lock:
            if self._current is None or self._current._unscoped is not snapshot:  # a switch
                fresh = ScopedSnapshot(snapshot, self._profile)
                self._retired.retire(self._current)
                self._current = fresh
            return self._current

    def damaged(self, snapshot: ScopedSnapshot, exc: BaseException) -> None:
        self._unscoped.damaged(snapshot._unscoped, exc)

    def close(self) -> None:
        with self._lock:
            self._retired.close()
            if self._current is not None:
                self._current.close()
            self._current = None


class ScopedVaultContexts(VaultContexts):
    """Analytics of a source in the profile: its own figures as published, its cross-source
    figures recomputed over the profile's rows (the published ones count every source)."""

    def get(self, snapshot: ScopedSnapshot, vault: str) -> dict:
        # imported here: the analytics bring polars, which nothing else at query time needs
        from jarvis_core.analytics.figures import cross_source_figures

        answer = super().get(snapshot._unscoped, vault)
        cross = cross_source_figures(snapshot.cursor(), vault, snapshot.config.analytics.top_n)
        return {**answer, "figures": {**answer["figures"], "cross_source": cross}}


def scoped_knowledge_base(kb, profile: Profile):
    """``kb`` as a client with ``profile`` sees it: the same retrievers and caches, over a
    configuration and snapshots holding only the profile's sources."""
    if not profile.restricted:
        return kb
    scoped = copy.copy(kb)
    scoped.config = profile.configuration(kb.config)
    scoped.snapshots = ScopedSnapshots(kb.snapshots, profile)
    scoped.vault_contexts = ScopedVaultContexts()
    return scoped

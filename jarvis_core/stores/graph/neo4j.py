"""The server graph back end: Neo4j through the official driver."""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from jarvis_core.stores.graph.elements import Edge, Node

if TYPE_CHECKING:
    import neo4j
from jarvis_core.stores.graph.base import (
    DOCUMENT_TYPES,
    NEO4J_BATCH,
    GraphNodeNotFound,
    GraphStore,
    NodeView,
    Subgraph,
    batched,
    dangling_error,
    edge_order,
    node_properties_json,
)

_KEY_CONSTRAINT = "jarvis_node_key"


def node_label(node_type: str) -> str:
    """``note`` -> ``Note``, ``some_type`` -> ``SomeType``: the type label of a node."""
    return re.sub(r"[^A-Za-z0-9]", "", "".join(p.capitalize() for p in node_type.split("_"))) \
        or "Untyped"


_OWN_RELATIONSHIP_TYPE = re.compile(r"[A-Z][A-Z0-9_]*")  # what relationship_type makes


def relationship_type(relation: str) -> str:
    """A relation as a Neo4j relationship type: upper case, [A-Z0-9_], starting with a letter
    (the exact relation is also stored, and read back, as the ``relation`` property)."""
    name = re.sub(r"[^A-Z0-9_]", "_", relation.upper())
    return name if _OWN_RELATIONSHIP_TYPE.fullmatch(name) else f"R_{name}"


def _neo4j_node(node: Node) -> dict:
    properties: dict[str, Any] = {
        f"prop_{name}": value for name, value in node.properties.items()
        if _neo4j_scalar(value)
        or (isinstance(value, list) and value and all(isinstance(v, str) for v in value))}
    properties.update(key=node.key, type=node.type, title=node.title,
                      properties_json=node_properties_json(node))
    if node.source is not None:
        properties["source"] = node.source
    return {"key": node.key, "properties": properties}


def _neo4j_scalar(value: object) -> bool:
    if isinstance(value, bool | str | float):
        return True
    return isinstance(value, int) and -2 ** 63 <= value < 2 ** 63


def _neo4j_edge(edge: Edge) -> dict:
    return {"src": edge.src, "dst": edge.dst, "key": edge.key, "properties": {
        "key": edge.key, "relation": edge.relation, "confidence": edge.confidence,
        "extractor": edge.extractor, "origin": edge.origin, "source": edge.source,
        "evidence": list(edge.evidence), "evidence_text": edge.evidence_text,
        "weight": float(edge.weight)}}


_NODE_RETURN = ("{k}.key AS key, {k}.type AS type, {k}.title AS title, {k}.source AS source, "
                "{k}.properties_json AS properties")


_EDGE_RETURN = ("a.key AS src, b.key AS dst, r.relation AS relation, "
                "r.confidence AS confidence, r.extractor AS extractor, r.origin AS origin, "
                "r.source AS source, r.evidence AS evidence, r.evidence_text AS evidence_text, "
                "r.weight AS weight")


def _node_from_record(record: Any, distance: int | None = None) -> NodeView:
    return NodeView(record["key"], record["type"], record["title"], record["source"],
                    json.loads(record["properties"]), distance)


def _edge_from_record(record: Any) -> Edge:
    return Edge(record["src"], record["dst"], record["relation"], record["confidence"],
                record["extractor"], record["origin"], record["source"],
                tuple(record["evidence"] or ()), record["evidence_text"], float(record["weight"]))


class Neo4jGraphStore(GraphStore):
    """A Neo4j database (Jarvis's own: use ``database`` to keep it apart from other data).

    Every node has the label ``Node`` (unique ``key``) plus its type label (``Note``, ``Tag``
    ...). An edge is a relationship whose type is its relation made safe for Cypher, carrying
    key, relation, origin, source, confidence, extractor, evidence (list of chunk ids),
    evidence_text and weight. Deleting by origin probes one range index on ``origin`` per
    relationship type (Neo4j indexes relationship properties per type), created on first use.
    Garbage collection tests only the nodes the batch touched, so it costs the batch, not the
    graph. ``apply`` is one managed write transaction; rows go in UNWIND batches of
    ``batch_size``. Needs Neo4j 4.4 or later (``CREATE CONSTRAINT ... REQUIRE``).
    """

    def __init__(self, uri: str, user: str, password: str, database: str | None = None, *,
                 batch_size: int = NEO4J_BATCH) -> None:
        import neo4j  # only Neo4j users pay for the driver's import

        self.database = database
        self.batch_size = batch_size
        self._read = neo4j.RoutingControl.READ
        self._driver = neo4j.GraphDatabase.driver(uri, auth=(user, password))
        self._closed = False
        self._indexed_types: set[str] = set()
        try:
            self._driver.verify_connectivity()
            self._schema(f"CREATE CONSTRAINT {_KEY_CONSTRAINT} IF NOT EXISTS "
                         "FOR (n:Node) REQUIRE n.key IS UNIQUE")
        except BaseException:
            self._driver.close()
            raise

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._driver.close()

    def _session(self) -> neo4j.Session:
        return self._driver.session(database=self.database)

    def _schema(self, statement: str) -> None:
        """Schema commands run in their own auto-commit transaction, never beside writes."""
        with self._session() as session:
            session.run(statement).consume()

    def _query(self, statement: str, **parameters: Any) -> list:
        records, _, _ = self._driver.execute_query(statement, parameters, routing_=self._read,
                                                   database_=self.database)
        return records

    # -- writes ------------------------------------------------------------------------

    def _apply(self, removed_origins: list[str], removed_documents: list[str],
               nodes: list[Node], edges: list[Edge]) -> None:
        for rel_type in sorted({relationship_type(e.relation) for e in edges}
                               - self._indexed_types):
            self._schema(f"CREATE INDEX jarvis_origin_{rel_type} IF NOT EXISTS "
                         f"FOR ()-[r:`{rel_type}`]-() ON (r.origin)")
            self._indexed_types.add(rel_type)
        with self._session() as session:
            session.execute_write(self._write, removed_origins, removed_documents, nodes, edges)

    def _write(self, tx: neo4j.ManagedTransaction, removed_origins: list[str],
               removed_documents: list[str], nodes: list[Node], edges: list[Edge]) -> None:
        """The whole batch; the driver re-runs it from the start on a transient error."""
        touched: set[str] = set()
        if removed_origins:
            rel_types = tx.run("CALL db.relationshipTypes() YIELD relationshipType "
                               "RETURN relationshipType").value()
            for rel_type in filter(_OWN_RELATIONSHIP_TYPE.fullmatch, rel_types):
                for origins in batched(removed_origins, self.batch_size):
                    for ends in tx.run(
                            "UNWIND $origins AS origin "
                            f"MATCH (a:Node)-[r:`{rel_type}` {{origin: origin}}]->(b:Node) "
                            "DELETE r RETURN a.key AS src, b.key AS dst", origins=origins):
                        touched.update((ends["src"], ends["dst"]))
        for keys in batched(removed_documents, self.batch_size):
            touched.update(r["key"] for r in tx.run(
                "UNWIND $keys AS k MATCH (n:Node {key: k})--(m:Node) WHERE n.type IN $documents "
                "RETURN DISTINCT m.key AS key", keys=keys, documents=DOCUMENT_TYPES))
            tx.run("UNWIND $keys AS k MATCH (n:Node {key: k}) WHERE n.type IN $documents "
                   "DETACH DELETE n", keys=keys, documents=DOCUMENT_TYPES).consume()
        self._upsert_nodes(tx, nodes)
        self._check_endpoints(tx, nodes, edges)
        by_type: dict[str, list[dict]] = defaultdict(list)
        for edge in edges:
            by_type[relationship_type(edge.relation)].append(_neo4j_edge(edge))
        for rel_type, rows in sorted(by_type.items()):
            for batch in batched(rows, self.batch_size):
                tx.run("UNWIND $rows AS row "
                       "MATCH (a:Node {key: row.src}) MATCH (b:Node {key: row.dst}) "
                       f"MERGE (a)-[r:`{rel_type}` {{key: row.key}}]->(b) "
                       "SET r = row.properties", rows=batch).consume()
        candidates = sorted(touched | {n.key for n in nodes if n.type not in DOCUMENT_TYPES})
        for keys in batched(candidates, self.batch_size):
            tx.run("UNWIND $keys AS k MATCH (n:Node {key: k}) "
                   "WHERE NOT n.type IN $documents AND NOT EXISTS { MATCH (n)--() } DELETE n",
                   keys=keys, documents=DOCUMENT_TYPES).consume()

    def _upsert_nodes(self, tx: neo4j.ManagedTransaction, nodes: list[Node]) -> None:
        """Replace each node's properties and type label (dropping the old one on a change)."""
        retyped: dict[str, list[str]] = defaultdict(list)
        for batch in batched(nodes, self.batch_size):
            for record in tx.run(
                    "UNWIND $rows AS row MATCH (n:Node {key: row.key}) "
                    "WHERE n.type <> row.type RETURN n.key AS key, n.type AS type",
                    rows=[{"key": n.key, "type": n.type} for n in batch]):
                retyped[node_label(record["type"])].append(record["key"])
        for label, keys in sorted(retyped.items()):
            for batch in batched(keys, self.batch_size):
                tx.run(f"UNWIND $keys AS k MATCH (n:Node {{key: k}}) REMOVE n:`{label}`",
                       keys=batch).consume()
        by_label: dict[str, list[dict]] = defaultdict(list)
        for node in nodes:
            by_label[node_label(node.type)].append(_neo4j_node(node))
        for label, rows in sorted(by_label.items()):
            for batch in batched(rows, self.batch_size):
                tx.run("UNWIND $rows AS row MERGE (n:Node {key: row.key}) "
                       f"SET n = row.properties, n:`{label}`", rows=batch).consume()

    def _check_endpoints(self, tx: neo4j.ManagedTransaction, nodes: list[Node],
                         edges: list[Edge]) -> None:
        others = sorted({k for e in edges for k in (e.src, e.dst)} - {n.key for n in nodes})
        present: set[str] = set()
        for keys in batched(others, self.batch_size):
            present.update(r["key"] for r in tx.run(
                "UNWIND $keys AS k MATCH (n:Node {key: k}) RETURN n.key AS key", keys=keys))
        if set(others) - present:
            raise dangling_error(edges, set(others) - present)

    # -- reads -------------------------------------------------------------------------

    def node(self, key: str) -> NodeView | None:
        records = self._query(f"MATCH (n:Node {{key: $key}}) RETURN {_NODE_RETURN.format(k='n')}",
                              key=key)
        return _node_from_record(records[0]) if records else None

    def _neighbourhood(self, center: str, depth: int, limit: int) -> Subgraph:
        with self._session() as session:
            return session.execute_read(self._read_neighbourhood, center, depth, limit)

    def _read_neighbourhood(self, tx: neo4j.ManagedTransaction, center: str, depth: int,
                            limit: int) -> Subgraph:
        """Ring by ring with bounded variable-length patterns: ``RETURN DISTINCT`` lets Neo4j
        prune paths to nodes already found, and a ring past the limit is never searched."""
        if tx.run("MATCH (c:Node {key: $center}) RETURN c.key AS key",
                  center=center).single() is None:
            raise GraphNodeNotFound(center)
        distances = {center: 0}
        for distance in range(1, depth + 1):
            if len(distances) > limit:
                break
            for record in tx.run(f"MATCH (:Node {{key: $center}})-[*1..{distance}]-(n:Node) "
                                 "RETURN DISTINCT n.key AS key", center=center):
                distances.setdefault(record["key"], distance)
        types = {r["key"]: r["type"] for r in tx.run(
            "UNWIND $keys AS k MATCH (n:Node {key: k}) RETURN n.key AS key, n.type AS type",
            keys=list(distances))}
        kept = sorted(distances, key=lambda k: (distances[k], types[k], k))[:limit]
        rows = {r["key"]: r for r in tx.run(
            f"UNWIND $keys AS k MATCH (n:Node {{key: k}}) RETURN {_NODE_RETURN.format(k='n')}",
            keys=kept)}
        edges = sorted((_edge_from_record(r) for r in tx.run(
            f"UNWIND $keys AS k MATCH (a:Node {{key: k}})-[r]->(b:Node) "
            f"WHERE b.key IN $keys RETURN {_EDGE_RETURN}", keys=kept)), key=edge_order)
        nodes = tuple(_node_from_record(rows[k], distances[k]) for k in kept)
        return Subgraph(center, depth, nodes, tuple(edges), len(distances) > limit)

    def targets(self, sources: Iterable[str], relation: str) -> dict[str, list[NodeView]]:
        found: dict[str, list[NodeView]] = defaultdict(list)
        for record in self._query(
                f"UNWIND $keys AS k MATCH (a:Node {{key: k}})"
                f"-[r:`{relationship_type(relation)}`]->(b:Node) WHERE r.relation = $relation "
                f"RETURN DISTINCT k AS src, {_NODE_RETURN.format(k='b')} ORDER BY src, key",
                keys=sorted(set(sources)), relation=relation):
            found[record["src"]].append(_node_from_record(record))
        return dict(found)

    def counts(self) -> dict:
        nodes = self._query("MATCH (n:Node) RETURN n.type AS name, count(*) AS count "
                            "ORDER BY name")
        edges = self._query("MATCH (:Node)-[r]->(:Node) WHERE r.relation IS NOT NULL "
                            "RETURN r.relation AS name, count(*) AS count ORDER BY name")
        return {"nodes": {r["name"]: r["count"] for r in nodes},
                "edges": {r["name"]: r["count"] for r in edges}}

    def document_keys(self, source: str | None = None) -> set[str]:
        return {r["key"] for r in self._query(
            "MATCH (n:Node) WHERE n.type IN $documents "
            "AND ($source IS NULL OR n.source = $source) RETURN n.key AS key",
            source=source, documents=DOCUMENT_TYPES)}

    def dangling_edges(self) -> int:
        """Neo4j cannot store a relationship without its nodes; one of ours can still end at
        a node that is not a keyed ``Node`` (written by something else than ``apply``)."""
        records = self._query("MATCH (a)-[r]->(b) WHERE r.origin IS NOT NULL AND "
                              "NOT (a:Node AND b:Node AND a.key IS NOT NULL AND "
                              "b.key IS NOT NULL) RETURN count(r) AS count")
        return records[0]["count"]

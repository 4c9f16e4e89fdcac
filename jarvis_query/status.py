"""The configured sources and what the published version holds for each: `jarvis status`
(row counts per layer) and list-vaults (`jarvis vaults`). Both read the published version
only, never the pipeline's working database, so they answer while a refresh writes; a version
that cannot be read is named, with whether it is corrupt or locked, and the one before it is
shown."""

from __future__ import annotations

import duckdb

from jarvis_core.config import JarvisConfig
from jarvis_core.sources import registry
from jarvis_core.stores import serving
from jarvis_query.snapshot import Snapshot, open_newest

# layer -> the published table counted for it, after each kind's own (absent from a
# version: counted as 0)
SHARED_LAYERS = {"failed": "ingest_failures", "chunks": "chunks", "nodes": "graph_nodes",
                 "edges": "graph_edges", "broken_links": "graph_broken_links"}


def layer_tables() -> dict[str, str]:
    """Every layer `jarvis status` counts, with its published table: each kind's first."""
    return {**{layer: table for kind in registry.kinds() for layer, table in kind.counts.items()},
            **SHARED_LAYERS}


def layers() -> list[str]:
    return [*layer_tables(), "vectors"]


def published_counts(snapshot: Snapshot) -> dict[str, dict[str, int]]:
    """source -> layer -> rows in the version's tables (and vectors from its manifest)."""
    counts: dict[str, dict[str, int]] = {}
    cursor = snapshot.cursor()
    for layer, table in layer_tables().items():
        if table in snapshot.table_names():
            for source, count in cursor.execute(
                    f"SELECT source, count(*) FROM {table} GROUP BY source").fetchall():
                counts.setdefault(source, {})[layer] = count
    for name, vectors in snapshot.version.manifest.get("vectors", {}).items():
        counts.setdefault(name, {})["vectors"] = vectors
    return counts


def _published(snapshot: Snapshot) -> dict:
    manifest = snapshot.version.manifest
    return {"version": snapshot.version.name, "published_at": manifest["published_at"],
            "model": manifest["model"], "embeddings": snapshot.embeddings,
            # the backend, precision and why (absent from versions before they were noted)
            "embedding": manifest.get("embedding"),
            "unreadable": [problem.as_dict() for problem in snapshot.skipped]}


def store_status(config: JarvisConfig) -> dict:
    """The published version (and any newer one that could not be read); every configured
    source with its kind, path, whether the version holds anything of it, and its row
    counts per layer. NotPublished before the first publish, VersionDamaged when no version
    can be read."""
    name, damaged = serving.current_name(config.data_dir), set()
    while True:
        snapshot = open_newest(config, name, frozenset(damaged))
        try:
            counts = published_counts(snapshot)
            published = _published(snapshot)
            break
        except duckdb.Error as exc:
            from jarvis_core.stores.connections import is_damage

            if not is_damage(exc):
                raise
            damaged.add(snapshot.version.name)  # a table past the damage: the next older one
        finally:
            snapshot.close()
    sources = {name: {"kind": config.source_kind(name), "path": config.sources[name].location}
               for name in config.source_names}
    for name in set(counts) - set(sources):
        sources[name] = {"kind": "unconfigured", "path": None}
    return {
        "data_dir": str(config.data_dir),
        "published": published,
        "sources": [{"name": name, **info, "published": name in counts,
                     **{layer: counts.get(name, {}).get(layer, 0) for layer in layers()}}
                    for name, info in sorted(sources.items())],
        "totals": {layer: sum(c.get(layer, 0) for c in counts.values()) for layer in layers()},
    }


def list_sources(config: JarvisConfig, snapshot: Snapshot | None) -> dict:
    """Every configured source with its kind and location, and what the published version
    (``snapshot``, None before any publish) holds for it: the rows of its kind (notes and
    attachments, commits, tickets, messages and threads, pages), chunks by type, failures,
    when it was last ingested and published."""
    counts: dict[str, dict] = {}
    published = None
    if snapshot is not None:
        published = _published(snapshot)
        counts = published_counts(snapshot)
        cursor = snapshot.cursor()
        for table in {kind.ingested for kind in registry.kinds()}:
            if table in snapshot.table_names():
                for source, last in cursor.execute(
                        f"SELECT source, max(ingested_at) FROM {table} GROUP BY source"
                        ).fetchall():
                    counts.setdefault(source, {})["last_ingested_at"] = (
                        last.isoformat() if last else None)
        for source, source_type, count in cursor.execute(
                "SELECT source, source_type, count(*) FROM chunks GROUP BY ALL ORDER BY ALL"
                ).fetchall():
            counts.setdefault(source, {}).setdefault("by_type", {})[source_type] = count
    sources = []
    for name in config.source_names:
        kind = config.kind_of(name)
        found = counts.get(name, {})
        sources.append({
            "name": name, "kind": kind.name, "path": config.sources[name].location,
            **{layer: found.get(layer, 0) for layer in kind.counts},
            "failed": found.get("failed", 0), "chunks": found.get("by_type", {}),
            "last_ingested_at": found.get("last_ingested_at"),
            "last_refresh": published["published_at"] if published and found else None,
        })
    return {"vaults": [s for s in sources if s["kind"] == "vault"],
            "other_sources": [s for s in sources if s["kind"] != "vault"],
            "published": published}

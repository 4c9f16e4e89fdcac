"""The configured sources and what the published version holds for each: `jarvis status`
(row counts per layer) and list-vaults (`jarvis vaults`). Both read the published version
only, never the pipeline's working database, so they answer while a refresh writes; a version
that cannot be read is named, with whether it is corrupt or locked, and the one before it is
shown."""

from __future__ import annotations

import duckdb

from jarvis_core.config import JarvisConfig
from jarvis_core.stores import serving
from jarvis_query.snapshot import Snapshot, open_newest

# layer -> the published table counted for it (absent from a version: counted as 0)
LAYER_TABLES = {"notes": "notes", "attachments": "attachments", "commits": "commits",
                "repo_files": "repo_files", "repo_docs": "repo_docs", "tickets": "tickets",
                "messages": "mail_messages", "threads": "mail_threads", "pages": "pages",
                "failed": "ingest_failures",
                "chunks": "chunks", "nodes": "graph_nodes", "edges": "graph_edges",
                "broken_links": "graph_broken_links"}
LAYERS = [*LAYER_TABLES, "vectors"]
# source kind -> the layers list-vaults shows for it, and the table of its ingested rows
KIND_LAYERS = {"vault": ("notes", "attachments"), "repo": ("commits", "repo_docs"),
               "tickets": ("tickets",), "mail": ("messages", "threads"),
               "confluence": ("pages",)}
_INGESTED = {"vault": "notes", "repo": "commits", "tickets": "tickets",
             "mail": "mail_messages", "confluence": "pages"}


def source_location(config: JarvisConfig, name: str) -> str:
    """Where a source is read: its folder or file (a repository's checkout, else its URL)."""
    kind = config.source_kind(name)
    if kind == "repo":
        repo = config.repos[name]
        return str(repo.path if repo.path is not None else repo.url)
    sections = {"vault": config.vaults, "tickets": config.tickets, "mail": config.mail,
                "confluence": config.confluence}
    return str(sections[kind][name].path)


def published_counts(snapshot: Snapshot) -> dict[str, dict[str, int]]:
    """source -> layer -> rows in the version's tables (and vectors from its manifest)."""
    counts: dict[str, dict[str, int]] = {}
    cursor = snapshot.cursor()
    for layer, table in LAYER_TABLES.items():
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
    sources = {name: {"kind": config.source_kind(name), "path": source_location(config, name)}
               for name in config.source_names}
    for name in set(counts) - set(sources):
        sources[name] = {"kind": "unconfigured", "path": None}
    return {
        "data_dir": str(config.data_dir),
        "published": published,
        "sources": [{"name": name, **info, "published": name in counts,
                     **{layer: counts.get(name, {}).get(layer, 0) for layer in LAYERS}}
                    for name, info in sorted(sources.items())],
        "totals": {layer: sum(c.get(layer, 0) for c in counts.values()) for layer in LAYERS},
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
        for table in _INGESTED.values():
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
        kind = config.source_kind(name)
        found = counts.get(name, {})
        sources.append({
            "name": name, "kind": kind, "path": source_location(config, name),
            **{layer: found.get(layer, 0) for layer in KIND_LAYERS[kind]},
            "failed": found.get("failed", 0), "chunks": found.get("by_type", {}),
            "last_ingested_at": found.get("last_ingested_at"),
            "last_refresh": published["published_at"] if published and found else None,
        })
    return {"vaults": [s for s in sources if s["kind"] == "vault"],
            "other_sources": [s for s in sources if s["kind"] != "vault"],
            "published": published}

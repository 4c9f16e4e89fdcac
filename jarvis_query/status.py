"""Sources and row counts per layer, read from the stores without writing."""

from __future__ import annotations

import time
from contextlib import contextmanager
from pathlib import Path

import duckdb

from jarvis_core.config import JarvisConfig
from jarvis_core.stores import serving

_LAYER_TABLES = {"notes": "notes", "attachments": "attachments", "commits": "commits",
                 "repo_files": "repo_files", "repo_docs": "repo_docs", "tickets": "tickets",
                 "failed": "ingest_failures",
                 "chunks": "chunks", "nodes": "graph_nodes", "edges": "graph_edges",
                 "broken_links": "graph_broken_links"}


class StoreUnavailable(RuntimeError):
    """The tables cannot be read right now; the message says why."""


@contextmanager
def read_only(database: Path, attempts: int = 20, wait_seconds: float = 0.25):
    """A short read-only connection, retried while a refresh holds the write lock."""
    if not database.exists():
        raise StoreUnavailable(f"no data yet at {database}: run `jarvis refresh` first")
    for attempt in range(attempts):
        try:
            conn = duckdb.connect(str(database), read_only=True)
            break
        except duckdb.IOException as exc:
            if attempt == attempts - 1:
                raise StoreUnavailable(f"{database} is locked by a running refresh: {exc}") from exc
            time.sleep(wait_seconds)
    try:
        yield conn
    finally:
        conn.close()


def _source_path(config: JarvisConfig, name: str) -> Path:
    kind = config.source_kind(name)
    if kind == "repo":
        return config.repo_checkout(name)
    return (config.vaults if kind == "vault" else config.tickets)[name].path


def store_status(config: JarvisConfig) -> dict:
    """Configured sources with their kind and path, and per-source row counts per layer."""
    sources = {name: {"kind": config.source_kind(name), "path": str(_source_path(config, name))}
               for name in config.source_names}
    counts: dict[str, dict[str, int]] = {}
    with read_only(config.duckdb_path) as conn:
        tables = {name for (name,) in
                  conn.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
        for layer, table in _LAYER_TABLES.items():
            rows = conn.execute(f"SELECT source, count(*) FROM {table} GROUP BY source"
                                ).fetchall() if table in tables else []
            for source, count in rows:
                counts.setdefault(source, {})[layer] = count
    try:
        published = serving.current_version(config.data_dir)
        for name, vectors in published.manifest.get("vectors", {}).items():
            counts.setdefault(name, {})["vectors"] = vectors
        version = {"version": published.name, "published_at": published.manifest["published_at"],
                   "model": published.manifest["model"]}
    except serving.NotPublished:
        version = None
    for name in set(counts) - set(sources):
        sources[name] = {"kind": "unconfigured", "path": None}
    layers = [*_LAYER_TABLES, "vectors"]
    return {
        "data_dir": str(config.data_dir),
        "published": version,
        "sources": [{"name": name, **info,
                     **{layer: counts.get(name, {}).get(layer, 0) for layer in layers}}
                    for name, info in sorted(sources.items())],
        "totals": {layer: sum(c.get(layer, 0) for c in counts.values()) for layer in layers},
    }

"""Which sources a refresh must run, decided against the published version without Dagster:
a refresh with nothing to do costs a stat walk per source and one small database read.

A source runs when nothing of it is published, when its content moved since (its kind's
change watch says: notes, a repository head, an export file, by content), when the
configuration or the way Jarvis builds its layers changed (a fingerprint of everything that
shapes the layers is kept in each version's manifest), when the published version is a
partial one (embeddings still being made), or when it left the configuration but still has
published rows."""

from __future__ import annotations

import hashlib
import json

import duckdb

from jarvis_core.config import JarvisConfig
from jarvis_core.embedding_backends import F32, choose_backend
from jarvis_core.sources import registry
from jarvis_core.sources.changes import published_rows
from jarvis_core.sources.kind import SourceUnreachable
from jarvis_core.stores.serving import NotPublished, current_version

_NOT_SHAPING = {"config_path", "schedules", "instance", "resources", "environment"}
# What the layers hold for unchanged input and configuration, raised by a release that
# changes it so that every source runs once after the upgrade (2: a ticket's document and
# node keys carry its source; 3: a repository's source code is parsed into symbols).
LAYERS_VERSION = 3


def settings_fingerprint(config: JarvisConfig) -> str:
    """Everything that shapes what the layers hold: the configuration (sources and their
    settings, chunking, the model and the precision it computes in here, graph, analytics,
    limits) and ``LAYERS_VERSION``; schedules, the device and batch size (speed only), the
    memory budget, the Dagster instance's storages and credentials do not."""
    shaping = config.model_dump(mode="json", exclude=_NOT_SHAPING)
    shaping["layers"] = LAYERS_VERSION
    for speed_only in ("device", "batch_size"):  # the precision they lead to is added below
        del shaping["embedding"][speed_only]
    precision = choose_backend(config.embedding.backend, config.embedding.device).precision
    if precision != F32:  # float32, all that earlier releases embedded in, leaves it as it was
        # ``auto`` on another CPU or device (or a new release) may embed in another
        # precision: a new collection, so every source runs to fill it.
        shaping["embedding"]["precision"] = precision
    shaping["kinds"] = {name: config.source_kind(name) for name in config.source_names}
    return hashlib.sha256(json.dumps(shaping, sort_keys=True).encode()).hexdigest()[:16]


def change_reason(config: JarvisConfig, source: str) -> str | None:
    """Why the source's content needs a run since the published version; None when it
    does not."""
    kind = config.kind_of(source)
    seen = kind.watch.look(source, config.sources[source])
    change = kind.watch.compare(source, seen, config.data_dir)
    return change.reason if change is not None else None


def _published_sources(config: JarvisConfig) -> set[str]:
    """Sources with rows in the published raw tables (a table an older release did not
    publish counts as empty)."""
    return {source for kind in registry.kinds()
            for (source,) in published_rows(
                config.data_dir, f"SELECT DISTINCT source FROM {kind.ingested}", []) or []}


def pending_sources(config: JarvisConfig) -> dict[str, str]:
    """Source -> why a refresh must run it; empty when the published version is current."""
    try:
        manifest = current_version(config.data_dir).manifest
    except NotPublished:
        return {source: "nothing published yet" for source in config.source_names}
    pending = {source: "no longer configured"
               for source in _published_sources(config) - set(config.source_names)}
    if manifest.get("settings") != settings_fingerprint(config):
        return pending | {source: "the configuration or Jarvis's layers changed"
                          for source in config.source_names}
    if not manifest.get("vectors_complete", True):
        return pending | {source: "embeddings still being made"
                          for source in config.source_names}
    for source in config.source_names:
        try:
            reason = change_reason(config, source)
        except (SourceUnreachable, OSError, ValueError, duckdb.Error) as exc:
            reason = f"cannot be checked ({exc}): the run will say why"
        if reason:
            pending[source] = reason
    return pending

"""Which sources a refresh must run, decided against the published version without Dagster:
a refresh with nothing to do costs a stat walk per source and one small database read.

A source runs when nothing of it is published, when its content moved since (its kind's
change watch says: notes, a repository head, an export file, by content), when its settings,
the settings its layers share with every source or the way Jarvis builds its layers changed
(each version's manifest keeps a fingerprint of these per source), when the published
version is a partial one (embeddings still being made), or when it left the configuration
but still has published rows. Adding or dropping a source, or changing what only the query
side reads (profiles, memory, audit), runs no other source."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping

import duckdb

from jarvis_core.config import JarvisConfig
from jarvis_core.embedding_backends import F32, choose_backend
from jarvis_core.sources import registry
from jarvis_core.sources.changes import published_rows
from jarvis_core.sources.kind import SourceUnreachable
from jarvis_core.stores.serving import NotPublished, current_version

# Where the data lives (a project moved or copied keeps what its layers hold), and what only
# the query side reads (profiles, memory, audit), shape no layer either.
_NOT_SHAPING = {"config_path", "schedules", "instance", "resources", "environment", "data_dir",
                "profiles", "memory", "audit"}
# What the layers hold for unchanged input and configuration, raised by a release that
# changes it so that every source runs once after the upgrade (2: a ticket's document and
# node keys carry its source; 3: a repository's source code is parsed into symbols).
LAYERS_VERSION = 3
# On a publish run: the sources the refresh before it ran, comma-separated (`jarvis refresh`
# sets it; a publish without it follows every source, as automation's does).
_REFRESHED_TAG = "jarvis/refreshed_sources"


def settings_fingerprint(config: JarvisConfig) -> str:
    """What shapes the layers of every source alike: the settings they share (chunking, the
    model and the precision it computes in here, graph, analytics, limits) and
    ``LAYERS_VERSION``. Schedules, the device and batch size (speed only), the memory budget,
    the Dagster instance's storages and credentials, where the data directory is and what
    only the query side reads do not. Each source's own settings join it in
    ``source_fingerprints``."""
    shaping = config.model_dump(mode="json", exclude=_NOT_SHAPING | {"sources"})
    shaping["layers"] = LAYERS_VERSION
    for speed_only in ("device", "batch_size"):  # the precision they lead to is added below
        del shaping["embedding"][speed_only]
    precision = choose_backend(config.embedding.backend, config.embedding.device).precision
    if precision != F32:  # float32, all that earlier releases embedded in, leaves it as it was
        # ``auto`` on another CPU or device (or a new release) may embed in another
        # precision: a new collection, so every source runs to fill it.
        shaping["embedding"]["precision"] = precision
    return _digest(shaping)


def source_fingerprints(config: JarvisConfig) -> dict[str, str]:
    """Source -> what shapes its layers: ``settings_fingerprint``, its own settings and its
    kind. A published version keeps them; a source whose fingerprint moved runs again. Where
    the source is read (``_LOCATION``) is left out: what is read there is compared with the
    published version by content (``change_reason``: paths relative to it and hashes, a
    repository's head), so a moved project, folder or remote runs only what differs."""
    shared = settings_fingerprint(config)
    return {name: _digest({"shared": shared, "kind": config.source_kind(name),
                           "source": config.sources[name].model_dump(
                               mode="json", exclude=_LOCATION)})
            for name in config.source_names}


# A source's folder or export file, a repository's local clone or remote (a mirror follows
# its configured url at each fetch: jarvis_core/sources/repo/git.py).
_LOCATION = {"path", "url"}


def published_fingerprints(config: JarvisConfig, refreshed: list[str] | None,
                           previous: object) -> dict[str, str]:
    """What a new version records: each source's ``source_fingerprints``, except after a
    run of only some sources (``refreshed``, as `jarvis refresh --source` runs them), when
    the others keep what the version before recorded (``previous``), or nothing: their
    settings may have moved without their running, and they run when they next can."""
    current = source_fingerprints(config)
    if refreshed is None:
        return current
    kept = previous if isinstance(previous, dict) else {}
    return {source: current[source] if source in refreshed else kept[source]
            for source in current if source in refreshed or source in kept}


def refreshed_tags(sources: Iterable[str]) -> dict[str, str]:
    """The tag a publish run carries when it follows a run of ``sources`` only."""
    return {_REFRESHED_TAG: ",".join(sorted(sources))}


def refreshed_sources(tags: Mapping[str, str]) -> list[str] | None:
    """The sources a publish run's ``refreshed_tags`` name; None: it follows every source."""
    tag = tags.get(_REFRESHED_TAG)
    return tag.split(",") if tag is not None else None


def _digest(value: dict) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()[:16]


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
    published = manifest.get("settings")
    for source, fingerprint in source_fingerprints(config).items():
        if not isinstance(published, dict):  # one string: before fingerprints per source
            pending[source] = "published by an earlier release"
        elif source not in published:
            pending[source] = "new to the published version"
        elif published[source] != fingerprint:
            pending[source] = "its settings or Jarvis's layers changed"
    if not manifest.get("vectors_complete", True):
        return pending | {source: "embeddings still being made"
                          for source in config.source_names}
    for source in [source for source in config.source_names if source not in pending]:
        try:
            reason = change_reason(config, source)
        except (SourceUnreachable, OSError, ValueError, duckdb.Error) as exc:
            reason = f"cannot be checked ({exc}): the run will say why"
        if reason:
            pending[source] = reason
    return pending

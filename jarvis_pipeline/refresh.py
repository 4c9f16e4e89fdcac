"""`jarvis refresh`: the pipeline for every source that needs it, in-process, on the project's
Dagster instance (the one `jarvis ui` and `jarvis daemon` use).

What needs a run is decided first, without Dagster, against the published version
(``jarvis_core.pending``): with nothing changed, a refresh costs a stat walk per source.
Sources that changed are ingested (their kind's ingest job: the raw asset is partitioned by
the sources of its kind), run their later layers, then everything is published once. A
first refresh that adds many chunks publishes as soon as text, keyword index and graph are
ready, then again when every chunk has its vector.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

import duckdb

from jarvis_core.config import JarvisConfig
from jarvis_core.embedding_backends import choose_backend
from jarvis_core.notifications import notify
from jarvis_core.pending import pending_sources, refreshed_tags
from jarvis_core.sources import registry
from jarvis_core.sources.kind import SourceKind
from jarvis_core.stores import serving
from jarvis_core.stores.connections import StoreUnavailable, read_only
from jarvis_core.text.preparation import prepared_beside
from jarvis_pipeline.instance import process_tags

if TYPE_CHECKING:
    import dagster as dg

COUNT_KEYS = ("new", "changed", "unchanged", "deleted", "failed")
# Layers that do not count documents report these instead.
_EXTRA_KEYS = ("chunks_added", "chunks_removed", "embedded", "reused", "version", "edges",
               "references", "chunks", "vectors",
               "origins_rewritten", "unresolved", "vectors_complete")
# Dagster's step-by-step debug log is for the UI; the terminal gets warnings and the summary.
_QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}
# A refresh ingesting more new or changed documents than this runs the layers after
# ingestion in two halves, and publishes between them when it added more chunks than
# PROGRESSIVE_CHUNKS; a smaller one runs them as one run per source.
PROGRESSIVE_DOCUMENTS = 200
PROGRESSIVE_CHUNKS = 2_000


def stored_kinds(config: JarvisConfig) -> dict[str, SourceKind]:
    """Source -> kind of the sources that have rows in the working tables but are no longer
    configured (the kind whose raw table holds them: its raw asset removes them)."""
    stored: dict[str, SourceKind] = {}
    try:
        with read_only(config.duckdb_path) as conn:
            present = {name for (name,) in conn.execute(
                "SELECT table_name FROM duckdb_tables()").fetchall()}
            for kind in registry.kinds():
                if kind.ingested in present:
                    stored |= {source: kind for (source,) in conn.execute(
                        f"SELECT DISTINCT source FROM {kind.ingested}").fetchall()}
    except (StoreUnavailable, duckdb.Error):
        return {}
    return {source: kind for source, kind in stored.items()
            if source not in config.source_names}


def refresh_targets(config: JarvisConfig, only: list[str] | None) -> dict[str, str]:
    """Source -> why it runs: the named sources (asked for), else those whose data moved
    since the published version."""
    unknown = sorted(set(only or ()) - set(config.source_names))
    if unknown:
        raise ValueError(f"unknown source(s) {', '.join(unknown)}: configured are "
                         f"{', '.join(config.source_names) or 'none'}")
    if only:
        return {source: "asked for" for source in sorted(only)}
    pending = pending_sources(config)
    if pending:
        pending |= {source: "no longer configured" for source in stored_kinds(config)}
    return dict(sorted(pending.items()))


def run_refresh(config: JarvisConfig, only: list[str] | None = None) -> dict:
    """Run what needs running and publish; report per source, layer and check."""
    started = time.perf_counter()
    # a device named in embedding.device that is not here stops the refresh before any run
    choose_backend(config.embedding.backend, config.embedding.device)
    targets = refresh_targets(config, only)
    report = {"ok": True, "sources": [], "published": None, "partial": None,
              "reasons": targets, "version": serving.current_name(config.data_dir),
              "seconds": {}}
    if not targets:
        return report
    with prepared_beside(config.embedding, config.cache_dir) as converting:
        return _refresh(config, targets, report, started, converting)


def _refresh(config: JarvisConfig, targets: dict[str, str], report: dict, started: float,
             converting: bool) -> dict:
    """The runs of ``targets`` and the publish, on the project's instance."""
    from jarvis_definitions import build_definitions
    from jarvis_pipeline.instance import project_instance, release_abandoned_runs
    from jarvis_resources.tables import tables_held_open

    definitions = build_definitions(config)
    # read before the tables are held open: a read-only connection to a file this process
    # holds open fails (DuckDB refuses a second configuration), which would hide them
    kinds = {**stored_kinds(config),
             **{source: config.kind_of(source) for source in config.source_names}}
    with project_instance(config) as instance, tables_held_open(config):
        report["released_runs"] = release_abandoned_runs(instance)
        register_sources(instance, {source: kinds[source] for source in targets})
        if not _run_sources(config, definitions, instance,
                            {source: kinds[source] for source in targets}, report, started,
                            converting):
            return _failed(report)
        report["published"] = _publish(config, definitions, instance, targets)
        report["seconds"]["published"] = round(time.perf_counter() - started, 2)
        report["ok"] = report["published"]["ok"]
        report["version"] = serving.current_name(config.data_dir)
    return report


def _ingested(entries: list[dict], sources: dict[str, SourceKind]) -> int:
    """Documents the ingest runs found new or changed, over every source."""
    return sum(entry["layers"].get(sources[entry["source"]].asset.name, {}).get(count, 0)
               for entry in entries for count in ("new", "changed"))


def _run_sources(config: JarvisConfig, definitions: dg.Definitions,
                 instance: dg.DagsterInstance, sources: dict[str, SourceKind], report: dict,
                 started: float, converting: bool) -> bool:
    """Every layer of each source; whether all succeeded. Each source is ingested first (its
    kind's ingest job). When few documents moved, its later layers run as one run; when many
    did (a first refresh), everything but the embeddings runs first, the version is
    published when many chunks are new, and the embeddings follow. So they do while the
    model is ``converting`` beside the refresh: the embeddings would wait for it, and every
    source's other layers fill that wait (a first `jarvis refresh` of the sample on a new
    install, 2 cores: 34-39 s -> 32-34 s). With inferred similarity edges on, the graph
    needs the vectors first: one run of the later layers per source."""
    entries = report["sources"] = [
        run_source_job(config, definitions, instance, kind.ingest_job, source)
        for source, kind in sources.items()]
    if not all(entry["ok"] for entry in entries):
        return False
    progressive = ((_ingested(entries, sources) > PROGRESSIVE_DOCUMENTS or converting)
                   and not config.graph.similarity_top_k)
    for entry in entries:
        _merge(entry, run_source_job(config, definitions, instance,
                                     "index_sources" if progressive else "refresh_sources",
                                     entry["source"]))
    if not progressive or not all(entry["ok"] for entry in entries):
        return all(entry["ok"] for entry in entries)
    if sum(entry["layers"].get("chunks", {}).get("chunks_added", 0)
           for entry in entries) > PROGRESSIVE_CHUNKS:
        report["partial"] = _publish(config, definitions, instance, sources)
        report["seconds"]["first_published"] = round(time.perf_counter() - started, 2)
    for entry in entries:
        _merge(entry, run_source_job(config, definitions, instance, "embed_sources",
                                     entry["source"]))
    return all(entry["ok"] for entry in entries)


def _failed(report: dict) -> dict:
    """A failed source keeps the query side on the last complete version."""
    report["ok"] = False
    return report


def register_sources(instance: dg.DagsterInstance, sources: dict[str, SourceKind]) -> None:
    """Each source a partition of the layers after ingestion and of its kind's raw asset."""
    from jarvis_assets.partitions import kind_partitions, source_partitions

    wanted: dict[str, list[str]] = {source_partitions.name: list(sources)}
    for source, kind in sources.items():
        wanted.setdefault(kind_partitions(kind).name, []).append(source)
    for partitions, names in wanted.items():
        known = set(instance.get_dynamic_partitions(partitions))
        missing = [name for name in names if name not in known]
        if missing:
            instance.add_dynamic_partitions(partitions, missing)


def run_source_job(config: JarvisConfig, definitions: dg.Definitions,
                   instance: dg.DagsterInstance, job: str, source: str) -> dict:
    """One job for one source partition, in this process; its report entry."""
    started = time.perf_counter()
    result = definitions.resolve_job_def(job).execute_in_process(
        partition_key=source, instance=instance, raise_on_error=False, run_config=_QUIET,
        tags=process_tags())
    entry = {"source": source, **_summarize(result),
             "seconds": round(time.perf_counter() - started, 2)}
    _notify_failure(config, result, entry)
    return entry


def _merge(entry: dict, more: dict) -> None:
    """Fold a source's next run (its later layers, its embeddings) into its entry."""
    entry["ok"] &= more["ok"]
    entry["layers"] |= more["layers"]
    entry["checks"] += more["checks"]
    entry["failed_steps"] += more["failed_steps"]
    entry["seconds"] = round(entry["seconds"] + more["seconds"], 2)
    entry["run_ids"] = [*entry.get("run_ids", [entry["run_id"]]), more["run_id"]]


def _publish(config: JarvisConfig, definitions: dg.Definitions,
             instance: dg.DagsterInstance, refreshed: Iterable[str]) -> dict:
    """The publish run, told which sources ran (``refreshed_tags``)."""
    result = definitions.resolve_job_def("publish_serving").execute_in_process(
        instance=instance, raise_on_error=False, run_config=_QUIET,
        tags={**process_tags(), **refreshed_tags(refreshed)})
    summary = _summarize(result)
    _notify_failure(config, result, summary)
    return summary


def _notify_failure(config: JarvisConfig, result: dg.ExecuteInProcessResult,
                    summary: dict) -> None:
    """A failed refresh leaves the same notice a failed run does under the daemon."""
    if summary["ok"]:
        return
    from sensors.run_failures import failure_notice

    failed_checks = [f"{c['asset']}:{c['check']}" for c in summary["checks"]
                     if not c["passed"] and c["severity"] != "WARN"]
    notify(config.notifications_path,
           failure_notice(result.dagster_run, result.get_step_failure_events(),
                          f"checks failed: {', '.join(failed_checks)}"),
           webhook_url=config.environment.webhook_url)


def _summarize(result: dg.ExecuteInProcessResult) -> dict:
    """Per-layer counts and check outcomes of one run."""
    layers = {}
    for event in result.get_asset_materialization_events():
        materialization = event.step_materialization_data.materialization
        metadata = {key: value.value for key, value in materialization.metadata.items()}
        layers[materialization.asset_key.to_user_string()] = {
            key: metadata.get(key, 0) for key in COUNT_KEYS if key in metadata
        } | {key: metadata[key] for key in _EXTRA_KEYS if key in metadata} | {
            "rows": metadata.get("dagster/row_count", 0)}
    checks = [{"check": evaluation.check_name, "asset": evaluation.asset_key.to_user_string(),
               "passed": evaluation.passed, "severity": evaluation.severity.value}
              for evaluation in result.get_asset_check_evaluations()]
    ok = result.success and all(c["passed"] or c["severity"] == "WARN" for c in checks)
    return {"ok": ok, "run_id": result.run_id, "layers": layers, "checks": checks,
            "failed_steps": [event.step_key for event in result.get_step_failure_events()]}

"""`jarvis refresh`: the main job for every source, in-process, on the embedded stores."""

from __future__ import annotations

import os
import time

import dagster as dg
import duckdb

from jarvis_definitions import build_definitions
from jarvis_assets.jobs import publish_serving_job, refresh_sources_job
from jarvis_assets.partitions import source_partitions
from jarvis_core.config import JarvisConfig
from jarvis_core.notifications import notify
from jarvis_core.stores import tables
from jarvis_core.stores.tables import StoreUnavailable, read_only
from sensors.run_failures import failure_notice

COUNT_KEYS = ("new", "changed", "unchanged", "deleted", "failed")
# Layers that do not count documents report these instead.
_EXTRA_KEYS = ("chunks_added", "chunks_removed", "embedded", "reused", "version")
# Dagster's step-by-step debug log is for the UI; the terminal gets warnings and the summary.
_QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}


def _instance() -> dg.DagsterInstance:
    """The persistent instance when DAGSTER_HOME is set (runs then show in the UI)."""
    return dg.DagsterInstance.get() if os.environ.get("DAGSTER_HOME") else \
        dg.DagsterInstance.ephemeral()


def _stored_sources(config: JarvisConfig) -> set[str]:
    """Sources that have rows but are no longer configured: their data must go."""
    try:
        with read_only(config.duckdb_path) as conn:
            present = {name for (name,) in conn.execute(
                "SELECT table_name FROM duckdb_tables()").fetchall()}
            raw_tables = [table for table in tables.RAW_TABLES if table in present]
            if not raw_tables:
                return set()
            return {row[0] for row in conn.execute(" UNION ".join(
                f"SELECT DISTINCT source FROM {table}" for table in raw_tables)).fetchall()}
    except (StoreUnavailable, duckdb.Error):
        return set()


def run_refresh(config: JarvisConfig, only: list[str] | None = None) -> dict:
    """Run the refresh job once per source partition; report per layer and per check."""
    unknown = sorted(set(only or ()) - set(config.source_names))
    if unknown:
        raise ValueError(f"unknown source(s) {', '.join(unknown)}: configured are "
                         f"{', '.join(config.source_names) or 'none'}")
    targets = sorted(only or set(config.source_names) | _stored_sources(config))
    definitions = build_definitions(config)
    job = definitions.resolve_job_def(refresh_sources_job.name)
    report = {"sources": [], "ok": True, "published": None}
    with _instance() as instance:
        known = set(instance.get_dynamic_partitions(source_partitions.name))
        missing = [name for name in targets if name not in known]
        if missing:
            instance.add_dynamic_partitions(source_partitions.name, missing)
        for source in targets:
            started = time.perf_counter()
            result = job.execute_in_process(partition_key=source, instance=instance,
                                            raise_on_error=False, run_config=_QUIET)
            entry = {"source": source, **_summarize(result),
                     "seconds": round(time.perf_counter() - started, 2)}
            report["ok"] &= entry["ok"]
            report["sources"].append(entry)
            _notify_failure(config, result, entry)
        if report["ok"]:  # publish only complete data: a failed source keeps the old version
            result = definitions.resolve_job_def(publish_serving_job.name).execute_in_process(
                instance=instance, raise_on_error=False, run_config=_QUIET)
            summary = _summarize(result)
            report["ok"] &= summary["ok"]
            report["published"] = summary
            _notify_failure(config, result, summary)
    return report


def _notify_failure(config: JarvisConfig, result: dg.ExecuteInProcessResult,
                    summary: dict) -> None:
    """A failed refresh leaves the same notice a failed run does under the daemon."""
    if summary["ok"]:
        return
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

"""The raw layer: one asset per source kind, made from the kind's descriptor
(jarvis_core/sources/kind.py) by one body, with its checks and its ingest job.

Each raw asset keeps its own name, description and kinds, is partitioned by the sources of
its kind only, and reads its source through the kind's ``ingest``; what the run did
becomes the asset's metadata the same way for every kind. A source that cannot be read at
all (an unmounted folder, a vanished clone or export) keeps what earlier runs stored and
fails only the ``source_reachable`` warning check, so the other sources go on.
"""

import dagster as dg

from jarvis_assets.metadata import counts_table, failures_table, log_failures, markdown_table
from jarvis_assets.partitions import kind_partitions
from jarvis_core.sources.kind import (
    Ingested,
    IngestRun,
    RawAsset,
    RowsCheck,
    SourceKind,
    SourceUnreachable,
)
from jarvis_core.sources.plan import WHOLE_SOURCE, record_unreachable, utc_now
from jarvis_resources import JarvisConfigResource, TablesResource


def _metadata(kind: SourceKind, done: Ingested) -> dict:
    counts = dict(done.counts)
    return {
        **counts, **done.seconds, **done.figures,
        "source_kind": kind.name,
        "dagster/row_count": done.rows,
        "location": dg.MetadataValue.path(done.location) if done.location
        else "(not configured)",
        "summary": counts_table(counts),
        "failures": failures_table(done.failures),
        "preview": markdown_table(done.preview, done.preview_columns),
        **{name: counts_table(dict(table)) for name, table in done.tables.items()},
    }


def raw_asset(kind: SourceKind, spec: RawAsset) -> dg.AssetsDefinition:
    """The raw asset ``spec`` of ``kind``, after the kind's raw assets before it."""
    before = kind.raw_assets[:kind.raw_assets.index(spec)]

    @dg.asset(name=spec.name, description=spec.description,
              partitions_def=kind_partitions(kind), group_name="sources",
              deps=[dg.AssetDep(asset.name, partition_mapping=dg.IdentityPartitionMapping())
                    for asset in before],
              kinds=set(spec.tags))
    def raw(context: dg.AssetExecutionContext, jarvis: JarvisConfigResource,
            tables: TablesResource) -> dg.MaterializeResult:
        source, config = context.partition_key, jarvis.load()
        settings = config.sources.get(source) if config.source_kind(source) == kind.name \
            else None
        run = IngestRun(source, settings, tables.get_connection, config.ingest,
                        config.data_dir, utc_now(), context.log.warning,
                        config.resources.batch_documents)
        try:
            done = kind.pipeline.ingest[spec.name](run)
        except SourceUnreachable as exc:
            context.log.error(f"{source}: not ingested: {exc}")
            with tables.get_connection() as conn:
                kept = record_unreachable(conn, source, kind.ingested, str(exc))
            return dg.MaterializeResult(metadata={
                "source_kind": kind.name, "error": str(exc), "failed": 1,
                "dagster/row_count": kept})
        log_failures(context, source, done.failures)
        context.log.info(f"{source}: {spec.name} {dict(done.counts)}")
        return dg.MaterializeResult(metadata=_metadata(kind, done))

    return raw


def _source_reachable(kind: SourceKind, asset: dg.AssetsDefinition) -> dg.AssetChecksDefinition:
    @dg.asset_check(asset=asset, name="source_reachable", partitions_def=kind_partitions(kind),
                    description=f"The {kind.label} could be read at all (an unmounted "
                                "folder or a vanished clone or export fails this; its data "
                                "stays as stored, and is published).")
    def source_reachable(context: dg.AssetCheckExecutionContext,
                         tables: TablesResource) -> dg.AssetCheckResult:
        source = context.partition_key
        with tables.get_connection() as conn:
            rows = [{"source": source, "reason": reason} for (reason,) in conn.execute(
                "SELECT reason FROM ingest_failures WHERE path = ? AND source = ?",
                [WHOLE_SOURCE, source]).fetchall()]
        return dg.AssetCheckResult(
            passed=not rows, severity=dg.AssetCheckSeverity.WARN,
            metadata={"unreachable": len(rows),
                      "sources": markdown_table(rows, ["source", "reason"])})

    return source_reachable


def ratio_warning(rows: list[dict], *, good: str, bad: str, limit: float) -> dg.AssetCheckResult:
    """Warns when, in some source, bad / (good + bad) exceeds ``limit``."""
    for row in rows:
        total = row[good] + row[bad]
        row["ratio"] = round(row[bad] / total, 4) if total else 0.0
    worst = max((row["ratio"] for row in rows), default=0.0)
    return dg.AssetCheckResult(
        passed=worst <= limit, severity=dg.AssetCheckSeverity.WARN,
        metadata={"worst_ratio": worst, "limit": limit,
                  "per_source": markdown_table(rows, ["source", good, bad, "ratio"])})


def _failed_ratio(kind: SourceKind, asset: dg.AssetsDefinition) -> dg.AssetChecksDefinition:
    table, ratio = kind.ingested, kind.failed_ratio

    @dg.asset_check(asset=asset, name=ratio.check, partitions_def=kind_partitions(kind),
                    description=f"Share of {ratio.items} that could not be read, per "
                                f"{kind.label}, stays under ingest.max_failed_ratio "
                                "(warning).")
    def failed_ratio(context: dg.AssetCheckExecutionContext, jarvis: JarvisConfigResource,
                     tables: TablesResource) -> dg.AssetCheckResult:
        source = context.partition_key
        with tables.get_connection() as conn:
            good, bad = conn.execute(
                f"SELECT (SELECT count(*) FROM {table} WHERE source = $1), "
                "(SELECT count(*) FROM ingest_failures WHERE source = $1)", [source]).fetchone()
        return ratio_warning([{"source": source, table: good, "failed": bad}], good=table,
                             bad="failed", limit=jarvis.load().ingest.max_failed_ratio)

    return failed_ratio


def _rows_check(kind: SourceKind, asset: dg.AssetsDefinition,
                check: RowsCheck) -> dg.AssetChecksDefinition:
    @dg.asset_check(asset=asset, name=check.name, partitions_def=kind_partitions(kind),
                    description=check.description)
    def rows_check(context: dg.AssetCheckExecutionContext, jarvis: JarvisConfigResource,
                   tables: TablesResource) -> dg.AssetCheckResult:
        with tables.get_connection() as conn:
            parameters = [context.partition_key]
            if "$2" in check.sql:
                parameters.append(jarvis.load().ingest.max_failed_ratio)
            found = conn.execute(check.sql, parameters)
            columns = [column[0] for column in found.description]
            rows = [dict(zip(columns, row, strict=True)) for row in found.fetchall()]
        return dg.AssetCheckResult(
            passed=not rows, severity=dg.AssetCheckSeverity.WARN,
            metadata={"found": len(rows), "rows": markdown_table(rows[:20], columns)})

    return rows_check


def ingest_job(kind: SourceKind):
    """The ingestion of one source of ``kind`` (its raw assets and checks): what the change
    sensors and schedules request; the layers after it follow by automation."""
    names = [asset.name for asset in kind.raw_assets]
    return dg.define_asset_job(
        kind.ingest_job, selection=dg.AssetSelection.assets(*names),
        description=f"Ingest one {kind.label}: its {' and '.join(names)} partition; the "
                    "layers after it follow.")


def raw_layer(kinds: tuple[SourceKind, ...]) -> dg.Definitions:
    """Every kind's raw assets with their checks."""
    assets, checks = [], []
    for kind in kinds:
        for spec in kind.raw_assets:
            asset = raw_asset(kind, spec)
            assets.append(asset)
            checks += [_rows_check(kind, asset, check) for check in spec.checks]
            if spec is kind.asset:
                checks.append(_source_reachable(kind, asset))
                if kind.failed_ratio is not None:
                    checks.append(_failed_ratio(kind, asset))
    return dg.Definitions(assets=assets, asset_checks=checks)

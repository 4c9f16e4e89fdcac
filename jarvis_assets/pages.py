"""Raw layer for Confluence: HTML space exports and REST content JSON as pages."""

import dagster as dg

from jarvis_assets.export_files import read_export_files
from jarvis_assets.metadata import (
    Stopwatch,
    counts_table,
    failures_table,
    log_failures,
    markdown_table,
)
from jarvis_assets.notes import DUCKDB_POOL
from jarvis_assets.partitions import (
    other_kind_result,
    source_partitions,
)
from jarvis_core.sources.confluence.ingest import (
    CONFLUENCE_KIND,
    export_file_hashes,
    page_figures,
    read_changed_export,
    read_stored,
    write_pages,
)
from jarvis_core.sources.confluence.read import ConfluenceError, ConfluenceRead
from jarvis_core.sources.plan import utc_now
from jarvis_resources import JarvisConfigResource, TablesResource


@dg.asset(
    partitions_def=source_partitions,
    group_name="sources",
    kinds={"duckdb", "html"},
    pool=DUCKDB_POOL,
)
def raw_pages(context: dg.AssetExecutionContext, jarvis: JarvisConfigResource,
              tables: TablesResource) -> dg.MaterializeResult:
    """Pages of one Confluence export (partition): the HTML space export (zip or folder) or
    REST content JSON, each page with its space, ancestors, people, labels, links, Jira
    keys and attachments listed, its body as text with headings kept.

    When every export file hashes as before nothing is read; otherwise unchanged files give
    their stored pages and a stored page version is not converted again. Only pages that
    changed are rewritten; pages gone from the export (or trashed) are deleted. Files and
    pages that cannot be read are recorded in ``ingest_failures`` and the rest goes on.
    """
    source = context.partition_key
    config = jarvis.load()
    if (skipped := other_kind_result(config, source, CONFLUENCE_KIND)) is not None:
        return skipped
    settings, watch, now = config.confluence.get(source), Stopwatch(), utc_now()
    with tables.get_connection() as conn:
        stored = read_stored(conn, source)
    outcome = read_export_files(
        context, tables, CONFLUENCE_KIND, settings.path if settings else None, stored, watch,
        file_hashes=export_file_hashes, read_changed=read_changed_export,
        nothing_read=ConfluenceRead, vanished=ConfluenceError,
        unchanged_counts=(len(stored.content), len(stored.content)))
    if isinstance(outcome, dg.MaterializeResult):
        return outcome
    hashes, read = outcome
    with tables.get_connection() as conn:
        written = write_pages(conn, source, read, hashes, stored, now)
        figures = page_figures(conn, source)
    watch.lap("write")
    log_failures(context, source, written.failures)
    counts = written.counts.as_dict()
    context.log.info(f"{source}: pages {counts}")
    return dg.MaterializeResult(metadata={
        **counts, **watch.seconds, "source_kind": CONFLUENCE_KIND,
        "dagster/row_count": figures["pages"], "files": figures["page_files"],
        "files_changed": True, "pages_converted": read.parsed, "pages_reused": read.reused,
        "pages_skipped": read.skipped, "warnings": written.warnings,
        "pages_by_space": counts_table(figures["pages_by_space"]),
        "export_path": dg.MetadataValue.path(str(settings.path)) if settings
        else "(not configured)",
        "summary": counts_table(counts), "failures": failures_table(written.failures),
        "preview": markdown_table(written.rows, ["space", "title", "version", "updated_at"]),
    })

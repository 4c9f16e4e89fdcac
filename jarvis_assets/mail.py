"""Raw layer for mail: mbox files, Maildir folders and .eml files as messages and threads."""

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
from jarvis_core.sources.mail.ingest import (
    MAIL_KIND,
    mail_figures,
    mail_file_hashes,
    read_changed_mail,
    read_stored,
    write_mail,
)
from jarvis_core.sources.mail.read import MailError, MailRead
from jarvis_core.sources.plan import utc_now
from jarvis_resources import JarvisConfigResource, TablesResource


@dg.asset(
    partitions_def=source_partitions,
    group_name="sources",
    kinds={"duckdb", "python"},
    pool=DUCKDB_POOL,
)
def raw_mail(context: dg.AssetExecutionContext, jarvis: JarvisConfigResource,
             tables: TablesResource) -> dg.MaterializeResult:
    """Messages and threads of one mail source (partition): mbox files, Maildir folders and
    .eml files, each message with its people, text body and attachments listed; threads
    from In-Reply-To/References, their quoted replies collapsed.

    When every mail file hashes as before nothing is parsed; otherwise unchanged files give
    their stored messages and a grown mbox is read from where the last run stopped. Only
    threads whose content changed are rewritten, vanished ones deleted. Messages that cannot
    be read are recorded in ``ingest_failures`` and the rest goes on.
    """
    source = context.partition_key
    config = jarvis.load()
    if (skipped := other_kind_result(config, source, MAIL_KIND)) is not None:
        return skipped
    settings, watch, now = config.mail.get(source), Stopwatch(), utc_now()
    with tables.get_connection() as conn:
        stored = read_stored(conn, source)
    outcome = read_export_files(
        context, tables, MAIL_KIND, settings.path if settings else None, stored, watch,
        file_hashes=mail_file_hashes, read_changed=read_changed_mail, nothing_read=MailRead,
        vanished=MailError, unchanged_counts=(len(stored.threads), len(stored.messages)))
    if isinstance(outcome, dg.MaterializeResult):
        return outcome
    hashes, read = outcome
    with tables.get_connection() as conn:
        written = write_mail(conn, source, read, hashes, stored, now)
        figures = mail_figures(conn, source)
    watch.lap("write")
    log_failures(context, source, written.failures)
    counts = written.counts.as_dict()
    context.log.info(f"{source}: threads {counts}, messages {written.messages}")
    return dg.MaterializeResult(metadata={
        **counts, **watch.seconds, "source_kind": MAIL_KIND,
        "dagster/row_count": figures["messages"], "threads": figures["threads"],
        "files": figures["mail_files"], "files_changed": True,
        "messages_parsed": read.parsed, "messages_reused": read.reused,
        "warnings": written.warnings, "messages_summary": counts_table(written.messages),
        "mail_path": dg.MetadataValue.path(str(settings.path)) if settings
        else "(not configured)",
        "summary": counts_table(counts), "failures": failures_table(written.failures),
        "preview": markdown_table(written.threads,
                                  ["subject", "message_count", "started_at", "last_at"]),
    })

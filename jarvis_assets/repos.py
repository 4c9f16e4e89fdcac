"""Raw layer for git repositories: commits, the files they changed, files and docs at head."""

import dagster as dg

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
    unreachable_source_result,
)
from jarvis_core.sources.plan import utc_now
from jarvis_core.sources.repo.git import GitError
from jarvis_core.sources.repo.ingest import (
    checkout,
    read_stored,
    remove_repository,
    repository_figures,
    sync_counts,
    write_sync,
)
from jarvis_core.sources.repo.sync import RepoSync, sync_repository
from jarvis_resources import JarvisConfigResource, TablesResource


def _log_sync(context: dg.AssetExecutionContext, source: str, sync: RepoSync,
              stored_head: str | None) -> None:
    log_failures(context, source, sync.failures)
    for warning in sync.warnings:
        context.log.warning(f"{source}/{warning}")
    if sync.shallow:
        context.log.warning(f"{source}: shallow clone, history ingested as far as it goes")
    if sync.rewritten:
        context.log.warning(f"{source}: history rewritten (the last ingested head "
                            f"{stored_head[:12]} is gone); {len(sync.removed_shas)} "
                            "unreachable commits removed")


@dg.asset(
    partitions_def=source_partitions,
    group_name="sources",
    kinds={"duckdb", "git"},
    pool=DUCKDB_POOL,
)
def raw_repository(context: dg.AssetExecutionContext, jarvis: JarvisConfigResource,
                   tables: TablesResource) -> dg.MaterializeResult:
    """Commits of one repository (partition) reachable from its branch, with the files each
    changed; the files (with language) and docs at the branch head; ``.jarvis`` knowledge.

    Only commits not stored yet are read; commits no longer reachable (a force-push) are
    removed, and everything built from them follows. A repository configured by ``url`` is
    cloned into the data directory once and fetched on later runs.
    """
    source = context.partition_key
    config = jarvis.load()
    if (skipped := other_kind_result(config, source, "repo")) is not None:
        return skipped
    if source not in config.repos:
        with tables.get_connection() as conn:
            remove_repository(conn, source)
        context.log.info(f"{source}: no longer configured, its repository rows were removed")
        return dg.MaterializeResult(metadata={"source_kind": "(not configured)",
                                              "dagster/row_count": 0})
    repo, watch, now = config.repos[source], Stopwatch(), utc_now()
    with tables.get_connection() as conn:
        stored = read_stored(conn, source)
    try:
        cloned = checkout(config, source, context.log.warning)
        sync = sync_repository(config.repo_checkout(source), stored, branch=repo.branch,
                               docs=repo.docs, knowledge_dir=repo.knowledge_dir,
                               exclude=repo.exclude)
    except GitError as exc:
        return unreachable_source_result(context, tables, source, "repo", str(exc))
    watch.lap("read")
    _log_sync(context, source, sync, stored.head)
    with tables.get_connection() as conn:
        if not sync.unchanged:
            write_sync(conn, source, sync, repo.branch, now)
        figures = repository_figures(conn, source)
    watch.lap("write")
    counts = sync_counts(sync, stored, figures).as_dict()
    context.log.info(f"{source}: repository {counts} at {sync.head[:12]}")
    return dg.MaterializeResult(metadata={
        **counts, **watch.seconds, "source_kind": "repo",
        "dagster/row_count": figures["commits"],
        **{key: figures[key] for key in ("commits", "repo_files", "repo_docs")},
        "head": sync.head, "branch": repo.branch, "checkout": cloned, "shallow": sync.shallow,
        "history_rewritten": sync.rewritten,
        "repository": dg.MetadataValue.path(str(config.repo_checkout(source))),
        "summary": counts_table(counts),
        "files_by_language": counts_table(figures["files_by_language"]),
        "commits_by_author": counts_table(figures["commits_by_author"]),
        "failures": failures_table(sync.failures),
        "preview": markdown_table(
            [{"sha": c.sha[:10], "author": c.author_name, "date": c.authored_at.isoformat(),
              "subject": c.subject, "files": len(c.files)} for c in sync.new_commits],
            ["sha", "author", "date", "subject", "files"]),
    })

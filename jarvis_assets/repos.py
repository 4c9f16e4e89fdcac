"""Raw layer for git repositories: commits, the files they changed, files and docs at head."""

import time
from datetime import UTC, datetime

import dagster as dg
from dagster_duckdb import DuckDBResource

from jarvis_assets.metadata import counts_table, markdown_table
from jarvis_assets.notes import DUCKDB_POOL
from jarvis_assets.partitions import (
    other_kind_result,
    source_partitions,
    unreachable_source_result,
)
from jarvis_core.config import JarvisConfig
from jarvis_core.sources.git import GitError, mirror
from jarvis_core.sources.repos import RepoSync, StoredRepo, language, sync_repository
from jarvis_core.stores import tables
from jarvis_resources import JarvisConfigResource

# Every table a repository writes, with the column its rows are removed by.
REPO_TABLES = (("commits", "sha"), ("commit_files", "sha"), ("repo_files", "path"),
               ("repo_docs", "path"), ("repo_knowledge", "path"), ("repo_state", "source"))


def _stored(conn, source: str) -> StoredRepo:
    state = conn.execute("SELECT head, settings FROM repo_state WHERE source = ?",
                         [source]).fetchone()
    return StoredRepo(
        head=state[0] if state else None, settings=state[1] if state else None,
        shas={sha for (sha,) in conn.execute("SELECT sha FROM commits WHERE source = ?",
                                             [source]).fetchall()},
        docs=dict(conn.execute("SELECT path, blob_sha FROM repo_docs WHERE source = ?",
                               [source]).fetchall()),
        knowledge=dict(conn.execute("SELECT path, blob_sha FROM repo_knowledge "
                                    "WHERE source = ?", [source]).fetchall()))


def _checkout(config: JarvisConfig, source: str, log: dg.DagsterLogManager) -> str:
    """Clone or fetch a repository configured by ``url``; what was done, for the metadata."""
    repo = config.repos[source]
    if repo.url is None:
        return "local"
    destination = config.repo_checkout(source)
    try:
        return mirror(repo.url, destination)
    except GitError as exc:
        if not destination.exists():
            raise
        log.warning(f"{source}: fetch failed, ingesting the copy already cloned: {exc}")
        return "fetch failed"


def _write(conn, source: str, sync: RepoSync, branch: str, now: datetime) -> None:
    commit_rows, file_rows = [], []
    for commit in sync.new_commits:
        commit_rows.append({
            "source": source, "sha": commit.sha, "parents": commit.parents,
            "author_name": commit.author_name, "author_email": commit.author_email,
            "authored_at": commit.authored_at, "committer_name": commit.committer_name,
            "committer_email": commit.committer_email, "committed_at": commit.committed_at,
            "subject": commit.subject, "message": commit.message,
            "files_changed": len(commit.files),
            "additions": sum(f["additions"] or 0 for f in commit.files),
            "deletions": sum(f["deletions"] or 0 for f in commit.files), "ingested_at": now})
        file_rows += [{"source": source, "sha": commit.sha, **f} for f in commit.files]
    for table, remove, rows in (
        ("commits", sync.removed_shas, commit_rows),
        ("commit_files", sync.removed_shas, file_rows),
        ("repo_docs", sync.removed_docs, [{"source": source, **doc} for doc in sync.docs]),
        ("repo_knowledge", sync.removed_knowledge,
         [{"source": source, **row} for row in sync.knowledge]),
    ):
        tables.replace_rows(conn, table, source=source, remove_paths=remove,
                           rows=tables.frame(table, rows),
                           key_column=dict(REPO_TABLES)[table])
    for table, rows in (
        ("repo_files", [{"source": source, "path": e.path, "language": language(e.path),
                         "size_bytes": e.size_bytes, "blob_sha": e.blob_sha}
                        for e in sync.files]),
        ("ingest_failures", [{"source": source, **failure, "detected_at": now}
                             for failure in sync.failures]),
        ("repo_state", [{"source": source, "branch": branch, "head": sync.head,
                         "shallow": sync.shallow, "commit_count": sync.commit_count,
                         "settings": sync.settings, "ingested_at": now}]),
    ):
        tables.replace_rows(conn, table, source=source, remove_paths=None,
                           rows=tables.frame(table, rows))


@dg.asset(
    partitions_def=source_partitions,
    group_name="sources",
    kinds={"duckdb", "git"},
    pool=DUCKDB_POOL,
)
def raw_repository(
    context: dg.AssetExecutionContext, jarvis: JarvisConfigResource, duckdb: DuckDBResource
) -> dg.MaterializeResult:
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
    started = time.perf_counter()
    now = datetime.now(UTC).replace(tzinfo=None)
    if source not in config.repos:
        with duckdb.get_connection() as conn:
            tables.ensure_schema(conn)
            for table in (*dict(REPO_TABLES), "ingest_failures"):
                tables.replace_rows(conn, table, source=source, remove_paths=None,
                                   rows=tables.frame(table, []))
        context.log.info(f"{source}: no longer configured, its repository rows were removed")
        return dg.MaterializeResult(metadata={"source_kind": "(not configured)",
                                              "dagster/row_count": 0})

    repo = config.repos[source]
    with duckdb.get_connection() as conn:
        tables.ensure_schema(conn)
        stored = _stored(conn, source)
    try:
        checkout = _checkout(config, source, context.log)
        sync = sync_repository(config.repo_checkout(source), stored, branch=repo.branch,
                               docs=repo.docs, knowledge_dir=repo.knowledge_dir,
                               exclude=repo.exclude)
    except GitError as exc:
        return unreachable_source_result(context, duckdb, source, "repo", str(exc),
                                         "SELECT count(*) FROM commits WHERE source = ?")
    read = time.perf_counter()
    for failure in sync.failures:
        context.log.warning(f"{source}/{failure['path']}: not ingested: {failure['reason']}")
    for warning in sync.warnings:
        context.log.warning(f"{source}/{warning}")
    if sync.shallow:
        context.log.warning(f"{source}: shallow clone, history ingested as far as it goes")
    if sync.rewritten:
        context.log.warning(f"{source}: history rewritten (the last ingested head "
                            f"{stored.head[:12]} is gone); {len(sync.removed_shas)} "
                            "unreachable commits removed")
    if not sync.unchanged:
        with duckdb.get_connection() as conn:
            _write(conn, source, sync, repo.branch, now)
    with duckdb.get_connection() as conn:
        commits, files, docs, failed = conn.execute(
            "SELECT (SELECT count(*) FROM commits WHERE source = $1), "
            "(SELECT count(*) FROM repo_files WHERE source = $1), "
            "(SELECT count(*) FROM repo_docs WHERE source = $1), "
            "(SELECT count(*) FROM ingest_failures WHERE source = $1)", [source]).fetchone()
        languages = conn.execute(
            "SELECT coalesce(language, '(unknown)'), count(*) FROM repo_files WHERE source = ? "
            "GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 15", [source]).fetchall()
        authors = conn.execute(
            "SELECT lower(author_email), count(*) FROM commits WHERE source = ? "
            "GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 15", [source]).fetchall()

    # Counted per document, as the chunks layer counts them: commits and docs (a doc read
    # again because its blob changed is changed, a first read is new).
    changed_docs = sum(1 for doc in sync.docs if doc["path"] in stored.docs)
    counts = {"new": len(sync.new_commits) + len(sync.docs) - changed_docs,
              "changed": changed_docs,
              "unchanged": commits - len(sync.new_commits) + docs - len(sync.docs),
              "deleted": len(sync.removed_shas) + len(sync.removed_docs), "failed": failed}
    context.log.info(f"{source}: repository {counts} at {sync.head[:12]}")
    return dg.MaterializeResult(metadata={
        **counts,
        "source_kind": "repo",
        "dagster/row_count": commits,
        "commits": commits,
        "repo_files": files,
        "repo_docs": docs,
        "head": sync.head,
        "branch": repo.branch,
        "checkout": checkout,
        "shallow": sync.shallow,
        "history_rewritten": sync.rewritten,
        "repository": dg.MetadataValue.path(str(config.repo_checkout(source))),
        "read_seconds": round(read - started, 3),
        "write_seconds": round(time.perf_counter() - read, 3),
        "summary": counts_table(counts),
        "files_by_language": counts_table(dict(languages)),
        "commits_by_author": counts_table(dict(authors)),
        "failures": markdown_table(sync.failures, ["path", "reason"], limit=50),
        "preview": markdown_table(
            [{"sha": c.sha[:10], "author": c.author_name, "date": c.authored_at.isoformat(),
              "subject": c.subject, "files": len(c.files)} for c in sync.new_commits],
            ["sha", "author", "date", "subject", "files"]),
    })

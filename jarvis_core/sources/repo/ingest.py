"""A repository's rows in the tables: what earlier runs stored, and writing a sync."""

from __future__ import annotations

from datetime import datetime

import duckdb

from jarvis_core.config import JarvisConfig
from jarvis_core.sources.plan import ItemCounts, failure_row
from jarvis_core.sources.repo.git import GitError, mirror
from jarvis_core.sources.repo.sync import RepoSync, StoredRepo, language
from jarvis_core.stores import tables

# Every table a repository writes, with the column its rows are removed by.
REPO_TABLES = (("commits", "sha"), ("commit_files", "sha"), ("repo_files", "path"),
               ("repo_docs", "path"), ("repo_knowledge", "path"), ("repo_state", "source"))


def read_stored(conn: duckdb.DuckDBPyConnection, source: str) -> StoredRepo:
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


def checkout(config: JarvisConfig, source: str, warn) -> str:
    """Clone or fetch a repository configured by ``url`` (a local clone is read in place);
    what was done, for the metadata. A failed fetch of an existing clone is a warning."""
    repo = config.repos[source]
    if repo.url is None:
        return "local"
    destination = config.repo_checkout(source)
    try:
        return mirror(repo.url, destination)
    except GitError as exc:
        if not destination.exists():
            raise
        warn(f"{source}: fetch failed, ingesting the copy already cloned: {exc}")
        return "fetch failed"


def remove_repository(conn: duckdb.DuckDBPyConnection, source: str) -> None:
    """Every row of a repository that is no longer configured."""
    for table in (*dict(REPO_TABLES), "ingest_failures"):
        tables.replace_rows(conn, table, source=source, remove_paths=None,
                            rows=tables.frame(table, []))


def _commit_rows(source: str, sync: RepoSync, now: datetime) -> tuple[list[dict], list[dict]]:
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
    return commit_rows, file_rows


def write_sync(conn: duckdb.DuckDBPyConnection, source: str, sync: RepoSync, branch: str,
               now: datetime) -> None:
    """Add what the sync read, remove what it found gone, replace files, failures, state."""
    commit_rows, file_rows = _commit_rows(source, sync, now)
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
        ("ingest_failures", [failure_row(source, f["path"], f["reason"], detected_at=now)
                             for f in sync.failures]),
        ("repo_state", [{"source": source, "branch": branch, "head": sync.head,
                         "shallow": sync.shallow, "commit_count": sync.commit_count,
                         "settings": sync.settings, "ingested_at": now}]),
    ):
        tables.replace_rows(conn, table, source=source, remove_paths=None,
                            rows=tables.frame(table, rows))


def repository_figures(conn: duckdb.DuckDBPyConnection, source: str) -> dict:
    """Stored totals of a repository, with files by language and commits by author."""
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
    return {"commits": commits, "repo_files": files, "repo_docs": docs, "failed": failed,
            "files_by_language": dict(languages), "commits_by_author": dict(authors)}


def sync_counts(sync: RepoSync, stored: StoredRepo, figures: dict) -> ItemCounts:
    """Counted per document, as the chunks layer counts them: commits and docs (a doc read
    again because its blob changed is changed, a first read is new; a doc is deleted only
    when it was stored and is no longer at the head — ``removed_docs`` also names the docs
    rewritten or failed, whose old rows go)."""
    read = {doc["path"] for doc in sync.docs}
    failed = {failure["path"] for failure in sync.failures}
    deleted_docs = {path for path in sync.removed_docs
                    if path in stored.docs and path not in read | failed}
    changed_docs = sum(1 for path in read if path in stored.docs)
    return ItemCounts(
        new=len(sync.new_commits) + len(sync.docs) - changed_docs, changed=changed_docs,
        unchanged=figures["commits"] - len(sync.new_commits) + figures["repo_docs"]
        - len(sync.docs),
        deleted=len(sync.removed_shas) + len(deleted_docs), failed=figures["failed"])

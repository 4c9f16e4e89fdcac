"""A repository's rows in the tables: what earlier runs stored, and writing a sync."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import duckdb

from jarvis_core.progress import Stopwatch
from jarvis_core.sources.kind import Ingested, IngestRun, SourceUnreachable
from jarvis_core.sources.plan import ItemCounts, failure_row
from jarvis_core.sources.repo.code.modifies import symbol_settings
from jarvis_core.sources.repo.git import GitError, mirror
from jarvis_core.sources.repo.settings import RepoConfig
from jarvis_core.sources.repo.sync import RepoSync, StoredRepo, language, sync_repository
from jarvis_core.sources.repo.tables import (
    COMMIT_FILES,
    COMMIT_SYMBOLS,
    COMMIT_SYMBOLS_PENDING,
    COMMITS,
    REPO_DOCS,
    REPO_FILES,
    REPO_KNOWLEDGE,
    REPO_STATE,
    TABLES,
)
from jarvis_core.stores import tables


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


def checkout(repo: RepoConfig, destination: Path, source: str, warn) -> str:
    """Clone or fetch a repository configured by ``url`` into ``destination`` (a local clone
    is read in place); what was done, for the metadata. A failed fetch of an existing clone
    is a warning."""
    if repo.url is None:
        return "local"
    try:
        return mirror(repo.url, destination)
    except GitError as exc:
        if not destination.exists():
            raise
        warn(f"{source}: fetch failed, ingesting the copy already cloned: {exc}")
        return "fetch failed"


def remove_repository(conn: duckdb.DuckDBPyConnection, source: str) -> None:
    """Every row of a repository that is no longer configured."""
    for table in (*TABLES, tables.INGEST_FAILURES):
        tables.replace_rows(conn, table, source=source, remove_paths=None, rows=[])


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
    """Add what the sync read, remove what it found gone, replace files, failures, state;
    the commits of ``sync.symbol_commits`` are left for the code layer to map to symbols
    (all of them again when the settings they are mapped with changed)."""
    commit_rows, file_rows = _commit_rows(source, sync, now)
    reset = None if sync.symbols_reset else sync.removed_shas
    for table, key, remove, rows in (
        (COMMITS, "sha", sync.removed_shas, commit_rows),
        (COMMIT_FILES, "sha", sync.removed_shas, file_rows),
        (COMMIT_SYMBOLS, "sha", reset, []),
        (COMMIT_SYMBOLS_PENDING, "sha", reset,
         [{"source": source, "sha": sha} for sha in sync.symbol_commits]),
        (REPO_DOCS, "path", sync.removed_docs, [{"source": source, **doc} for doc in sync.docs]),
        (REPO_KNOWLEDGE, "path", sync.removed_knowledge,
         [{"source": source, **row} for row in sync.knowledge]),
    ):
        tables.replace_rows(conn, table, source=source, remove_paths=remove, rows=rows,
                            key_column=key)
    for table, rows in (
        (REPO_FILES, [{"source": source, "path": e.path, "language": language(e.path),
                         "size_bytes": e.size_bytes, "blob_sha": e.blob_sha}
                        for e in sync.files]),
        (tables.INGEST_FAILURES, [failure_row(source, f["path"], f["reason"], detected_at=now)
                             for f in sync.failures]),
        (REPO_STATE, [{"source": source, "branch": branch, "head": sync.head,
                         "shallow": sync.shallow, "commit_count": sync.commit_count,
                         "settings": sync.settings, "ingested_at": now}]),
    ):
        tables.replace_rows(conn, table, source=source, remove_paths=None, rows=rows)


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
    return {"commits": commits, "repo_files": files,
            "repo_docs": docs, "failed": failed,
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


def _warn_sync(run: IngestRun, sync: RepoSync, stored_head: str | None) -> None:
    for warning in sync.warnings:
        run.warn(f"{run.source}/{warning}")
    if sync.shallow:
        run.warn(f"{run.source}: shallow clone, history ingested as far as it goes")
    if sync.rewritten:
        run.warn(f"{run.source}: history rewritten (the last ingested head "
                 f"{stored_head[:12]} is gone); {len(sync.removed_shas)} unreachable commits "
                 "removed")


def ingest(run: IngestRun) -> Ingested:
    """The commits not stored yet read (unreachable ones removed), the files and docs at the
    branch head; a ``url:`` repository cloned once and fetched afterwards."""
    source, repo, watch = run.source, run.settings, Stopwatch()
    if repo is None:
        with run.connect() as conn:
            remove_repository(conn, source)
        run.warn(f"{source}: no longer configured, its repository rows were removed")
        return Ingested(counts={}, rows=0, location=None)
    destination = repo.checkout(run.data_dir, source)
    with run.connect() as conn:
        stored = read_stored(conn, source)
    try:
        cloned = checkout(repo, destination, source, run.warn)
        sync = sync_repository(destination, stored, branch=repo.branch, docs=repo.docs,
                               knowledge_dir=repo.knowledge_dir, exclude=repo.exclude,
                               symbol_depth=repo.code.history_commits,
                               symbol_settings=symbol_settings(repo.code))
    except GitError as exc:
        raise SourceUnreachable(str(exc)) from exc
    watch.lap("read")
    _warn_sync(run, sync, stored.head)
    with run.connect() as conn:
        if not sync.unchanged:
            write_sync(conn, source, sync, repo.branch, run.now)
        figures = repository_figures(conn, source)
    watch.lap("write")
    return Ingested(
        counts=sync_counts(sync, stored, figures).as_dict(), rows=figures["commits"],
        location=str(destination), failures=sync.failures,
        preview=[{"sha": c.sha[:10], "author": c.author_name,
                  "date": c.authored_at.isoformat(), "subject": c.subject,
                  "files": len(c.files)} for c in sync.new_commits],
        preview_columns=("sha", "author", "date", "subject", "files"),
        figures={**{key: figures[key] for key in ("commits", "repo_files", "repo_docs")},
                 "head": sync.head, "branch": repo.branch, "checkout": cloned,
                 "shallow": sync.shallow, "history_rewritten": sync.rewritten},
        tables={"files_by_language": figures["files_by_language"],
                "commits_by_author": figures["commits_by_author"]},
        seconds=watch.seconds)

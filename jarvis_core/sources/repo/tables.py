"""The raw tables of a git repository: commits reachable from the configured branch, the files
each changed, the files and docs at its head, its ``.jarvis`` knowledge, the head last
ingested, and its source code's files, symbols and references (code/tables.py). Declared
once as polars schemas; the DDL is generated from them."""

from __future__ import annotations

import polars as pl

from jarvis_core.sources.repo.code.tables import CODE_TABLES
from jarvis_core.stores.tables import Table

COMMITS = Table("commits", pl.Schema({
    "source": pl.Utf8, "sha": pl.Utf8, "parents": pl.List(pl.Utf8),
    "author_name": pl.Utf8, "author_email": pl.Utf8, "authored_at": pl.Datetime("us"),
    "committer_name": pl.Utf8, "committer_email": pl.Utf8, "committed_at": pl.Datetime("us"),
    "subject": pl.Utf8, "message": pl.Utf8, "files_changed": pl.Int32,
    "additions": pl.Int32, "deletions": pl.Int32, "ingested_at": pl.Datetime("us"),
}), ("source", "sha"))

COMMIT_FILES = Table("commit_files", pl.Schema({
    "source": pl.Utf8, "sha": pl.Utf8, "path": pl.Utf8, "old_path": pl.Utf8,
    "additions": pl.Int32, "deletions": pl.Int32, "binary": pl.Boolean,
}))

# The symbols a commit modified (code/modifies.py), for the newest commits only
# (``code.history_commits``): lines ``start_line``-``end_line`` of the file as the commit left
# it are the ones it touched in the symbol, with the lines it added and deleted there.
COMMIT_SYMBOLS = Table("commit_symbols", pl.Schema({
    "source": pl.Utf8, "sha": pl.Utf8, "path": pl.Utf8, "symbol_id": pl.Utf8,
    "start_line": pl.Int32, "end_line": pl.Int32, "additions": pl.Int32, "deletions": pl.Int32,
}), ("source", "sha", "path", "symbol_id"))

# The commits whose modified symbols are still to be found: listed by the raw repository
# layer as it reads them, mapped by the code layer after it has parsed the head (so a blob at
# the head is parsed once), and kept until then, whatever fails in between.
COMMIT_SYMBOLS_PENDING = Table("commit_symbols_pending", pl.Schema({
    "source": pl.Utf8, "sha": pl.Utf8,
}), ("source", "sha"))

REPO_FILES = Table("repo_files", pl.Schema({
    "source": pl.Utf8, "path": pl.Utf8, "language": pl.Utf8, "size_bytes": pl.Int64,
    "blob_sha": pl.Utf8,
}), ("source", "path"))

REPO_DOCS = Table("repo_docs", pl.Schema({
    "source": pl.Utf8, "path": pl.Utf8, "title": pl.Utf8, "text": pl.Utf8, "blob_sha": pl.Utf8,
    "modified_at": pl.Datetime("us"),
}), ("source", "path"))

REPO_KNOWLEDGE = Table("repo_knowledge", pl.Schema({
    "source": pl.Utf8, "path": pl.Utf8, "blob_sha": pl.Utf8, "components": pl.Utf8,
    "error": pl.Utf8,
}), ("source", "path"))

REPO_STATE = Table("repo_state", pl.Schema({
    "source": pl.Utf8, "branch": pl.Utf8, "head": pl.Utf8, "shallow": pl.Boolean,
    "commit_count": pl.Int64, "settings": pl.Utf8, "ingested_at": pl.Datetime("us"),
}), ("source",))

TABLES = (COMMITS, COMMIT_FILES, COMMIT_SYMBOLS, COMMIT_SYMBOLS_PENDING, REPO_FILES,
          REPO_DOCS, REPO_KNOWLEDGE, REPO_STATE, *CODE_TABLES)

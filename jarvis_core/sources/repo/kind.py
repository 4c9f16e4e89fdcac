"""The repository kind: a git repository's commits and, at its branch head, its files and
docs."""

from __future__ import annotations

from jarvis_core.sources.kind import Details, DocumentType, RawAsset, SourceKind
from jarvis_core.sources.repo.changes import WATCH
from jarvis_core.sources.repo.settings import RepoConfig

REPO = SourceKind(
    name="repo", package=__package__, section="repos", label="repository", settings=RepoConfig,
    asset=RawAsset(
        "raw_repository",
        "Commits of one repository (partition) reachable from its branch, with the files each "
        "changed; the files (with language) and docs at the branch head; ``.jarvis`` "
        "knowledge.\n\nOnly commits not stored yet are read; commits no longer reachable (a "
        "force-push) are removed, and everything built from them follows. A repository "
        "configured by ``url`` is cloned into the data directory once and fetched on later "
        "runs.",
        ("duckdb", "git")),
    documents=(
        DocumentType("commit", """
            SELECT source, 'commit' AS source_type, 'commit:' || source || '/' || sha AS doc_key,
                   'commits/' || sha AS path, subject AS title, message AS text,
                   sha AS doc_hash, committed_at AS modified_at, []::VARCHAR[] AS tags,
                   [sha] AS names
            FROM commits WHERE source = $1""", Details(
            facts="""
                SELECT authored_at AS created_at, sha,
                       author_name || ' <' || author_email || '>' AS author,
                       committer_name || ' <' || committer_email || '>' AS committer,
                       committed_at, parents, files_changed, additions, deletions
                FROM commits WHERE source = $1 AND 'commits/' || sha = $2""",
            lists={"files": """
                SELECT path, old_path AS renamed_from, additions, deletions, "binary"
                FROM commit_files WHERE source = $1 AND 'commits/' || sha = $2
                ORDER BY path"""})),
        DocumentType("repo_doc", """
            SELECT source, 'repo_doc' AS source_type,
                   'repo_doc:' || source || '/' || path AS doc_key, path, title, text,
                   blob_sha AS doc_hash, modified_at, []::VARCHAR[] AS tags,
                   []::VARCHAR[] AS names
            FROM repo_docs WHERE source = $1""", Details(facts="""
            SELECT d.blob_sha, f.language, f.size_bytes
            FROM repo_docs d LEFT JOIN repo_files f USING (source, path)
            WHERE d.source = $1 AND d.path = $2""")),
    ),
    serving={"commits": "SELECT * EXCLUDE (message) FROM commits",
             # the files a commit changed, with their +/- lines: what opening a commit shows
             "commit_files": "SELECT * FROM commit_files",
             "repo_files": "SELECT * FROM repo_files",
             "repo_docs": "SELECT * EXCLUDE (text) FROM repo_docs",
             # what the repository's change watch compares with (the last ingested head)
             "repo_state": "SELECT * FROM repo_state"},
    counts={"commits": "commits", "repo_files": "repo_files", "repo_docs": "repo_docs"},
    ingested="commits",
    watch=WATCH,
)

"""The repository kind: a git repository's commits and, at its branch head, its files, docs
and source code (one document per symbol, chunked as code)."""

from __future__ import annotations

from jarvis_core.sources.kind import Details, DocumentType, RawAsset, RowsCheck, SourceKind
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
        DocumentType("code", """
            SELECT source, 'code' AS source_type,
                   'code:' || source || '/' || path || '::' || symbol_id AS doc_key,
                   path || '::' || symbol_id AS path, qualified_name AS title,
                   -- a doc comment above the definition (all but Python's docstrings,
                   -- which are in the body) heads its text, as in the file
                   CASE WHEN language = 'python' OR coalesce(doc, '') = '' THEN text
                        ELSE '// ' || replace(doc, chr(10), chr(10) || '// ') || chr(10)
                             || text END AS text,
                   md5(concat_ws('|', kind, qualified_name, doc, text)) AS doc_hash,
                   (SELECT c.committed_at FROM repo_state r JOIN commits c
                      ON c.source = r.source AND c.sha = r.head
                    WHERE r.source = $1) AS modified_at,
                   []::VARCHAR[] AS tags,
                   list_distinct([lower(name), lower(qualified_name)]) AS names
            FROM code_symbols WHERE source = $1""", Details(
            facts="""
                SELECT kind, language, signature, doc, path AS file, start_line, end_line,
                       parent
                FROM code_symbols WHERE source = $1 AND path || '::' || symbol_id = $2""",
            lists={"members": """
                SELECT symbol_id, kind, signature, start_line FROM code_symbols
                WHERE source = $1 AND path || '::' || parent = $2 ORDER BY start_line"""}),
            code=True),
    ),
    serving={"commits": "SELECT * EXCLUDE (message) FROM commits",
             # the files a commit changed, with their +/- lines: what opening a commit shows
             "commit_files": "SELECT * FROM commit_files",
             "repo_files": "SELECT * FROM repo_files",
             "repo_docs": "SELECT * EXCLUDE (text) FROM repo_docs",
             # what the repository's change watch compares with (the last ingested head)
             "repo_state": "SELECT * FROM repo_state",
             "code_files": "SELECT * FROM code_files",
             # a symbol's code is in its chunks
             "code_symbols": "SELECT * EXCLUDE (text) FROM code_symbols"},
    counts={"commits": "commits", "repo_files": "repo_files", "repo_docs": "repo_docs",
            "code_symbols": "code_symbols"},
    ingested="commits",
    watch=WATCH,
    layers=(RawAsset(
        "code_symbols",
        "The source code of one repository (partition) at its branch head: per file of a "
        "language Jarvis parses (tree-sitter), its definitions (classes, functions, methods, "
        "constants... with signature, docstring and line span) and the names it calls, "
        "imports and extends. Only files whose blob changed are parsed again; files gone "
        "from the head leave every layer. A file that does not parse cleanly keeps the "
        "symbols found (partial) and one too big, minified, binary, generated or vendored "
        "is skipped, each with its reason.",
        ("duckdb", "treesitter"), module="code.ingest", checks=(
            RowsCheck("symbol_files_at_head",
                      "Every symbol's file is at the repository's head (in repo_files).", """
                SELECT s.path, count(*) AS symbols FROM code_symbols s
                WHERE s.source = $1 AND NOT EXISTS (
                    SELECT 1 FROM repo_files f WHERE f.source = s.source AND f.path = s.path)
                GROUP BY s.path ORDER BY s.path"""),
            RowsCheck("code_parse_failed_ratio",
                      "Share of code files that parsed with syntax errors (partial) stays "
                      "under ingest.max_failed_ratio (warning).", """
                SELECT count(*) FILTER (WHERE status = 'partial') AS partial,
                       count(*) AS files,
                       round(count(*) FILTER (WHERE status = 'partial') / count(*), 4) AS ratio
                FROM code_files WHERE source = $1
                HAVING count(*) > 0
                   AND count(*) FILTER (WHERE status = 'partial') / count(*) > $2"""),
        )),),
)

"""Reading a git repository through the git CLI: commits, files and docs at a branch head.

Everything goes through git's machine-readable output (``log -z --numstat``, ``ls-tree -r
-l -z``, ``cat-file --batch``), never through object files. Ingestion is incremental:
the commits to add are those reachable from the head and not stored yet, the commits to
remove those stored and no longer reachable (a force-push or a rewritten history), so no
ancestry bookkeeping can go stale. Problems with one commit or one doc become failures
of that item; a path that is no repository, an unknown branch or a broken history fail
the repository with a ``GitError`` that says which and why."""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from fnmatch import fnmatch
from pathlib import Path, PurePosixPath

from pygments.lexers import find_lexer_class_for_filename
from pygments.util import ClassNotFound

from jarvis_core.sources.decoding import NoteReadError, decode_note_bytes
from jarvis_core.sources.repo.git import (
    CommitRecord,
    GitError,
    TreeEntry,
    is_shallow,
    last_changed,
    list_tree,
    open_repository,
    reachable,
    read_blobs,
    read_commits,
    resolve_head,
    walk_history,
)
from jarvis_core.sources.repo.knowledge import (
    KNOWLEDGE_VERSION,
    is_knowledge_file,
    knowledge_json,
    parse_knowledge,
)

MAX_DOC_BYTES = 2 * 1024 * 1024




@functools.lru_cache(maxsize=4096)
def _language_by_name(name: str) -> str | None:
    try:
        lexer = find_lexer_class_for_filename(name)
    except ClassNotFound:
        return None
    return lexer.name if lexer is not None else None


def language(path: str) -> str | None:
    """The language of a file by its name, as Pygments' lexers know it ('Python', 'SQL')."""
    name = PurePosixPath(path).name
    suffix = PurePosixPath(name).suffix
    probe = f"x{suffix}" if suffix and suffix != name else name
    return _language_by_name(probe) or _language_by_name(probe.lower())  # SCHEMA.SQL


def matches(path: str, patterns: Iterable[str]) -> bool:
    """Glob match from the repository root; ``**/`` also matches no folder at all."""
    return any(fnmatch(path, pattern) or ("**/" in pattern and
                                          fnmatch(path, pattern.replace("**/", "")))
               for pattern in patterns)


def doc_title(path: str, text: str) -> str:
    """The first markdown heading, else the file name."""
    for line in text.splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    return PurePosixPath(path).name


def decode_doc(path: str, data: bytes) -> tuple[str, list[str]]:
    """A doc's text (UTF-8/UTF-16 with BOM, bad bytes replaced); NoteReadError if too big
    or binary."""
    if len(data) > MAX_DOC_BYTES:
        raise NoteReadError(f"{len(data)} bytes, over the {MAX_DOC_BYTES}-byte limit for docs")
    return decode_note_bytes(data)


@dataclass
class StoredRepo:
    """What the tables hold for a repository from earlier runs."""

    head: str | None = None
    settings: str | None = None
    shas: set[str] = field(default_factory=set)
    docs: dict[str, str] = field(default_factory=dict)       # path -> blob sha
    knowledge: dict[str, str] = field(default_factory=dict)  # path -> blob sha


@dataclass
class RepoSync:
    """What a run changes: rows to add, keys to remove, per-item failures."""

    head: str
    shallow: bool
    settings: str
    unchanged: bool = False       # same head and settings as the last run: nothing to do
    rewritten: bool = False       # the last head is no longer reachable (a force-push)
    commit_count: int = 0
    new_commits: list[CommitRecord] = field(default_factory=list)
    removed_shas: list[str] = field(default_factory=list)
    files: list[TreeEntry] = field(default_factory=list)
    docs: list[dict] = field(default_factory=list)
    removed_docs: set[str] = field(default_factory=set)
    unchanged_docs: int = 0
    knowledge: list[dict] = field(default_factory=list)
    removed_knowledge: set[str] = field(default_factory=set)
    failures: list[dict] = field(default_factory=list)  # path, reason
    warnings: list[str] = field(default_factory=list)
    # the commits whose modified symbols this run finds (code/modifies.py); all stored ones
    # are replaced when the settings they were found with changed
    symbol_commits: list[str] = field(default_factory=list)
    symbols_reset: bool = False


def _modified(repo: Path, head: str, path: str, sync: RepoSync) -> datetime | None:
    """When ``path`` last changed; None, with a warning, when the history cannot tell."""
    try:
        return last_changed(repo, head, path)
    except GitError as exc:
        sync.warnings.append(f"{path}: when it last changed is unknown ({exc})")
        return None


def settings_id(branch: str, docs: Sequence[str], knowledge_dir: str,
                exclude: Sequence[str], symbol_settings: str = "") -> str:
    """What shapes the rows besides the history; a change re-reads files and docs, and
    finds the symbols the newest commits modified again."""
    return json.dumps([branch, list(docs), knowledge_dir, list(exclude), KNOWLEDGE_VERSION,
                       *([symbol_settings] if symbol_settings else [])])


def sync_repository(repo: Path, stored: StoredRepo, *, branch: str, docs: Sequence[str],
                    knowledge_dir: str, exclude: Sequence[str], symbol_depth: int = 0,
                    symbol_settings: str = "") -> RepoSync:
    """Compare the repository at ``branch`` with what is stored and read what is new. Of
    the commits read, the newest ``symbol_depth`` are the ones whose modified symbols are
    found; of the whole history when ``symbol_settings`` (what those are found with)
    changed."""
    open_repository(repo)
    head = resolve_head(repo, branch)
    settings = settings_id(branch, docs, knowledge_dir, exclude, symbol_settings)
    sync = RepoSync(head=head, shallow=is_shallow(repo), settings=settings)
    if head == stored.head and settings == stored.settings:
        sync.unchanged = True
        return sync
    try:
        history, broken = reachable(repo, head), []
    except GitError:
        history, broken = walk_history(repo, head)
        if not broken:
            raise
    sync.failures += [{"path": f"commits/{sha}", "reason": reason} for sha, reason in broken]
    sync.commit_count = len(history)
    present = set(history)
    sync.rewritten = stored.head is not None and stored.head not in present and not broken
    # a history cut short by a corrupt commit keeps what earlier runs read behind it
    sync.removed_shas = [] if broken else sorted(stored.shas - present)
    commits, failed = read_commits(repo, [sha for sha in history if sha not in stored.shas])
    sync.new_commits = commits
    sync.warnings += [f"commits/{c.sha}: {c.warning}" for c in commits if c.warning]
    sync.failures += [{"path": f"commits/{sha}", "reason": reason} for sha, reason in failed]
    sync.symbols_reset = settings != stored.settings
    sync.symbol_commits = (history if sync.symbols_reset
                           else [commit.sha for commit in commits])[:symbol_depth]

    sync.files = [entry for entry in list_tree(repo, head) if not matches(entry.path, exclude)]
    wanted = {entry.path: entry for entry in sync.files
              if matches(entry.path, docs) or is_knowledge_file(entry.path, knowledge_dir)}
    sync.removed_docs = set(stored.docs) - set(wanted)
    sync.removed_knowledge = set(stored.knowledge) - {
        path for path in wanted if is_knowledge_file(path, knowledge_dir)}
    changed = {path: entry for path, entry in wanted.items()
               if stored.docs.get(path) != entry.blob_sha
               or (is_knowledge_file(path, knowledge_dir)
                   and stored.knowledge.get(path) != entry.blob_sha)}
    sync.unchanged_docs = len(wanted) - len(changed)
    sync.failures += [{"path": entry.path, "reason": f"object {entry.blob_sha} is missing"}
                      for entry in sync.files
                      if entry.size_bytes is None and entry.path not in wanted]
    blobs = read_blobs(repo, (entry.blob_sha for entry in changed.values()))
    for path, entry in sorted(changed.items()):
        sync.removed_docs.add(path)  # rewritten below unless it fails
        content = blobs[entry.blob_sha]
        try:
            if isinstance(content, str):
                raise NoteReadError(content)
            text, warnings = decode_doc(path, content)
            sync.warnings += [f"{path}: {warning}" for warning in warnings]
        except NoteReadError as exc:
            sync.failures.append({"path": path, "reason": str(exc)})
            continue
        sync.docs.append({"path": path, "title": doc_title(path, text), "text": text,
                          "blob_sha": entry.blob_sha,
                          "modified_at": None if broken else _modified(repo, head, path, sync)})
        if is_knowledge_file(path, knowledge_dir):
            sync.removed_knowledge.add(path)
            try:
                components, error = knowledge_json(parse_knowledge(text)), None
            except ValueError as exc:
                components, error = None, f"{path}: {exc}"
                sync.failures.append({"path": path, "reason": str(exc)})
            sync.knowledge.append({"path": path, "blob_sha": entry.blob_sha,
                                   "components": components, "error": error})
    return sync

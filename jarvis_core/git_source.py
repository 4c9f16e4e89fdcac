"""Reading a git repository through the git CLI: commits, files and docs at a branch head.

Everything goes through git's machine-readable output (``log -z --numstat``, ``ls-tree -r
-l -z``, ``cat-file --batch``), never through object files. Ingestion is incremental:
the commits to add are those reachable from the head and not stored yet, the commits to
remove those stored and no longer reachable (a force-push or a rewritten history), so no
ancestry bookkeeping can go stale. Problems with one commit or one doc become failures
of that item; a path that is no repository, an unknown branch or a broken history fail
the repository with a ``GitError`` that says which and why.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from fnmatch import fnmatch
from pathlib import Path, PurePosixPath

import yaml
from pygments.lexers import find_lexer_class_for_filename
from pygments.util import ClassNotFound

from jarvis_core.vault import NoteReadError, decode_note_bytes

GIT_TIMEOUT_SECONDS = 600
LS_REMOTE_TIMEOUT_SECONDS = 60
MAX_DOC_BYTES = 2 * 1024 * 1024
KNOWLEDGE_SUFFIXES = (".yaml", ".yml")
KNOWLEDGE_VERSION = 1  # bump when the interpretation of .jarvis YAML changes
_RECORD, _FIELD = "\x1e", "\x1f"
_LOG_FORMAT = "%x1e" + "%x1f".join(("%H", "%P", "%an", "%ae", "%aI", "%cn", "%ce", "%cI",
                                     "%B")) + "%x1f"


class GitError(RuntimeError):
    """A repository-level problem; the message names the repository and the reason."""


def git(repo: Path, *args: str, stdin: bytes | None = None, check: bool = True) -> bytes:
    """Run git in ``repo`` and return its stdout; never looks above ``repo`` for a repository
    (so a folder inside another checkout is not mistaken for it) and never prompts."""
    env = {**os.environ, "GIT_CEILING_DIRECTORIES": str(repo.parent), "GIT_TERMINAL_PROMPT": "0",
           "LC_ALL": "C", "GIT_PAGER": "cat"}
    env.pop("GIT_DIR", None)
    try:
        done = subprocess.run(["git", "-C", str(repo), *args], input=stdin, env=env,
                              capture_output=True, timeout=GIT_TIMEOUT_SECONDS, check=False)
    except FileNotFoundError as exc:
        raise GitError("the git command is not installed") from exc
    except subprocess.TimeoutExpired as exc:
        raise GitError(f"{repo}: git {args[0]} took over {GIT_TIMEOUT_SECONDS} s") from exc
    if check and done.returncode != 0:
        message = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise GitError(f"{repo}: git {' '.join(args[:2])} failed: "
                       f"{message[-1] if message else f'exit status {done.returncode}'}")
    return done.stdout


def open_repository(path: Path) -> Path:
    """``path`` checked to be a git repository (work tree or bare); GitError otherwise."""
    if not path.is_dir():
        raise GitError(f"{path}: repository directory does not exist")
    try:
        git(path, "rev-parse", "--git-dir")
    except GitError as exc:
        raise GitError(f"{path}: not a git repository") from exc
    return path


def mirror(url: str, dest: Path) -> str:
    """Clone ``url`` as a mirror into ``dest`` the first time, fetch (pruning, forced, so a
    force-push is followed) afterwards. Returns what was done."""
    if dest.exists():
        git(dest, "remote", "set-url", "origin", url)  # the configured url may have moved
        git(dest, "fetch", "--prune", "--force", "--quiet", "origin")
        return "fetched"
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{dest.name}-", dir=dest.parent))
    try:
        git(staging, "clone", "--mirror", "--quiet", url, str(staging / "repo"))
        (staging / "repo").rename(dest)  # a half-finished clone never looks like a repository
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return "cloned"


def resolve_head(repo: Path, branch: str) -> str:
    try:
        return git(repo, "rev-parse", "--verify", "--quiet", f"{branch}^{{commit}}"
                   ).decode().strip()
    except GitError as exc:
        raise GitError(f"{repo}: branch {branch!r} does not name a commit "
                       "(an empty repository, or a branch that does not exist)") from exc


def remote_head(url: str, branch: str) -> str:
    """The commit ``branch`` names on a remote (or a bundle), without cloning it."""
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}
    try:
        done = subprocess.run(["git", "ls-remote", "--", url], capture_output=True, env=env,
                              timeout=LS_REMOTE_TIMEOUT_SECONDS, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise GitError(f"{url}: git ls-remote failed: {exc}") from exc
    if done.returncode != 0:
        lines = done.stderr.decode("utf-8", "replace").strip().splitlines()
        raise GitError(f"{url}: git ls-remote failed: "
                       f"{lines[-1] if lines else f'exit status {done.returncode}'}")
    refs = dict(reversed(line.split("\t", 1)) for line in done.stdout.decode().splitlines()
                if "\t" in line)
    for ref in (branch, f"refs/heads/{branch}", f"refs/tags/{branch}"):
        if ref in refs:
            return refs[ref]
    raise GitError(f"{url}: the remote has no branch {branch!r}")


def is_shallow(repo: Path) -> bool:
    return git(repo, "rev-parse", "--is-shallow-repository").decode().strip() == "true"


def reachable(repo: Path, head: str) -> list[str]:
    """Every commit reachable from ``head``, newest first (parents after children)."""
    return git(repo, "rev-list", "--topo-order", head).decode().split()


@dataclass
class CommitRecord:
    sha: str
    parents: list[str]
    author_name: str
    author_email: str
    authored_at: datetime
    committer_name: str
    committer_email: str
    committed_at: datetime
    message: str
    files: list[dict] = field(default_factory=list)  # path, old_path, additions, deletions
    warning: str | None = None    # e.g. a message git could not re-encode as UTF-8

    @property
    def subject(self) -> str:
        return self.message.split("\n", 1)[0].strip()


def _utc(iso: str) -> datetime:
    return datetime.fromisoformat(iso).astimezone(UTC).replace(tzinfo=None)


def _numstat(raw: str) -> list[dict]:
    """``added\\tdeleted\\tpath\\0`` entries, a rename as ``added\\tdeleted\\t\\0old\\0new\\0``;
    binary files count '-'."""
    tokens = raw.split("\0")
    files, at = [], 0
    while at < len(tokens):
        entry = tokens[at].lstrip("\n")  # git ends the commit header with a line break
        at += 1
        if not entry.strip():
            continue
        added, deleted, path = entry.split("\t", 2)
        old_path = None
        if not path:
            old_path, path = tokens[at], tokens[at + 1]
            at += 2
        binary = added == "-"
        files.append({"path": path, "old_path": old_path, "binary": binary,
                      "additions": None if binary else int(added),
                      "deletions": None if binary else int(deleted)})
    return files


def _parse_log(raw: bytes) -> list[CommitRecord]:
    """Git re-encodes messages to UTF-8 from their declared encoding; a message in an
    encoding git does not know arrives as it is, and is decoded with replacement characters
    and a warning."""
    records = []
    for data in raw.split(_RECORD.encode())[1:]:
        warning = None
        try:
            record = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            record = data.decode("utf-8", "replace")
            warning = (f"not valid UTF-8 at byte {exc.start} (an encoding git does not know); "
                       "undecodable bytes replaced with U+FFFD")
        fields = record.split(_FIELD)
        sha, parents, an, ae, ad, cn, ce, cd, message = fields[:9]
        records.append(CommitRecord(
            sha=sha, parents=parents.split(), author_name=an, author_email=ae,
            authored_at=_utc(ad), committer_name=cn, committer_email=ce,
            committed_at=_utc(cd), message=message.strip(),
            files=_numstat(_FIELD.join(fields[9:])), warning=warning))
    return records


def read_commits(repo: Path, shas: Sequence[str], batch: int = 2000
                 ) -> tuple[list[CommitRecord], list[tuple[str, str]]]:
    """The commits ``shas`` with the files each changed (renames followed; a merge lists
    none, its changes belong to the commits merged). A batch git cannot read is retried
    commit by commit, so one corrupt commit is one failure: (sha, reason)."""
    commits, failures = [], []

    def log(part: Sequence[str]) -> list[CommitRecord]:
        return _parse_log(git(repo, "log", "--no-walk=unsorted", "--stdin", "-z", "--numstat",
                              "-M", f"--format={_LOG_FORMAT}",
                              stdin="\n".join(part).encode() + b"\n"))

    for start in range(0, len(shas), batch):
        part = shas[start:start + batch]
        try:
            commits.extend(log(part))
        except GitError:
            for sha in part:
                try:
                    commits.extend(log([sha]))
                except GitError as exc:
                    failures.append((sha, str(exc).rpartition(": ")[2] or str(exc)))
    return commits, failures


@dataclass(frozen=True)
class TreeEntry:
    path: str
    blob_sha: str
    size_bytes: int | None  # None when git cannot read the blob (a missing object)


def list_tree(repo: Path, head: str) -> list[TreeEntry]:
    """The files (blobs, symlinks included) at ``head``; submodules are left out."""
    entries = []
    for item in git(repo, "ls-tree", "-r", "-l", "-z", head).split(b"\0"):
        if not item:
            continue
        meta, _, path = item.partition(b"\t")
        _mode, kind, sha, size = meta.split()
        if kind == b"blob":
            entries.append(TreeEntry(path.decode("utf-8", "replace"), sha.decode(),
                                     int(size) if size.isdigit() else None))
    return entries


def read_blobs(repo: Path, shas: Iterable[str]) -> dict[str, bytes | str]:
    """Blob contents by sha through one ``cat-file --batch``; a missing object maps to the
    reason instead of bytes."""
    wanted = list(dict.fromkeys(shas))
    if not wanted:
        return {}
    out = git(repo, "cat-file", "--batch", stdin="\n".join(wanted).encode() + b"\n")
    found: dict[str, bytes | str] = {}
    at = 0
    for sha in wanted:
        end = out.index(b"\n", at)
        header = out[at:end].split()
        at = end + 1
        if len(header) < 3:
            found[sha] = f"object {sha} is {header[-1].decode() if header else 'unreadable'}"
            continue
        size = int(header[2])
        found[sha] = out[at:at + size]
        at += size + 1
    return found


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


def is_knowledge_file(path: str, knowledge_dir: str) -> bool:
    folder = knowledge_dir.strip("/")
    return bool(folder) and path.startswith(folder + "/") and path.endswith(KNOWLEDGE_SUFFIXES)


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


def last_changed(repo: Path, head: str, path: str) -> datetime | None:
    """When the commit that last changed ``path`` (up to ``head``) was made."""
    out = git(repo, "log", "-1", "--format=%cI", head, "--", path).decode().strip()
    return _utc(out) if out else None


# -- .jarvis knowledge --------------------------------------------------------------------

RELATION_FIELDS = {"depends_on": "DEPENDS_ON", "part_of": "PART_OF", "uses": "USES",
                   "calls": "CALLS", "provides": "PROVIDES", "consumes": "CONSUMES",
                   "replaces": "REPLACES", "related": "RELATED_TO"}
_COMPONENT_FIELDS = {"name", "description", "owners", "paths", "relations", *RELATION_FIELDS}


def _names(value: object, where: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    raise ValueError(f"{where} must be a name or a list of names")


def parse_knowledge(text: str) -> list[dict]:
    """Components declared in a ``.jarvis`` YAML file, normalised and sorted:
    ``{name, description, owners, paths, relations: [(RELATION, target)]}``.

    The file holds ``components:`` (a list of mappings with ``name`` and optional
    ``description``, ``owners``, ``paths``, relation fields such as ``depends_on`` and
    ``part_of``, and ``relations: [{type, target}]`` for any other relation). Raises
    ValueError saying what is wrong."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ValueError(f"not valid YAML: {exc}") from exc
    if data is None:
        return []
    if not isinstance(data, dict) or not isinstance(data.get("components", []), list):
        raise ValueError("the top level must be a mapping with a 'components' list")
    components = {}
    for index, item in enumerate(data.get("components") or []):
        where = f"components[{index}]"
        if not isinstance(item, dict) or not isinstance(item.get("name"), str) \
                or not item["name"].strip():
            raise ValueError(f"{where} must be a mapping with a 'name'")
        unknown = sorted(set(item) - _COMPONENT_FIELDS)
        if unknown:
            raise ValueError(f"{where} ({item['name']}): unknown field(s) {', '.join(unknown)}")
        relations = {(RELATION_FIELDS[name], target) for name in RELATION_FIELDS
                     for target in _names(item.get(name), f"{where}.{name}")}
        for at, relation in enumerate(item.get("relations") or []):
            if not isinstance(relation, dict) or not {"type", "target"} <= set(relation):
                raise ValueError(f"{where}.relations[{at}] needs 'type' and 'target'")
            kind = str(relation["type"]).strip().upper().replace(" ", "_").replace("-", "_")
            relations.add((kind, str(relation["target"])))
        description = item.get("description")
        components[item["name"].strip()] = {
            "name": item["name"].strip(),
            "description": description.strip() if isinstance(description, str) else None,
            "owners": sorted(_names(item.get("owners"), f"{where}.owners")),
            "paths": sorted(_names(item.get("paths"), f"{where}.paths")),
            "relations": sorted(relations)}
    return [components[name] for name in sorted(components)]


def knowledge_json(components: list[dict]) -> str:
    return json.dumps({"version": KNOWLEDGE_VERSION, "components": components},
                      sort_keys=True, ensure_ascii=False)


# -- one incremental sync -----------------------------------------------------------------

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


def settings_id(branch: str, docs: Sequence[str], knowledge_dir: str,
                exclude: Sequence[str]) -> str:
    """What shapes the rows besides the history; a change re-reads files and docs."""
    return json.dumps([branch, list(docs), knowledge_dir, list(exclude), KNOWLEDGE_VERSION])


def sync_repository(repo: Path, stored: StoredRepo, *, branch: str, docs: Sequence[str],
                    knowledge_dir: str, exclude: Sequence[str]) -> RepoSync:
    """Compare the repository at ``branch`` with what is stored and read what is new."""
    open_repository(repo)
    head = resolve_head(repo, branch)
    settings = settings_id(branch, docs, knowledge_dir, exclude)
    sync = RepoSync(head=head, shallow=is_shallow(repo), settings=settings)
    if head == stored.head and settings == stored.settings:
        sync.unchanged = True
        return sync
    history = reachable(repo, head)
    sync.commit_count = len(history)
    present = set(history)
    sync.rewritten = stored.head is not None and stored.head not in present
    sync.removed_shas = sorted(stored.shas - present)
    commits, failed = read_commits(repo, [sha for sha in history if sha not in stored.shas])
    sync.new_commits = commits
    sync.warnings += [f"commits/{c.sha}: {c.warning}" for c in commits if c.warning]
    sync.failures += [{"path": f"commits/{sha}", "reason": reason} for sha, reason in failed]

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
                          "modified_at": last_changed(repo, head, path)})
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

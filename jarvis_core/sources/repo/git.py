"""The git CLI as Jarvis uses it: clone or fetch a mirror, resolve heads, read commits
with their numstat, trees and blobs in batches."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

GIT_TIMEOUT_SECONDS = 600


LS_REMOTE_TIMEOUT_SECONDS = 60


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


def walk_history(repo: Path, head: str) -> tuple[list[str], list[tuple[str, str]]]:
    """What ``reachable`` gives, for a history git cannot walk (a commit object missing or
    corrupt): commit objects are read one by one through ``cat-file --batch`` and a commit
    that cannot be read is a failure (sha, reason) whose ancestors are reached only through
    other paths. Children come before parents."""
    found, failures, seen, wave = [], [], {head}, [head]
    with _ObjectReader(repo) as reader:
        while wave:
            parents = []
            for sha in wave:
                content = reader.read(sha)
                if isinstance(content, str):
                    failures.append((sha, f"{content}; the history behind it is not read"))
                    continue
                found.append(sha)
                for line in content.split(b"\n\n", 1)[0].splitlines():
                    if line.startswith(b"parent ") and (parent := line[7:].decode()) not in seen:
                        seen.add(parent)
                        parents.append(parent)
            wave = parents
    return found, failures


class _ObjectReader:
    """One ``git cat-file --batch`` process read object by object; git exits on a corrupt
    object, so that object is a failure and a new process reads on."""

    def __init__(self, repo: Path) -> None:
        self.repo = repo
        self._process: subprocess.Popen | None = None

    def __enter__(self) -> _ObjectReader:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._stop()

    def _stop(self) -> None:
        if self._process is not None:
            self._process.kill()
            self._process.wait()
            self._process = None

    def read(self, sha: str) -> bytes | str:
        """The object's content, or why it cannot be read."""
        if self._process is None:
            self._process = subprocess.Popen(
                ["git", "-C", str(self.repo), "cat-file", "--batch"], stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                env={**os.environ, "GIT_CEILING_DIRECTORIES": str(self.repo.parent),
                     "LC_ALL": "C"})
        process = self._process
        try:
            process.stdin.write(sha.encode() + b"\n")
            process.stdin.flush()
            header = process.stdout.readline().split()
        except OSError:
            header = []
        if len(header) < 3:
            if not header:
                self._stop()  # git gave up on this object; a fresh process reads the next
            why = header[-1].decode() if header else "corrupt"
            return f"commit object {sha} cannot be read ({why})"
        content = process.stdout.read(int(header[2]) + 1)[:-1]
        return content if header[1] == b"commit" else f"object {sha} is not a commit"


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
    commit by commit, so one corrupt commit (or one git cannot diff, or whose dates cannot
    be read) is one failure: (sha, reason)."""
    commits, failures = [], []

    def log(part: Sequence[str]) -> list[CommitRecord]:
        return _parse_log(git(repo, "log", "--no-walk=unsorted", "--stdin", "-z", "--numstat",
                              "-M", f"--format={_LOG_FORMAT}",
                              stdin="\n".join(part).encode() + b"\n"))

    for start in range(0, len(shas), batch):
        part = shas[start:start + batch]
        try:
            commits.extend(log(part))
        except (GitError, ValueError):
            for sha in part:
                try:
                    commits.extend(log([sha]))
                except (GitError, ValueError) as exc:
                    failures.append((sha, (str(exc).rpartition(": ")[2] or str(exc))
                                     if isinstance(exc, GitError) else f"unreadable: {exc}"))
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


def last_changed(repo: Path, head: str, path: str) -> datetime | None:
    """When the commit that last changed ``path`` (up to ``head``) was made."""
    out = git(repo, "log", "-1", "--format=%cI", head, "--", path).decode().strip()
    return _utc(out) if out else None

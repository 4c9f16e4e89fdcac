"""Which lines a commit's diff touches in each file it changes: the new-side lines each hunk
adds and where it deletes lines, with the file's blob after the commit, read through
``git log -p -U0`` (no context lines: only what changed) for a batch of commits at once.
The code layer maps these lines onto the symbols of the file as the commit left it
(code/modifies.py)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from jarvis_core.sources.repo.git import GitError, git

_HUNK = re.compile(rb"^@@ -\d+(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")
_ESCAPES = {b"a": 7, b"b": 8, b"t": 9, b"n": 10, b"v": 11, b"f": 12, b"r": 13, b'"': 34,
            b"\\": 92}
_OCTAL = re.compile(rb"\\([0-7]{3}|.)")


@dataclass(frozen=True)
class Hunk:
    """One hunk: ``start`` is its first new-side line, or for a pure deletion
    (``new_count`` 0) the line after which lines went (0: the file's start); ``added`` the
    new-side numbers of the lines it adds that are not blank; ``deleted`` how many lines it
    removes that were not blank. Blank lines count for nothing: moving a blank line touches
    no symbol."""

    start: int
    new_count: int
    added: tuple[int, ...]
    deleted: int


@dataclass(frozen=True)
class FileChange:
    """A file a commit changed, as the commit left it (path after a rename) and the hunks
    that changed it."""

    path: str
    blob_sha: str
    hunks: tuple[Hunk, ...]


def _unquote(path: bytes) -> str:
    """A path as git writes it in a diff header: C-quoted when it holds unusual bytes."""
    if path.startswith(b'"') and path.endswith(b'"'):
        path = _OCTAL.sub(lambda m: bytes([int(m[1], 8) if len(m[1]) == 3
                                           else _ESCAPES.get(m[1], m[1][0])]), path[1:-1])
    return path.decode("utf-8", "replace")


def _file_changes(lines: list[bytes]) -> list[FileChange]:
    """The files of one commit's ``-p -U0`` patch with their hunks; a deleted file, one
    without hunks (a pure rename, a mode change, a binary) is left out."""
    changes: list[FileChange] = []
    path, blob, hunks, at = None, None, [], 0

    def close() -> None:
        if path is not None and blob is not None and hunks:
            changes.append(FileChange(path, blob, tuple(hunks)))

    while at < len(lines):
        line = lines[at]
        at += 1
        if line.startswith(b"diff --git "):
            close()
            path, blob, hunks = None, None, []
        elif line.startswith(b"index "):
            blob = line[6:].split(b" ", 1)[0].partition(b"..")[2].decode()
        elif line.startswith(b"+++ "):
            written = line[4:].rstrip(b"\t")  # git ends a path holding a space with a tab
            path = None if written == b"/dev/null" else _unquote(written)[2:]
        elif (found := _HUNK.match(line)) is not None:
            old_count = int(found[1]) if found[1] is not None else 1
            start = int(found[2])
            new_count = int(found[3]) if found[3] is not None else 1
            old_taken, added, deleted, number = 0, [], 0, start
            while (old_taken < old_count or number < start + new_count) and at < len(lines):
                text = lines[at]
                at += 1
                if text.startswith(b"+"):
                    if text[1:].strip():
                        added.append(number)
                    number += 1
                elif text.startswith(b"-"):
                    old_taken += 1
                    deleted += 1 if text[1:].strip() else 0
                # else git's "\ No newline at end of file" (no context lines: -U0, and no
                # hunks joined across unchanged lines: --inter-hunk-context=0)
            if added or deleted:
                hunks.append(Hunk(start, new_count, tuple(added), deleted))
    close()
    return changes


def _patch_log(repo: Path, shas: Sequence[str], pathspecs: Sequence[str]) -> bytes:
    return git(repo, "log", "--no-walk=unsorted", "--stdin", "-p", "-U0",
               "--inter-hunk-context=0", "--root", "-M",
               "--full-index", "--no-color", "--no-ext-diff", "--no-textconv",
               "--no-show-signature", "--src-prefix=a/", "--dst-prefix=b/",
               "--format=%x1e%H", "--", *pathspecs,
               stdin="\n".join(shas).encode() + b"\n")


def read_hunks(repo: Path, shas: Sequence[str], pathspecs: Sequence[str] = (),
               batch: int = 500) -> tuple[dict[str, list[FileChange]], list[tuple[str, str]]]:
    """The files (limited to ``pathspecs``) each commit of ``shas`` changed, with their
    hunks; a commit that changed none of them, or a merge (its changes belong to the commits
    merged), has no entry. A batch git cannot read is retried commit by commit, so one
    commit git cannot diff is one failure: (sha, reason)."""
    changes: dict[str, list[FileChange]] = {}
    failures: list[tuple[str, str]] = []

    def read(part: Sequence[str]) -> None:
        for record in _patch_log(repo, part, pathspecs).split(b"\x1e")[1:]:
            lines = record.split(b"\n")
            files = _file_changes(lines[1:])
            if files:
                changes[lines[0].decode()] = files

    for begin in range(0, len(shas), batch):
        part = shas[begin:begin + batch]
        try:
            read(part)
        except GitError:
            for sha in part:
                try:
                    read([sha])
                except GitError as exc:
                    failures.append((sha, str(exc).rpartition(": ")[2] or str(exc)))
    return changes, failures

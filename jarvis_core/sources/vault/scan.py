"""Finding and reading the files of a vault without letting one bad file stop the rest.

A scan is a stat walk (no file is opened), so change detection stays cheap; reading a
note turns every way a file can be unusable into a ``NoteReadError`` with a reason a
person can act on.
"""

from __future__ import annotations

import errno
import hashlib
import os
from dataclasses import dataclass
from fnmatch import fnmatch
from pathlib import Path

from jarvis_core.sources.confinement import (
    NOT_UTF8_NAME,
    OUTSIDE_SOURCE,
    is_utf8_name,
    leaves,
    printable_name,
)
from jarvis_core.sources.decoding import NoteReadError, decode_note_bytes

NOTE_SUFFIX = ".md"


@dataclass(frozen=True)
class VaultFile:
    """One file found in a vault; ``path`` is vault-relative with '/' separators."""

    path: str
    absolute_path: Path
    size_bytes: int
    mtime_ns: int
    root: str | None = None  # the vault's real path, checked again when the file is read

    @property
    def is_note(self) -> bool:
        return self.path.lower().endswith(NOTE_SUFFIX)


@dataclass(frozen=True)
class ScanProblem:
    path: str
    reason: str


@dataclass(frozen=True)
class VaultScan:
    files: list[VaultFile]
    problems: list[ScanProblem]

    @property
    def notes(self) -> list[VaultFile]:
        return [f for f in self.files if f.is_note]

    @property
    def attachments(self) -> list[VaultFile]:
        return [f for f in self.files if not f.is_note]


def _excluded(rel_path: str, patterns: tuple[str, ...]) -> bool:
    return any(fnmatch(rel_path, p) or fnmatch(rel_path + "/", p) for p in patterns)


def scan_vault(root: Path, exclude: tuple[str, ...] = ()) -> VaultScan:
    """Stat every visible file under ``root``, following directory symlinks once.

    Hidden entries (a leading '.') are skipped as Obsidian does; a directory symlink that
    leads back to a directory already walked, a file symlink loop, a dangling symlink, a
    symlink (file or folder) whose real path leaves the vault and a name that is not UTF-8
    are reported as problems instead of raising.
    """
    root = root.resolve()
    inside = str(root)
    files: list[VaultFile] = []
    problems: list[ScanProblem] = []
    visited: set[str] = set()

    def walk(directory: Path, rel_dir: str) -> None:
        real = os.path.realpath(directory)
        if real in visited:
            problems.append(ScanProblem(rel_dir, f"symlink loop: directory leads back to {real}"))
            return
        visited.add(real)
        try:
            entries = sorted(os.scandir(directory), key=lambda e: e.name)
        except OSError as exc:
            problems.append(ScanProblem(rel_dir or ".", f"cannot list directory: {exc.strerror}"))
            return
        for entry in entries:
            if entry.name.startswith("."):
                continue
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            if _excluded(rel, exclude):
                continue
            if not is_utf8_name(entry.name):
                problems.append(ScanProblem(printable_name(rel), NOT_UTF8_NAME))
                continue
            if entry.is_symlink() and leaves(inside, entry.path):
                problems.append(ScanProblem(rel, OUTSIDE_SOURCE))
                continue
            try:
                stat = entry.stat(follow_symlinks=True)
            except OSError as exc:
                problems.append(ScanProblem(rel, _stat_failure(exc)))
                continue
            if entry.is_dir(follow_symlinks=True):
                walk(Path(entry.path), rel)
            elif entry.is_file(follow_symlinks=True):
                files.append(VaultFile(rel, Path(entry.path), stat.st_size, stat.st_mtime_ns,
                                       inside))
            else:
                problems.append(ScanProblem(rel, "not a regular file (device, socket or pipe)"))

    walk(root, "")
    return VaultScan(files=files, problems=problems)


def _stat_failure(exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return "symlink loop: the link resolves to itself"
    if exc.errno == errno.ENOENT:
        return "broken symlink: its target does not exist"
    return f"cannot stat file: {exc.strerror}"


def read_note(file: VaultFile, max_bytes: int) -> tuple[str, str, list[str]]:
    """Return (text, sha256 of the bytes, warnings) or raise NoteReadError.

    Text that is not valid UTF-8 is decoded with replacement characters and a warning
    naming the first bad byte, unless so much of it is undecodable that it is binary.
    """
    if file.root is not None and leaves(file.root, file.absolute_path):  # swapped since
        raise NoteReadError(OUTSIDE_SOURCE)
    if file.size_bytes > max_bytes:
        raise NoteReadError(
            f"file is {file.size_bytes / 1_048_576:.1f} MB, over the "
            f"{max_bytes / 1_048_576:.1f} MB limit (ingest.max_note_bytes)"
        )
    try:
        data = file.absolute_path.read_bytes()
    except OSError as exc:
        raise NoteReadError(f"cannot read file: {exc.strerror or exc}") from exc
    if len(data) > max_bytes:  # grew since the scan
        raise NoteReadError(f"file grew past the {max_bytes} byte limit while being read")
    text, warnings = decode_note_bytes(data)
    return text, hashlib.sha256(data).hexdigest(), warnings


class VaultUnavailable(OSError):
    """The vault folder itself is missing or cannot be listed (an unmounted drive, say)."""


def scan_existing_vault(root: Path, exclude: tuple[str, ...] = ()) -> VaultScan:
    """``scan_vault``, raising when the vault itself is unreachable: an empty scan would read
    as "every note deleted" and wipe the vault's data from every store."""
    if not root.is_dir():
        raise VaultUnavailable(f"vault directory is missing: {root}")
    scan = scan_vault(root, exclude)
    root_problems = [problem.reason for problem in scan.problems if problem.path == "."]
    if root_problems:
        raise VaultUnavailable(f"cannot list vault {root}: {root_problems[0]}")
    return scan

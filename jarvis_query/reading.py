"""Reading a note from its vault: the file as it is now, for documents.py, which opens every
kind of document (a note is the one kind whose documents are files read at query time:
``DocumentType.from_file``).

The serving tables keep no note bodies, and a note's frontmatter is not indexed, so a note
is read from its file; this is the one query that touches the vault folders, so it refuses
any path that could lead outside them: ``..``, absolute paths, backslashes, NUL and control
characters, percent-encoded or Unicode look-alike separators and dots, names longer than a
file name can be, and symlinks whose target lies outside the vault. Names of every kind are
refused on the same escapes (``refuse_escapes``). No message shows more of the path than
its start, and none the vault's own location.
"""

from __future__ import annotations

import os
import re
import stat
import unicodedata
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import unquote

from jarvis_core.config import JarvisConfig
from jarvis_core.sources.decoding import NoteReadError, decode_note_bytes
from jarvis_core.sources.vault.scan import NOTE_SUFFIX, _excluded
from jarvis_core.stores.keys import note_key
from jarvis_query.validation import (
    MAX_NAME_BYTES,
    MAX_PATH_CHARS,
    QueryError,
    require_text,
    shown,
)

_PERCENT_ESCAPE = re.compile(r"%[0-9A-Fa-f]{2}")
_DRIVE = re.compile(r"^[A-Za-z]:")  # C:/… (backslashes are refused on their own)
# Invisible characters that change how a path reads without changing what it opens.
_BIDI_AND_INVISIBLE = frozenset("\u200b\u200e\u200f\u202a\u202b\u202c\u202d\u202e"
                                "\u2066\u2067\u2068\u2069\ufeff")


class NoteAccessError(QueryError):
    """read-note refused or failed; shown as ``Error reading note: <message>``."""


def _path_problem(path: str) -> str | None:
    """Why ``path`` may not be used to open a note, or None."""
    if "\x00" in path:
        return "the path contains a NUL byte"
    if any(unicodedata.category(c) == "Cc" for c in path):
        return "the path contains control characters"
    if any(c in _BIDI_AND_INVISIBLE for c in path):
        return "the path contains invisible or direction-changing Unicode characters"
    if "\\" in path:
        return "backslashes are not allowed in note paths (use '/')"
    if path.startswith(("/", "~/")) or path == "~" or _DRIVE.match(path):
        return "absolute paths are not allowed: give a path relative to the vault"
    if ".." in path.split("/"):
        return "'..' is not allowed in paths"
    return None


def _decoded_forms(path: str) -> list[tuple[str, str]]:
    """The readings of ``path`` a lenient layer might apply: percent-decoding (repeatedly,
    for double encoding) and Unicode compatibility normalisation (fullwidth '．．／' etc.)."""
    forms = [(path, ""), (unicodedata.normalize("NFKC", path), " after Unicode normalisation")]
    decoded = path
    while _PERCENT_ESCAPE.search(decoded):
        try:
            decoded = unquote(decoded, errors="strict")
        except UnicodeDecodeError as exc:
            raise NoteAccessError("Access denied: the path holds percent-encoded bytes that are "
                                  "not UTF-8 (e.g. overlong '%c0%ae')") from exc
        forms += [(decoded, " after percent-decoding"),
                  (unicodedata.normalize("NFKC", decoded),
                   " after percent-decoding and Unicode normalisation")]
    return forms


def refuse_escapes(name: str) -> None:
    """NoteAccessError when ``name`` (a path or any identifier) is too long or could lead
    out of a source in any decoded reading of it, not just the literal one."""
    if isinstance(name, str) and len(name) > MAX_PATH_CHARS:
        raise NoteAccessError(f"Access denied: the path is longer than {MAX_PATH_CHARS:,} "
                              f"characters ({len(name):,})")
    require_text(name, "path")
    for form, how in _decoded_forms(name):
        problem = _path_problem(form)
        if problem:
            raise NoteAccessError(f"Access denied: {problem}{how}")


def safe_relative_path(path: str) -> str:
    """``path`` cleaned to vault-relative form ('a/b.md'), or NoteAccessError saying why
    it is refused."""
    refuse_escapes(path)
    parts = [part for part in path.strip().split("/") if part not in ("", ".")]
    if not parts:
        raise QueryError("path parameter is required", "path")
    if any(part.startswith(".") for part in parts):
        raise NoteAccessError("Access denied: hidden files and folders (.obsidian, .git, …) "
                              "are not notes")
    if any(len(os.fsencode(part)) > MAX_NAME_BYTES for part in parts):
        raise NoteAccessError(f"File not found: a name in '{shown(path)}' is longer than a "
                              f"file name can be ({MAX_NAME_BYTES} bytes)")
    return "/".join(parts)


def _inside(root: Path, relative: str) -> Path:
    """The real location of ``relative`` under ``root``; refused when a symlink leads out."""
    real_root = Path(os.path.realpath(root))
    real = Path(os.path.realpath(real_root / relative))
    if not real.is_relative_to(real_root):
        raise NoteAccessError(f"Access denied: '{shown(relative)}' leads outside the vault "
                              "(a symlink points elsewhere)")
    return real


def _is_file(real: Path) -> bool:
    """Whether ``real`` is a file; False for what cannot be a file name (ENAMETOOLONG once
    ".md" is added), whose OSError would show the vault's absolute path."""
    try:
        return real.is_file()
    except OSError:
        return False


def _read_file(root: Path, real: Path, relative: str,
               max_bytes: int) -> tuple[str, os.stat_result, list[str]]:
    """Text, stat and decoding warnings of a note. Opened without following a final symlink
    swapped in after the check, and (where /proc tells) refused if a folder on the way was
    swapped for one that leads out."""
    try:
        fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError as exc:
        raise NoteAccessError(f"File not found: '{shown(relative)}'") from exc
    except OSError as exc:
        raise NoteAccessError(f"cannot open '{shown(relative)}': {exc.strerror}") from exc
    with os.fdopen(fd, "rb") as file:
        opened = Path(f"/proc/self/fd/{fd}")
        if opened.exists() and not Path(os.readlink(opened)).is_relative_to(
                os.path.realpath(root)):
            raise NoteAccessError(f"Access denied: '{shown(relative)}' leads outside the vault (it "
                                  "changed while being opened)")
        info = os.fstat(file.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise NoteAccessError(f"'{shown(relative)}' is not a file")
        if info.st_size > max_bytes:
            raise NoteAccessError(f"'{shown(relative)}' is {info.st_size} bytes, over the "
                                  f"{max_bytes} byte limit (ingest.max_note_bytes)")
        data = file.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise NoteAccessError(f"'{shown(relative)}' grew past the {max_bytes} byte limit")
    try:
        text, warnings = decode_note_bytes(data)
    except NoteReadError as exc:
        raise NoteAccessError(f"'{shown(relative)}': {exc}") from exc
    return text, info, warnings


def locate(config: JarvisConfig, vaults: list[str],
           path: str) -> tuple[str, str, Path] | None:
    """(vault, vault-relative path, real file) of the note ``path`` names in one of
    ``vaults`` (".md" optional; the vault's name may lead it when several are searched);
    None when no file is there; NoteAccessError when it is refused."""
    if not vaults:
        return None
    relative = safe_relative_path(path)
    head, _, rest = relative.partition("/")
    attempts = [(name, relative) for name in vaults]
    if len(vaults) > 1 and head in vaults and rest:
        attempts.append((head, rest))
    found: list[tuple[str, str, Path]] = []
    for name, candidate in attempts:
        for with_suffix in dict.fromkeys(
                (candidate, candidate if candidate.lower().endswith(NOTE_SUFFIX)
                 else candidate + NOTE_SUFFIX)):
            real = _inside(config.sources[name].path, with_suffix)
            if _is_file(real):
                found.append((name, with_suffix, real))
                break
    if not found:
        return None
    if len({name for name, _, _ in found}) > 1:
        places = ", ".join(f"{name}/{rel}" for name, rel, _ in found)
        raise QueryError(f"'{path}' names notes in several vaults: {places}; give the vault")
    name, relative, real = found[0]
    if not relative.lower().endswith(NOTE_SUFFIX):
        raise NoteAccessError(f"'{shown(relative)}' is not a note (only {NOTE_SUFFIX} files "
                              "are read)")
    if _excluded(relative, config.sources[name].exclude):
        raise NoteAccessError(f"Access denied: '{shown(relative)}' is excluded from vault "
                              f"'{name}'")
    return name, relative, real


@dataclass(frozen=True)
class NoteFile:
    """A note as its file holds it now: what documents.py shows of it."""

    key: str
    title: str
    text: str
    tags: list[str]
    modified_at: str
    details: dict
    warnings: list[str]


def read_note_file(config: JarvisConfig, vault: str, relative: str, real: Path) -> NoteFile:
    """The note at ``real`` (found by ``locate``) with its frontmatter, tags and aliases."""
    # The markdown parser is imported here: no other query needs it (30 ms of a cold start).
    from jarvis_core.sources.vault.notes import parse_note

    text, info, warnings = _read_file(config.sources[vault].path, real, relative,
                                      config.ingest.max_note_bytes)
    parsed = parse_note(text, path=relative)
    return NoteFile(
        key=note_key(vault, relative), title=parsed.title, text=text, tags=parsed.tags,
        modified_at=datetime.fromtimestamp(info.st_mtime, UTC).isoformat(),
        details={"frontmatter": parsed.frontmatter,
                 "frontmatter_error": parsed.frontmatter_error, "aliases": parsed.aliases,
                 "size_bytes": info.st_size},
        warnings=warnings)

"""read-note: one note from its vault, or a mail thread or Confluence page (documents.py).

The serving tables keep no note bodies, so ``read_note`` reads the file itself; it is the
one query that touches the vault folders, so it refuses any path that could lead outside
them: ``..``, absolute paths, backslashes, NUL and control characters, percent-encoded or
Unicode look-alike separators and dots, names longer than a file name can be, and symlinks
whose target lies outside the vault. No message shows more of the path than its start, and
none the vault's own location.

One tool reads every kind of document a search can return as text of its own: a search hit
names its source (``vault``) and ``path``, and read-note with those two reads it, whether a
note (``Areas/Sleep.md``), a thread (``threads/<Message-ID>``) or a page (``pages/<id>``).
"""

from __future__ import annotations

import os
import re
import stat
import unicodedata
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import unquote

from jarvis_core.config import JarvisConfig
from jarvis_core.sources.decoding import NoteReadError, decode_note_bytes
from jarvis_core.sources.vault.scan import NOTE_SUFFIX, _excluded
from jarvis_core.stores.keys import note_key
from jarvis_core.stores.serving import NotPublished
from jarvis_query import documents
from jarvis_query.lookup import NoteNotFound, find_note
from jarvis_query.snapshot import Snapshot
from jarvis_query.validation import (
    MAX_NAME_BYTES,
    MAX_PATH_CHARS,
    QueryError,
    check_vault,
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
        return "'..' is not allowed in note paths"
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


def safe_relative_path(path: str) -> str:
    """``path`` cleaned to vault-relative form ('a/b.md'), or NoteAccessError saying why
    it is refused. Every decoded reading of the path is checked, not just the literal one."""
    require_text(path, "path")
    if len(path) > MAX_PATH_CHARS:
        raise NoteAccessError(f"Access denied: the path is longer than {MAX_PATH_CHARS:,} "
                              "characters")
    for form, how in _decoded_forms(path):
        problem = _path_problem(form)
        if problem:
            raise NoteAccessError(f"Access denied: {problem}{how}")
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


def _locate(config: JarvisConfig, snapshot: Snapshot | None, path: str,
            vault: str | None) -> tuple[str, str, Path]:
    """(vault, vault-relative path, real file) of the note ``path`` names: a path in
    ``vault`` or any vault (".md" optional, the vault name may lead it), else a title or
    alias-free name from the published notes."""
    check_vault(config, vault)
    relative = safe_relative_path(path)
    vaults = [vault] if vault else sorted(config.sources_of("vault"))
    head, _, rest = relative.partition("/")
    attempts = [(name, relative) for name in vaults]
    if vault is None and head in config.sources_of("vault") and rest:
        attempts.append((head, rest))
    found: list[tuple[str, str, Path]] = []
    for name, candidate in attempts:
        for with_suffix in dict.fromkeys(
                (candidate, candidate if candidate.lower().endswith(NOTE_SUFFIX)
                 else candidate + NOTE_SUFFIX)):
            real = _inside(config.sources_of("vault")[name].path, with_suffix)
            if _is_file(real):
                found.append((name, with_suffix, real))
                break
    if not found and snapshot is not None:
        try:  # a title naming several notes raises: the message lists them
            _, name, table_path = find_note(config, snapshot, relative)
        except NoteNotFound:
            pass
        else:
            if vault in (None, name):
                found.append((name, table_path,
                              _inside(config.sources_of("vault")[name].path, table_path)))
    if not found:
        where = f"vault '{vault}'" if vault else "any vault"
        raise NoteAccessError(f"File not found: '{shown(path)}' in {where}")
    if len({name for name, _, _ in found}) > 1:
        places = ", ".join(f"{name}/{rel}" for name, rel, _ in found)
        raise QueryError(f"'{path}' names notes in several vaults: {places}; give the vault")
    name, relative, real = found[0]
    if not relative.lower().endswith(NOTE_SUFFIX):
        raise NoteAccessError(f"'{shown(relative)}' is not a note (only {NOTE_SUFFIX} files "
                              "are read)")
    if _excluded(relative, config.sources_of("vault")[name].exclude):
        raise NoteAccessError(f"Access denied: '{shown(relative)}' is excluded from vault "
                              f"'{name}'")
    return name, relative, real


def _neighbours(snapshot: Snapshot, key: str) -> tuple[list[dict], list[dict]]:
    """Notes this note points at, and notes pointing at it, with the relations involved."""
    rows = snapshot.cursor().execute(
        "SELECT e.src = ? AS outgoing, CASE WHEN e.src = ? THEN e.dst ELSE e.src END AS other, "
        "any_value(n.title), list(DISTINCT e.relation ORDER BY e.relation) "
        "FROM graph_edges e LEFT JOIN graph_nodes n "
        "ON n.node_key = CASE WHEN e.src = ? THEN e.dst ELSE e.src END "
        "WHERE (e.src = ? AND e.dst LIKE 'note:%') OR (e.dst = ? AND e.src LIKE 'note:%') "
        "GROUP BY ALL ORDER BY other", [key] * 5).fetchall()
    links: list[dict] = []
    backlinks: list[dict] = []
    for outgoing, other, title, relations in rows:
        vault, _, path = other.removeprefix("note:").partition("/")
        entry = {"vault": vault, "path": path, "title": title, "relations": relations}
        (links if outgoing else backlinks).append(entry)
    return links, backlinks


def read_note(config: JarvisConfig, snapshot: Snapshot | None, path: str,
              vault: str | None = None) -> dict:
    """A note (``kind`` "note"), thread or page named by ``path`` in ``vault`` (any source
    of those kinds when omitted): a name that is no note is looked up among the configured
    mail and Confluence sources before it is reported missing."""
    if isinstance(path, str) and len(path) > MAX_PATH_CHARS:
        raise NoteAccessError(f"Access denied: the path is longer than {MAX_PATH_CHARS:,} "
                              f"characters ({len(path):,})")
    require_text(path, "path")
    kind = config.source_kind(vault) if vault is not None else None
    if vault is not None and kind is None:
        raise QueryError(f"Unknown vault '{shown(vault)}'", "vault")
    if kind in ("mail", "confluence") or (vault is None and path.startswith(
            ("thread:", "page:"))):
        return _read_document(config, snapshot, path, vault)
    if kind not in (None, "vault"):
        raise QueryError(f"'{vault}' is a {kind} source: read-note reads notes, mail threads "
                         "and Confluence pages", "vault")
    try:
        return _read_vault_note(config, snapshot, path, vault)
    except NoteAccessError:
        ref = None
        if vault is None and snapshot is not None and documents.has_documents(config):
            ref = documents.find_document(config, snapshot, path)
        if ref is None:
            raise
        return documents.read_document(snapshot, ref)


def _read_document(config: JarvisConfig, snapshot: Snapshot | None, path: str,
                   vault: str | None) -> dict:
    if snapshot is None:
        raise NotPublished("nothing is published yet: mail threads and Confluence pages are "
                           "read from the published version")
    ref = documents.find_document(config, snapshot, path, vault)
    if ref is None:
        where = f"'{vault}'" if vault else "the mail and Confluence sources"
        raise NoteAccessError(f"File not found: '{shown(path)}' in {where}")
    return documents.read_document(snapshot, ref)


def _read_vault_note(config: JarvisConfig, snapshot: Snapshot | None, path: str,
                     vault: str | None) -> dict:
    """The note's text as it is on disk now, with its frontmatter, tags and aliases, and its
    links and backlinks from the published graph (``snapshot``, None before any publish)."""
    # The markdown parser is imported here: no other query needs it (30 ms of a cold start).
    from jarvis_core.sources.vault.notes import parse_note

    name, relative, real = _locate(config, snapshot, path, vault)
    text, info, warnings = _read_file(config.sources_of("vault")[name].path, real, relative,
                                      config.ingest.max_note_bytes)
    parsed = parse_note(text, path=relative)
    key = note_key(name, relative)
    links = backlinks = None
    published = False
    if snapshot is not None:
        published = snapshot.cursor().execute(
            "SELECT count(*) FROM notes WHERE note_key = ?", [key]).fetchone()[0] > 0
        links, backlinks = _neighbours(snapshot, key)
    return {
        "kind": "note", "vault": name, "path": relative, "title": parsed.title, "content": text,
        "frontmatter": parsed.frontmatter, "frontmatter_error": parsed.frontmatter_error,
        "tags": parsed.tags, "aliases": parsed.aliases,
        "size_bytes": info.st_size,
        "modified_at": datetime.fromtimestamp(info.st_mtime, UTC).isoformat(),
        "warnings": warnings, "published": published,
        "links": links, "backlinks": backlinks,
    }

"""Reading one note from its vault, and listing the configured sources.

The serving tables keep no note bodies, so ``read_note`` reads the file itself; it is the
one query that touches the vault folders, so it refuses any path that could lead outside
them: ``..``, absolute paths, backslashes, NUL and control characters, percent-encoded or
Unicode look-alike separators and dots, and symlinks whose target lies outside the vault.
"""

from __future__ import annotations

import os
import re
import stat
import unicodedata
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import unquote

from jarvis_core.graph.keys import note_key
from jarvis_core.sources.notes import parse_note
from jarvis_core.sources.vault_scan import NOTE_SUFFIX, NoteReadError, _excluded, decode_note_bytes
from jarvis_core.stores import serving
from jarvis_query.knowledge_base import KnowledgeBase, QueryError
from jarvis_query.snapshot import Snapshot

MAX_PATH_CHARS = 1024
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
    if not isinstance(path, str) or not path.strip():
        raise QueryError("path parameter is required")
    if len(path) > MAX_PATH_CHARS:
        raise NoteAccessError(f"Access denied: the path is longer than {MAX_PATH_CHARS} "
                              "characters")
    for form, how in _decoded_forms(path):
        problem = _path_problem(form)
        if problem:
            raise NoteAccessError(f"Access denied: {problem}{how}")
    parts = [part for part in path.strip().split("/") if part not in ("", ".")]
    if not parts:
        raise QueryError("path parameter is required")
    if any(part.startswith(".") for part in parts):
        raise NoteAccessError("Access denied: hidden files and folders (.obsidian, .git, …) "
                              "are not notes")
    return "/".join(parts)


def _inside(root: Path, relative: str) -> Path:
    """The real location of ``relative`` under ``root``; refused when a symlink leads out."""
    real_root = Path(os.path.realpath(root))
    real = Path(os.path.realpath(real_root / relative))
    if not real.is_relative_to(real_root):
        raise NoteAccessError(f"Access denied: '{relative}' leads outside the vault "
                              "(a symlink points elsewhere)")
    return real


def _read_file(root: Path, real: Path, relative: str,
               max_bytes: int) -> tuple[str, os.stat_result, list[str]]:
    """Text, stat and decoding warnings of a note. Opened without following a final symlink
    swapped in after the check, and (where /proc tells) refused if a folder on the way was
    swapped for one that leads out."""
    try:
        fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError as exc:
        raise NoteAccessError(f"File not found: '{relative}'") from exc
    except OSError as exc:
        raise NoteAccessError(f"cannot open '{relative}': {exc.strerror}") from exc
    with os.fdopen(fd, "rb") as file:
        opened = Path(f"/proc/self/fd/{fd}")
        if opened.exists() and not Path(os.readlink(opened)).is_relative_to(
                os.path.realpath(root)):
            raise NoteAccessError(f"Access denied: '{relative}' leads outside the vault (it "
                                  "changed while being opened)")
        info = os.fstat(file.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise NoteAccessError(f"'{relative}' is not a file")
        if info.st_size > max_bytes:
            raise NoteAccessError(f"'{relative}' is {info.st_size} bytes, over the {max_bytes} "
                                  "byte limit (ingest.max_note_bytes)")
        data = file.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise NoteAccessError(f"'{relative}' grew past the {max_bytes} byte limit")
    try:
        text, warnings = decode_note_bytes(data)
    except NoteReadError as exc:
        raise NoteAccessError(f"'{relative}': {exc}") from exc
    return text, info, warnings


def _current_snapshot(kb: KnowledgeBase) -> Snapshot | None:
    try:
        return kb.snapshots.current()
    except serving.NotPublished:
        return None


def _locate(kb: KnowledgeBase, path: str, vault: str | None,
            snapshot: Snapshot | None) -> tuple[str, str, Path]:
    """(vault, vault-relative path, real file) of the note ``path`` names: a path in
    ``vault`` or any vault (".md" optional, the vault name may lead it), else a title or
    alias-free name from the published notes."""
    kb.check_vault(vault)
    relative = safe_relative_path(path)
    vaults = [vault] if vault else sorted(kb.config.vaults)
    head, _, rest = relative.partition("/")
    attempts = [(name, relative) for name in vaults]
    if vault is None and head in kb.config.vaults and rest:
        attempts.append((head, rest))
    found: list[tuple[str, str, Path]] = []
    for name, candidate in attempts:
        for with_suffix in dict.fromkeys(
                (candidate, candidate if candidate.lower().endswith(NOTE_SUFFIX)
                 else candidate + NOTE_SUFFIX)):
            real = _inside(kb.config.vaults[name].path, with_suffix)
            if real.is_file():
                found.append((name, with_suffix, real))
                break
    if not found and snapshot is not None:
        try:
            _, name, table_path = kb.find_note(snapshot, relative)
        except QueryError as exc:
            if not str(exc).startswith("Note not found"):
                raise  # a title naming several notes: the message lists them
        else:
            if vault in (None, name):
                found.append((name, table_path,
                              _inside(kb.config.vaults[name].path, table_path)))
    if not found:
        where = f"vault '{vault}'" if vault else "any vault"
        raise NoteAccessError(f"File not found: '{path}' in {where}")
    if len({name for name, _, _ in found}) > 1:
        places = ", ".join(f"{name}/{rel}" for name, rel, _ in found)
        raise QueryError(f"'{path}' names notes in several vaults: {places}; give the vault")
    name, relative, real = found[0]
    if not relative.lower().endswith(NOTE_SUFFIX):
        raise NoteAccessError(f"'{relative}' is not a note (only {NOTE_SUFFIX} files are read)")
    if _excluded(relative, kb.config.vaults[name].exclude):
        raise NoteAccessError(f"Access denied: '{relative}' is excluded from vault '{name}'")
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


def read_note(kb: KnowledgeBase, path: str, vault: str | None = None) -> dict:
    """The note's text as it is on disk now, with its frontmatter, tags and aliases, and its
    links and backlinks from the published graph."""
    snapshot = _current_snapshot(kb)
    name, relative, real = _locate(kb, path, vault, snapshot)
    text, info, warnings = _read_file(kb.config.vaults[name].path, real, relative,
                                      kb.config.ingest.max_note_bytes)
    parsed = parse_note(text, path=relative)
    key = note_key(name, relative)
    links = backlinks = None
    published = False
    if snapshot is not None:
        published = snapshot.cursor().execute(
            "SELECT count(*) FROM notes WHERE note_key = ?", [key]).fetchone()[0] > 0
        links, backlinks = _neighbours(snapshot, key)
    return {
        "vault": name, "path": relative, "title": parsed.title, "content": text,
        "frontmatter": parsed.frontmatter, "frontmatter_error": parsed.frontmatter_error,
        "tags": parsed.tags, "aliases": parsed.aliases,
        "size_bytes": info.st_size,
        "modified_at": datetime.fromtimestamp(info.st_mtime, UTC).isoformat(),
        "warnings": warnings, "published": published,
        "links": links, "backlinks": backlinks,
    }


def list_vaults(kb: KnowledgeBase) -> dict:
    """Every configured source with its kind and location, and what the published version
    holds for it: notes, attachments, chunks by type, failures, when it was published."""
    config = kb.config
    snapshot = _current_snapshot(kb)
    counts: dict[str, dict] = {}
    published = None
    if snapshot is not None:
        manifest = snapshot.version.manifest
        published = {"version": snapshot.version.name, "published_at": manifest["published_at"],
                     "model": manifest["model"]}
        cursor = snapshot.cursor()
        for layer in ("notes", "attachments", "ingest_failures"):
            for source, count in cursor.execute(
                    f"SELECT source, count(*) FROM {layer} GROUP BY source").fetchall():
                counts.setdefault(source, {})[layer] = count
        for source, last in cursor.execute(
                "SELECT source, max(ingested_at) FROM notes GROUP BY source").fetchall():
            counts.setdefault(source, {})["last_ingested_at"] = last.isoformat() if last else None
        for source, source_type, count in cursor.execute(
                "SELECT source, source_type, count(*) FROM chunks GROUP BY ALL ORDER BY ALL"
                ).fetchall():
            counts.setdefault(source, {}).setdefault("chunks", {})[source_type] = count
    sections = {"vault": config.vaults, "repo": config.repos, "tickets": config.tickets}
    sources = []
    for name in config.source_names:
        kind = config.source_kind(name)
        settings = sections[kind][name]
        location = settings.path if settings.path is not None else settings.url  # a repo URL
        found = counts.get(name, {})
        sources.append({
            "name": name, "kind": kind, "path": str(location),
            "notes": found.get("notes", 0), "attachments": found.get("attachments", 0),
            "failed": found.get("ingest_failures", 0), "chunks": found.get("chunks", {}),
            "last_ingested_at": found.get("last_ingested_at"),
            "last_refresh": published["published_at"] if published and found else None,
        })
    return {"vaults": [s for s in sources if s["kind"] == "vault"],
            "other_sources": [s for s in sources if s["kind"] != "vault"],
            "published": published}


def _note_refs(notes: list[dict] | None) -> str:
    if notes is None:
        return "(nothing published yet)"
    return ", ".join(f"{n['title'] or n['path']} ({'/'.join(n['relations'])})"
                     for n in notes) or "none"


def format_note(data: dict) -> str:
    """A read note as text: a header with tags, links and backlinks, then the note."""
    lines = [f"# {data['title']}  ({data['vault']}/{data['path']}, modified "
             f"{data['modified_at'][:19]}Z)"]
    if data["tags"]:
        lines.append("tags: " + " ".join(f"#{tag}" for tag in data["tags"]))
    lines += [f"links: {_note_refs(data['links'])}",
              f"backlinks: {_note_refs(data['backlinks'])}",
              *(f"warning: {w}" for w in data["warnings"]), "", data["content"]]
    return "\n".join(lines)


def format_vaults(data: dict) -> str:
    """One line per source, under the published version."""
    published = data["published"]
    lines = [f"published version {published['version']} at {published['published_at'][:19]}Z"
             if published else "nothing published yet: run `jarvis refresh`"]
    for source in data["vaults"]:
        lines.append(f"- {source['name']} (vault, {source['path']}): {source['notes']} notes, "
                     f"{source['attachments']} attachments, {sum(source['chunks'].values())} "
                     f"chunks, {source['failed']} failed")
    for source in data["other_sources"]:
        chunks = ", ".join(f"{n} {kind}" for kind, n in source["chunks"].items())
        lines.append(f"- {source['name']} ({source['kind']}, {source['path']}): "
                     f"chunks: {chunks or 'none published'}; {source['failed']} failed")
    return "\n".join(lines)

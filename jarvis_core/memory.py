"""Memories: what an assistant asked to remember, kept as ordinary markdown notes in the
configured memory vault, so the vault sensor ingests them, every search finds them and a
person reads and edits them in Obsidian.

One file per memory (``<folder>/<year>/<date>-<time>-<slug>-<id>.md``), never an append to a
shared day note: each memory is then its own document — its own chunks, graph node, access
count, archive move and ``forget`` — and writing one never rewrites another. A file is
written beside its final name under a hidden name (the vault scan skips hidden files),
synced, then hard-linked to the final name, which fails rather than overwrite anything.

Decay never deletes: a memory older than ``decay_after_days`` that no call has returned or
read (the access log's ``uses``) moves to the same place under ``archive_folder``, where
``recall`` finds it only on request; ``forget`` moves one memory there at once.
"""

from __future__ import annotations

import os
import re
import secrets
import tempfile
import time
import unicodedata
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path, PurePosixPath

import yaml

from jarvis_core.assistant_settings import MemorySettings
from jarvis_core.audit import AuditEntry, AuditLog, audit_path
from jarvis_core.config import JarvisConfig

MEMORY_TAG = "memory"
MEMORY_TYPE = "memory"
NOTE_SUFFIX = ".md"
_TAG = re.compile(r"^[\w/-]{1,64}$")
_ID = re.compile(r"^[0-9a-f]{6,32}$")
_MAX_LABEL_CHARS = 200     # client and conversation names
_SLUG_CHARS = 48


class MemoryNoteError(ValueError):
                      """A memory that cannot be written, found or moved; the message says why."""


@dataclass(frozen=True)
class Memory:
    vault: str
    path: str                      # vault-relative, '/'-separated
    id: str
    title: str
    created: datetime | None       # aware UTC; None when the frontmatter lost it
    importance: float
    tags: tuple[str, ...]
    client: str | None
    conversation: str | None
    archived: bool
    text: str                      # the body below the frontmatter

    @property
    def document(self) -> str:
        """The memory as the access log names documents: ``<vault>/<path>``."""
        return f"{self.vault}/{self.path}"


@dataclass
class DecayReport:
    archived: list[Memory] = field(default_factory=list)
    kept: int = 0
    problems: list[str] = field(default_factory=list)


def clean_label(value: str | None) -> str | None:
    """A client or conversation name on one line, control characters dropped, cut short."""
    if value is None:
        return None
    flat = "".join(c for c in str(value) if unicodedata.category(c) != "Cc").strip()
    return flat[:_MAX_LABEL_CHARS] or None


def _slug(title: str) -> str:
    ascii_title = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode()
    slug = re.sub(r"[^A-Za-z0-9]+", "-", ascii_title).strip("-").lower()
    return slug[:_SLUG_CHARS].rstrip("-") or "memory"


def _title(text: str) -> str:
    for line in text.splitlines():
        line = line.strip().lstrip("#").strip()
        if line:
            return line if len(line) <= 80 else line[:79].rsplit(" ", 1)[0] + " …"
    return "Memory"


def _created(value: object) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _importance(value: object) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value <= 1:
        return float(value)
    return 0.5


class MemoryVault:
    """The memory folders of one vault: writing, reading, archiving and decay."""

    def __init__(self, vault: str, root: Path, settings: MemorySettings) -> None:
        self.vault = vault
        self.root = root
        self.settings = settings

    @classmethod
    def from_config(cls, config: JarvisConfig) -> MemoryVault:
        name = config.memory.vault
        if name is None:
            raise MemoryNoteError("memory is not configured: set memory.vault to a vault name "
                                  f"in {config.config_path or 'the configuration'}")
        if name not in config.sources_of("vault"):
            raise MemoryNoteError("memory is not available to this client: the memory vault is "
                                  "not among the sources of its profile")
        return cls(name, config.sources_of("vault")[name].path, config.memory)

    # --- paths -------------------------------------------------------------------------

    def is_archived(self, path: str) -> bool:
        return PurePosixPath(path).is_relative_to(self.settings.archive_folder)

    def is_memory(self, path: str) -> bool:
        """Under the memory folder or the archive folder, and a note."""
        pure = PurePosixPath(path)
        return path.endswith(NOTE_SUFFIX) and (
            pure.is_relative_to(self.settings.folder) or self.is_archived(path))

    def archived_path(self, path: str) -> str:
        """Where the active memory ``path`` goes when archived: the same place under the
        archive folder."""
        relative = PurePosixPath(path).relative_to(self.settings.folder)
        return str(PurePosixPath(self.settings.archive_folder) / relative)

    def documents(self, memory: Memory) -> list[str]:
        """Every name the access log may know the memory by (active and archived)."""
        if memory.archived:
            return [memory.document]
        return [memory.document, f"{self.vault}/{self.archived_path(memory.path)}"]

    def _file(self, path: str) -> Path:
        """The file of a memory path, refused when it is not one or leads out of the vault."""
        parts = PurePosixPath(path).parts
        if not self.is_memory(path) or any(p in ("..", ".") or p.startswith(".") for p in parts):
            raise MemoryNoteError(f"'{path}' is not a memory of vault '{self.vault}' "
                                  f"(memories live under {self.settings.folder}/)")
        root = Path(os.path.realpath(self.root))
        real = Path(os.path.realpath(root / path))
        if not real.is_relative_to(root):
            raise MemoryNoteError(f"'{path}' leads outside vault '{self.vault}'")
        return real

    # --- writing -------------------------------------------------------------------------

    def write(self, text: str, *, importance: float = 0.5, tags: tuple[str, ...] = (),
              client: str | None = None, conversation: str | None = None,
              title: str | None = None, now: datetime | None = None) -> Memory:
        """A new memory note; never overwrites a file."""
        if not isinstance(text, str) or not text.strip():
            raise MemoryNoteError("text parameter is required")
        if len(text) > self.settings.max_chars:
            raise MemoryNoteError(f"a memory holds at most {self.settings.max_chars} characters "
                                  f"(memory.max_chars); this one has {len(text)}")
        if isinstance(importance, bool) or not isinstance(importance, int | float) \
                or not 0 <= importance <= 1:
            raise MemoryNoteError("importance must be between 0 and 1")
        clean_tags = [MEMORY_TAG]
        for tag in tags:
            tag = str(tag).strip().lstrip("#")
            if not _TAG.match(tag):
                raise MemoryNoteError(f"tag {tag!r} must be letters, digits, '_', '-' or '/'")
            clean_tags.append(tag)
        if not self.root.is_dir():
            raise MemoryNoteError(f"the memory vault folder is missing: {self.root}")
        now = (now or datetime.now(UTC)).astimezone(UTC)
        memory_id = secrets.token_hex(4)
        title = clean_label(title) or _title(text)
        header = {"title": title, "type": MEMORY_TYPE, "id": memory_id,
                  "created": now.isoformat(timespec="seconds").replace("+00:00", "Z"),
                  "importance": round(float(importance), 3),
                  "tags": list(dict.fromkeys(clean_tags)),
                  "client": clean_label(client), "conversation": clean_label(conversation)}
        header = {key: value for key, value in header.items() if value is not None}
        body = (f"---\n{yaml.safe_dump(header, sort_keys=False, allow_unicode=True)}---\n"
                f"{text.strip()}\n")
        relative = (f"{self.settings.folder}/{now:%Y}/"
                    f"{now:%Y-%m-%d-%H%M%S}-{_slug(title)}-{memory_id}{NOTE_SUFFIX}")
        target = self.root / relative
        _write_new(target, body.encode("utf-8"))
        return self._parse(relative, body)

    # --- reading -------------------------------------------------------------------------

    def read(self, path: str) -> Memory:
        file = self._file(path)
        try:
            text = file.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError as exc:
            raise MemoryNoteError(f"no memory at '{path}' in vault '{self.vault}'") from exc
        return self._parse(path, text)

    def paths(self, include_archive: bool = False) -> list[str]:
        """The vault-relative paths of the memories on disk (archived ones on request)."""
        found = []
        folders = [self.settings.folder] + ([self.settings.archive_folder]
                                            if include_archive else [])
        for folder in folders:
            base = self.root / folder
            for file in sorted(base.rglob(f"*{NOTE_SUFFIX}")) if base.is_dir() else []:
                relative = file.relative_to(self.root).as_posix()
                if any(part.startswith(".") for part in PurePosixPath(relative).parts):
                    continue
                if folder == self.settings.folder and self.is_archived(relative):
                    continue  # the archive folder may sit inside the memory folder
                found.append(relative)
        return found

    def memories(self, include_archive: bool = False) -> tuple[list[Memory], list[str]]:
        """Every memory on disk (archived ones on request), and the files that could not be
        read, each with its reason."""
        found, problems = [], []
        for relative in self.paths(include_archive):
            try:
                found.append(self.read(relative))
            except (OSError, MemoryNoteError) as exc:
                problems.append(f"{relative}: {exc}")
        return found, problems

    def find(self, name: str, include_archive: bool = True) -> Memory:
        """A memory by its path ('.md' optional, the vault name may lead it) or its id."""
        wanted = name.strip().removeprefix(f"{self.vault}/")
        if _ID.match(wanted):
            memories, _ = self.memories(include_archive=include_archive)
            matches = [m for m in memories if m.id == wanted]
            if len(matches) == 1:
                return matches[0]
            if matches:
                raise MemoryNoteError(f"several memories have id '{wanted}': "
                                      + ", ".join(m.path for m in matches))
        if not wanted.endswith(NOTE_SUFFIX):
            wanted += NOTE_SUFFIX
        return self.read(wanted)

    def _parse(self, path: str, text: str) -> Memory:
        # imported here: the note parser's rules cost a cold MCP server 30 ms otherwise
        from jarvis_core.sources.vault.frontmatter import load_frontmatter, split_frontmatter

        yaml_text, body, _ = split_frontmatter(text)
        header, _ = load_frontmatter(yaml_text) if yaml_text is not None else ({}, None)
        tags = header.get("tags")
        return Memory(
            vault=self.vault, path=path, id=str(header.get("id") or PurePosixPath(path).stem),
            title=str(header.get("title") or PurePosixPath(path).stem),
            created=_created(header.get("created")),
            importance=_importance(header.get("importance")),
            tags=tuple(str(t) for t in tags) if isinstance(tags, list) else (),
            client=clean_label(header.get("client")),
            conversation=clean_label(header.get("conversation")),
            archived=self.is_archived(path), text=body.strip())

    # --- archiving -----------------------------------------------------------------------

    def archive(self, memory: Memory) -> Memory:
        """Move an active memory under the archive folder (a name taken there gets a
        suffix); never deletes and never overwrites."""
        if memory.archived:
            raise MemoryNoteError(f"'{memory.path}' is archived already")
        source = self._file(memory.path)
        target_path = self.archived_path(memory.path)
        target = self.root / target_path
        target.parent.mkdir(parents=True, exist_ok=True)
        for attempt in range(100):
            candidate = target if attempt == 0 else target.with_stem(f"{target.stem}-{attempt}")
            try:
                os.link(source, candidate)
            except FileExistsError:
                continue
            os.unlink(source)
            _sync_directory(candidate.parent)
            _sync_directory(source.parent)
            return self.read(candidate.relative_to(self.root).as_posix())
        raise MemoryNoteError(f"cannot archive '{memory.path}': 100 names taken in "
                                f"{target.parent}")

    def decay(self, uses: Callable[[list[str]], dict[str, int]],
              now: datetime | None = None) -> DecayReport:
        """Archive every active memory created more than ``decay_after_days`` ago that no
        successful call ever returned or read (``uses`` counts them per document)."""
        now = now or datetime.now(UTC)
        cutoff = now - timedelta(days=self.settings.decay_after_days)
        report = DecayReport()
        memories, report.problems = self.memories()
        old = [m for m in memories if m.created is not None and m.created < cutoff]
        counts = uses([name for memory in old for name in self.documents(memory)])
        old_paths = {memory.path for memory in old}
        for memory in memories:
            if memory.path in old_paths and not any(counts.get(n)
                                                    for n in self.documents(memory)):
                try:
                    report.archived.append(self.archive(memory))
                except (OSError, MemoryNoteError) as exc:
                    report.problems.append(f"{memory.path}: {exc}")
            else:
                report.kept += 1
        return report


def _sync_directory(directory: Path) -> None:
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _write_new(target: Path, data: bytes) -> None:
    """``data`` at ``target``, complete or not at all, and never over an existing file."""
    target.parent.mkdir(parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(prefix=".memory-", suffix=".tmp",
                                             dir=target.parent)
    try:
        with os.fdopen(descriptor, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        try:
            os.link(temporary, target)
        except FileExistsError as exc:
            raise MemoryNoteError(f"a memory already exists at {target}: not overwritten") from exc
    finally:
        os.unlink(temporary)
    _sync_directory(target.parent)


def decay_memories(config: JarvisConfig, now: datetime | None = None) -> dict:
    """The scheduled decay: the access log pruned to its retention, then every memory of the
    memory vault that is old and was never used archived, the moves recorded in the log."""
    vault = MemoryVault.from_config(config)
    audit = AuditLog(audit_path(config.data_dir), config.audit, now=now)
    started = time.perf_counter()
    try:
        report = vault.decay(audit.uses, now)
        audit.record(AuditEntry(
            tool="memory-decay", arguments={"decay_after_days": config.memory.decay_after_days},
            client="schedule", profile="all", transport="schedule",
            correlation_id=uuid.uuid4().hex[:16],
            duration_ms=(time.perf_counter() - started) * 1000,
            outcome="error" if report.problems else "ok",
            error="; ".join(report.problems) or None,
            documents=[memory.document for memory in report.archived]))
    finally:
        audit.close()
    return {"vault": vault.vault, "archived": [memory.path for memory in report.archived],
            "kept": report.kept, "problems": report.problems}

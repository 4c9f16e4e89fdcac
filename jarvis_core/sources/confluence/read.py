"""Confluence exports as a source: the HTML space export and REST content JSON, read
incrementally.

An export is a file or a folder, read recursively (hidden entries skipped):

- ``*.json``: REST content JSON, one page object or a result list (``{"results": [...]}``
  as ``/rest/api/content`` returns it, or a bare list);
- ``*.html`` beside an ``index.html``: the pages of an unpacked HTML space export (the
  export's ``attachments/``, ``images/`` and ``styles/`` folders are not read);
- ``*.zip``: either of the above inside the archive (an HTML space export as downloaded).

Incremental by page version: a file whose bytes are unchanged (a zip member: CRC-32 and
size) gives its stored pages unread, and in a changed REST file a page whose
``(id, version.number)`` is stored is not converted again. HTML export pages carry no
version: their file's digest is their revision. A page gone from the export (or trashed:
``status`` other than ``current``) is not in the result, so the caller deletes it.

One page's problems never stop the others: they are ``ConfluenceProblem`` rows naming the
file, the page and the reason; only a missing export raises ``ConfluenceError``.
"""

from __future__ import annotations

import functools
import hashlib
import json
import zipfile
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path, PurePosixPath

from jarvis_core.sources.confinement import leaves, real_root
from jarvis_core.sources.confluence.html import SpaceIndex, html_export_page, read_space_index
from jarvis_core.sources.confluence.pages import (
    PAGE_TYPES,
    ConfluenceError,
    ConfluencePage,
    PageAttachment,
    PageRef,
    rest_page,
    rest_revision,
    rest_users,
)
from jarvis_core.sources.confluence.text import PageLink
from jarvis_core.sources.listings import (
    CONFLUENCE_INDEX,
    EXPORT_ASSET_DIRS,
    confluence_export_files,
)
from jarvis_core.sources.people import Identity

__all__ = ["ConfluenceError", "ConfluencePage", "ConfluenceProblem", "ConfluenceRead",
           "ExportFile", "PageAttachment", "PageLink", "PageRef", "confluence_export_files",
           "read_confluence_export", "resolve_links"]

ERROR, WARNING = "error", "warning"


@dataclass(frozen=True)
class ExportFile:
    """What one export file gave, kept between runs."""

    path: str
    digest: str
    page_ids: tuple[str, ...]
    failures: tuple[tuple[str, str], ...] = ()  # (item, reason)


@dataclass(frozen=True)
class ConfluenceProblem:
    file: str
    item: str
    reason: str
    severity: str = ERROR


@dataclass
class ConfluenceRead:
    pages: dict[str, ConfluencePage] = field(default_factory=dict)  # by page id
    files: dict[str, ExportFile] = field(default_factory=dict)
    problems: list[ConfluenceProblem] = field(default_factory=list)
    parsed: int = 0     # pages converted this run
    reused: int = 0     # pages taken from the previous run
    skipped: int = 0    # trashed, draft or historical pages


@dataclass(frozen=True)
class _Entry:
    path: str                            # relative to the export root
    kind: str                            # "json" or "html"
    digest: str
    load: Callable[[], bytes]
    space: Callable[[], SpaceIndex] | None = None  # an HTML page's index.html, parsed once
    size_of: Callable[[str], int | None] = lambda _: None  # an attachment's size by href


def _file_digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _space_reader(folder: Path, inside: str) -> Callable[[], SpaceIndex]:
    """The folder's index.html, parsed when a page first needs it (none if it leads out)."""
    index = folder / CONFLUENCE_INDEX
    return functools.cache(lambda: read_space_index(
        None if leaves(inside, index) else index.read_bytes(), folder.name))


def _folder_entries(root: Path) -> Iterator[_Entry | tuple[str, str]]:
    spaces: dict[Path, Callable[[], SpaceIndex]] = {}
    for path in confluence_export_files(root):
        relative, here, suffix = path.relative_to(root).as_posix(), path.parent, path.suffix.lower()
        if suffix == ".zip":
            yield from _zip_entries(path, relative)
            continue
        if path.name == CONFLUENCE_INDEX:  # read through the pages beside it
            continue
        try:
            data = path.read_bytes()
        except OSError as exc:
            yield relative, exc.strerror or str(exc)
            continue
        space = (spaces.setdefault(here, _space_reader(here, real_root(root)))
                 if suffix == ".html" else None)
        yield _Entry(relative, suffix[1:], _file_digest(data), lambda data=data: data,
                     space, lambda href, here=here: _stat_size(here / href))


def _stat_size(path: Path) -> int | None:
    try:
        return path.stat().st_size
    except OSError:
        return None


def _zip_entries(path: Path, relative: str) -> Iterator[_Entry | tuple[str, str]]:
    try:
        archive = zipfile.ZipFile(path)
    except (OSError, zipfile.BadZipFile) as exc:
        yield relative, f"not a readable zip archive: {exc}"
        return
    with archive:  # open while the caller reads the entries, closed after the last
        yield from _members(archive, relative)


def _members(archive: zipfile.ZipFile, relative: str) -> Iterator[_Entry]:
    members = {info.filename: info for info in archive.infolist() if not info.is_dir()}
    folders = {str(PurePosixPath(name).parent) for name in members
               if PurePosixPath(name).name == CONFLUENCE_INDEX}
    spaces = {folder: functools.cache(lambda folder=folder: read_space_index(
        archive.read(f"{folder}/{CONFLUENCE_INDEX}" if folder != "." else CONFLUENCE_INDEX),
        PurePosixPath(folder).name)) for folder in folders}

    def size_of(folder: str) -> Callable[[str], int | None]:
        def size(href: str) -> int | None:
            info = members.get(str(PurePosixPath(folder) / href).removeprefix("./"))
            return info.file_size if info else None
        return size

    assets = tuple(("" if folder == "." else f"{folder}/") + f"{asset}/"
                   for folder in folders for asset in EXPORT_ASSET_DIRS)
    for name in sorted(members):
        member = PurePosixPath(name)
        if name.startswith(assets) or any(part.startswith(".") for part in member.parts):
            continue
        folder, suffix = str(member.parent), member.suffix.lower()
        if suffix == ".json" or (suffix == ".html" and folder in folders
                                 and member.name != CONFLUENCE_INDEX):
            info = members[name]
            yield _Entry(f"{relative}/{name}", suffix[1:], f"crc32:{info.CRC:08x}:{info.file_size}",
                         lambda name=name: archive.read(name), spaces.get(folder),
                         size_of(folder))


def _export_entries(root: Path) -> Iterator[_Entry | tuple[str, str]]:
    """Every page file of the export (or (path, reason) for one that cannot be opened)."""
    if root.is_dir():
        yield from _folder_entries(root)
        return
    suffix = root.suffix.lower()
    if suffix == ".zip":
        yield from _zip_entries(root, root.name)
    elif suffix in (".json", ".html"):
        data = root.read_bytes()
        index = root.parent / CONFLUENCE_INDEX
        space = functools.cache(lambda: read_space_index(
            index.read_bytes() if index.is_file() else None, root.parent.name))
        yield _Entry(root.name, suffix[1:], _file_digest(data), lambda: data, space,
                     lambda href: _stat_size(root.parent / href))
    else:
        yield root.name, "not a Confluence export: expected a folder, .zip, .json or .html"


def _load(read: Callable[[], bytes | SpaceIndex]):
    """What an entry's reader gives; ConfluenceError naming why the bytes cannot be read
    (a missing file, a damaged or encrypted zip member)."""
    try:
        return read()
    except (OSError, zipfile.BadZipFile, zlib.error, RuntimeError) as exc:
        raise ConfluenceError(f"cannot be read: {exc}") from exc


def _page_objects(document: object) -> tuple[list[tuple[str, object]], str | None]:
    """(location, page object) of each page in a REST file, and the file's base URL."""
    if isinstance(document, dict) and isinstance(document.get("results"), list):
        links = document.get("_links") if isinstance(document.get("_links"), dict) else {}
        return ([(f"#results[{i}]", item) for i, item in enumerate(document["results"])],
                links.get("base"))
    if isinstance(document, dict) and ("id" in document or "title" in document):
        return [("", document)], None
    if isinstance(document, list):
        return [(f"#[{i}]", item) for i, item in enumerate(document)], None
    keys = ", ".join(sorted(document)[:8]) if isinstance(document, dict) else ""
    raise ConfluenceError("neither a Confluence page (an object with 'id' and 'title') nor a "
                          f"result list ('results'); top level is a {type(document).__name__}"
                          + (f" with keys {keys}" if keys else ""))


def _load_json(data: bytes) -> object:
    try:
        return json.loads(data.decode("utf-8-sig"))
    except UnicodeDecodeError as exc:
        raise ConfluenceError(f"not UTF-8 JSON (invalid byte at {exc.start})") from exc
    except json.JSONDecodeError as exc:
        raise ConfluenceError(f"not valid JSON: {exc.msg} at line {exc.lineno} column "
                              f"{exc.colno}") from exc


def _newer(first: ConfluencePage, second: ConfluencePage) -> bool:
    return (second.version or 0, second.updated_at or datetime.min) > (
        first.version or 0, first.updated_at or datetime.min)


class _Reader:
    def __init__(self, files: Mapping[str, ExportFile], pages: Mapping[str, ConfluencePage]
                 ) -> None:
        self.files, self.stored = files, pages
        self.result = ConfluenceRead()

    def add(self, page: ConfluencePage, ids: list[str]) -> None:
        ids.append(page.page_id)
        self.result.problems += [ConfluenceProblem(page.file, page.item, warning, WARNING)
                                 for warning in page.warnings]
        kept = self.result.pages.get(page.page_id)
        if kept is not None:
            newer, older = (page, kept) if _newer(kept, page) else (kept, page)
            self.result.problems.append(ConfluenceProblem(
                older.file, older.item, f"page {page.page_id} also in {newer.file} "
                f"{newer.item}".rstrip() + "; the newer copy is kept", WARNING))
            page = newer
        self.result.pages[page.page_id] = page

    def reuse(self, entry: _Entry) -> bool:
        state = self.files.get(entry.path)
        if state is None or state.digest != entry.digest or any(
                page_id not in self.stored for page_id in state.page_ids):
            return False
        self.result.files[entry.path] = state
        for page_id in state.page_ids:
            self.add(self.stored[page_id], [])
            self.result.reused += 1
        self.result.problems += [ConfluenceProblem(entry.path, item, reason)
                                 for item, reason in state.failures]
        return True

    def record(self, entry: _Entry, ids: list[str], failures: list[tuple[str, str]]) -> None:
        self.result.files[entry.path] = ExportFile(entry.path, entry.digest, tuple(ids),
                                                   tuple(failures))
        self.result.problems += [ConfluenceProblem(entry.path, item, reason)
                                 for item, reason in failures]

    def html(self, entry: _Entry) -> None:
        ids: list[str] = []
        failures: list[tuple[str, str]] = []
        try:
            space = _load(entry.space) if entry.space else SpaceIndex(None, None, {}, {})
            page = html_export_page(_load(entry.load), file=entry.path, revision=entry.digest,
                                    space=space, size_of=entry.size_of)
        except ConfluenceError as exc:
            failures.append(("", str(exc)))
        else:
            self.result.parsed += 1
            self.add(page, ids)
        self.record(entry, ids, failures)

    def rest(self, entry: _Entry, objects: list[tuple[str, object]], base: str | None,
             users: Mapping[str, Identity]) -> None:
        ids: list[str] = []
        failures: list[tuple[str, str]] = []
        for where, item in objects:
            if not isinstance(item, dict):
                failures.append((where, f"a {type(item).__name__}, not a page object"))
                continue
            status, kind = item.get("status"), item.get("type") or "page"
            if status not in (None, "current") or kind not in PAGE_TYPES:
                self.result.skipped += 1
                if kind not in PAGE_TYPES:
                    self.result.problems.append(ConfluenceProblem(
                        entry.path, where, f"not a page or blog post (type {kind!r}); skipped",
                        WARNING))
                continue
            stored = self.stored.get(str(item.get("id")))
            if stored is not None and stored.revision == rest_revision(item):
                self.add(replace(stored, file=entry.path, item=where), ids)
                self.result.reused += 1
                continue
            try:
                page = rest_page(item, file=entry.path, where=where, users=users, base_url=base)
            except ConfluenceError as exc:
                failures.append((where, str(exc)))
                continue
            self.result.parsed += 1
            self.add(page, ids)
        self.record(entry, ids, failures)


def _user_keys(identity: Identity) -> list[str]:
    """The ids a storage-format mention may use for this person (a Jira account id is the
    same Atlassian account in Confluence Cloud)."""
    return [alias.split(":", 1)[1].removeprefix("userkey:") for alias in identity.aliases
            if alias.startswith(("confluence:", "jira:"))]


def resolve_links(pages: Mapping[str, ConfluencePage]) -> dict[str, ConfluencePage]:
    """Pages with their title links resolved to page ids (same space first, then a title
    unique in the export); self-links and repeated links dropped."""
    by_title: dict[tuple[str | None, str], str] = {}
    anywhere: dict[str, set[str]] = {}
    for page in pages.values():
        by_title.setdefault((page.space, page.title.casefold()), page.page_id)
        anywhere.setdefault(page.title.casefold(), set()).add(page.page_id)
    resolved = {}
    for page_id, page in pages.items():
        links: dict[tuple, PageLink] = {}
        for link in page.links:
            target = link.page_id
            if target is None and link.title:
                title = link.title.casefold()
                target = by_title.get((link.space or page.space, title)) or (
                    next(iter(anywhere[title])) if len(anywhere.get(title, ())) == 1 else None)
            if target != page_id:
                title = pages[target].title if target in pages else link.title
                links.setdefault((target, link.title if target is None else None),
                                 replace(link, page_id=target, title=title))
        resolved[page_id] = replace(page, links=tuple(links.values()))
    return resolved


def read_confluence_export(root: Path, *, files: Mapping[str, ExportFile] | None = None,
                           pages: Mapping[str, ConfluencePage] | None = None,
                           people: Iterable[Identity] = ()) -> ConfluenceRead:
    """Every current page of the export at ``root``. ``files`` and ``pages`` are what the
    previous run returned: unchanged files and stored page versions are not read again.
    ``people`` (e.g. the Jira users of the ticket sets, with ``jira:<accountId>`` aliases)
    name the mentions the export itself does not name."""
    if not root.exists():
        raise ConfluenceError(f"Confluence export path does not exist: {root}")
    reader = _Reader(files or {}, pages or {})
    result = reader.result
    users: dict[str, Identity] = {}
    for identity in [*people, *(i for page in (pages or {}).values() for i in page.identities())]:
        if identity.name:
            users.update(dict.fromkeys(_user_keys(identity), identity))
    rest_files = []
    for entry in _export_entries(root):
        if isinstance(entry, tuple):
            result.problems.append(ConfluenceProblem(entry[0], "", entry[1]))
        elif reader.reuse(entry):
            continue
        elif entry.kind == "html":
            reader.html(entry)
        else:
            try:
                objects, base = _page_objects(_load_json(_load(entry.load)))
            except ConfluenceError as exc:
                reader.record(entry, [], [("", str(exc))])
                continue
            for _, item in objects:
                for identity in rest_users(item) if isinstance(item, dict) else []:
                    if identity.name:
                        users.update(dict.fromkeys(_user_keys(identity), identity))
            rest_files.append((entry, objects, base))
    for entry, objects, base in rest_files:  # after every file named its people
        reader.rest(entry, objects, base, users)
    result.pages = resolve_links(result.pages)
    return result

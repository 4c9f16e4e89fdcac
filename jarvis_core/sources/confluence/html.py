"""One page of a Confluence HTML space export, as a ``ConfluencePage``.

The title is ``#title-text`` ("Space : Title"), the ancestors are ``#breadcrumbs`` (after
the space's ``index.html``; the index's "Available Pages" tree when a page has none),
author, editor and the last date are ``.page-metadata`` ("Created by X, last modified by Y
on Oct 20, 2026": the export carries no version number, and a creation date only for pages
never edited), the body is ``#main-content`` and the attachments the "Attachments:" section.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime

from jarvis_core.sources.confluence.pages import (
    ConfluenceError,
    ConfluencePage,
    PageAttachment,
    PageRef,
    make_page,
    plain,
)
from jarvis_core.sources.confluence.text import user_aliases, view_to_content
from jarvis_core.sources.html_text import parse_html
from jarvis_core.sources.people import Identity

_EXPORT_ID = re.compile(r"(?:^|_)(\d+)\.html$")
_UNKNOWN_USER = re.compile(r"^Unknown User \((.+)\)$")
_EXPORT_DATES = ("%b %d, %Y", "%B %d, %Y", "%d %b %Y", "%d %B %Y", "%Y-%m-%d", "%d.%m.%Y")
_MEDIA_TYPE = re.compile(r"^\s*\(([\w.+-]+/[\w.+-]+)\)")


@dataclass(frozen=True)
class SpaceIndex:
    """What an export's index.html says: the space and its page tree."""

    key: str | None
    name: str | None
    parents: Mapping[str, PageRef]  # page id -> its parent in the "Available Pages" tree
    titles: Mapping[str, str]


def export_page_id(href: str) -> str | None:
    found = _EXPORT_ID.search(href.rsplit("/", 1)[-1])
    return found.group(1) if found else None


def read_space_index(data: bytes | None, folder_name: str) -> SpaceIndex:
    """The space key and name (Space Details table) and page tree of an index.html; the
    folder name stands in for a key the index does not give."""
    soup = parse_html(data.decode("utf-8", errors="replace")) if data else None
    details: dict[str, str] = {}
    parents: dict[str, PageRef] = {}
    titles: dict[str, str] = {}
    if soup is not None:
        for row in soup.find_all("tr"):
            header, cell = row.find("th"), row.find("td")
            if header is not None and cell is not None:
                details[header.get_text().strip().rstrip(":").lower()] = cell.get_text().strip()
        for anchor in soup.select("li > a[href]"):
            page_id = export_page_id(str(anchor["href"]))
            if page_id is None:
                continue
            titles[page_id] = anchor.get_text().strip()
            item = anchor.parent.find_parent("li")
            parent = item.find("a", href=True, recursive=False) if item is not None else None
            if parent is not None and (parent_id := export_page_id(str(parent["href"]))):
                parents[page_id] = PageRef(parent_id, parent.get_text().strip())
    title = soup.find(id="title-text") if soup is not None else None
    key = details.get("key") or (folder_name if re.fullmatch(r"~?[A-Za-z0-9_]+", folder_name)
                                 else None)
    return SpaceIndex(key, details.get("name") or (plain(title.get_text()) if title else None),
                      parents, titles)


def _export_person(text: str | None) -> Identity | None:
    if not text:
        return None
    if unknown := _UNKNOWN_USER.match(text):
        return Identity(aliases=user_aliases(username=unknown.group(1)))
    return Identity(name=text)


def _export_date(text: str, warnings: list[str]) -> datetime | None:
    for pattern in _EXPORT_DATES:
        try:
            return datetime.strptime(text, pattern)
        except ValueError:
            continue
    warnings.append(f"page metadata date {text!r} not understood")
    return None


def _export_metadata(soup, warnings: list[str]) -> tuple:
    """(author, editor, created, updated) from .page-metadata."""
    box = soup.select_one(".page-metadata")
    if box is None:
        warnings.append("no .page-metadata: author and dates unknown")
        return None, None, None, None
    author = _export_person(plain(box.select_one(".author").get_text())
                            if box.select_one(".author") else None)
    editor = _export_person(plain(box.select_one(".editor").get_text())
                            if box.select_one(".editor") else None)
    line = " ".join(box.get_text().split())
    found = re.search(r"\bon (.+?)\s*$", line)
    date = _export_date(found.group(1), warnings) if found else None
    if "last modified" in line:
        return author, editor or author, None, date
    return author, author, date, date


def _export_attachments(soup, size_of: Callable[[str], int | None]
                        ) -> tuple[PageAttachment, ...]:
    heading = soup.find(id="attachments")
    section = heading.find_parent(class_="pageSection") if heading is not None else None
    found = []
    for anchor in section.select(".greybox a[href]") if section is not None else []:
        href = str(anchor["href"])
        media = _MEDIA_TYPE.match(str(anchor.next_sibling or ""))
        found.append(PageAttachment(anchor.get_text().strip(),
                                    media.group(1) if media else None, size_of(href),
                                    href.rsplit("/", 1)[-1].rpartition(".")[0] or None))
    return tuple(found)


def html_export_page(data: bytes, *, file: str, revision: str, space: SpaceIndex,
                     size_of: Callable[[str], int | None]) -> ConfluencePage:
    """A page of the HTML space export; ConfluenceError when the file is no such page."""
    warnings: list[str] = []
    try:
        html = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        html = data.decode("utf-8", errors="replace")
        warnings.append(f"invalid UTF-8 at byte {exc.start}; undecodable bytes replaced")
    soup = parse_html(html)
    main = soup.find(id="main-content")
    if main is None:
        raise ConfluenceError("not a page of a Confluence HTML export: no #main-content")
    page_id = export_page_id(file)
    if page_id is None:
        raise ConfluenceError("no page id in the file name (an export names pages "
                              "Title_<id>.html or <id>.html)")
    crumbs = [(str(a["href"]), a.get_text().strip())
              for a in soup.select("#breadcrumbs a[href]")]
    ancestors = tuple(PageRef(export_page_id(href), title or None) for href, title in crumbs
                      if not href.endswith("index.html") and export_page_id(href) != page_id)
    if not crumbs:  # an export without breadcrumbs: the index's page tree
        chain: list[PageRef] = []
        at = space.parents.get(page_id)
        while at is not None and at not in chain:
            chain.insert(0, at)
            at = space.parents.get(at.page_id or "")
        ancestors = tuple(chain)
    space_name = next((title for href, title in crumbs if href.endswith("index.html")),
                      space.name)
    heading = soup.find(id="title-text") or soup.find("title")
    title = plain(heading.get_text()) if heading is not None else None
    if title and space_name and title.startswith(f"{space_name} : "):
        title = title[len(space_name) + 3:].strip()
    title = title or space.titles.get(page_id)
    if not title:
        raise ConfluenceError(f"page {page_id}: no title (#title-text)")
    if soup.find(id="footer") is None:
        warnings.append("no footer: the page file may be truncated")
    author, editor, created, updated = _export_metadata(soup, warnings)
    labels = tuple(dict.fromkeys(a.get_text().strip() for a in soup.select("a[rel~=tag]")
                                 if a.get_text().strip()))
    attachments = _export_attachments(soup, size_of)
    content = view_to_content(main, space=space.key)
    return make_page(
        page_id=page_id, kind="page", space=space.key, title=title,
        parent_id=ancestors[-1].page_id if ancestors else None, ancestors=ancestors,
        author=author, editor=editor, created_at=created, updated_at=updated, labels=labels,
        version=None, revision=revision, body=content.text,
        links=tuple(link for link in content.links if link.page_id != page_id),
        jira_keys=tuple(content.jira_keys), mentions=tuple(content.mentions),
        attachments=attachments, url=None, file=file, item="", warnings=tuple(warnings))

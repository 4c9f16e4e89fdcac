"""A Confluence page (``ConfluencePage``), its document text, and reading one from REST
content JSON (``/rest/api/content`` with ``expand=body.storage,ancestors,version,history,
space,metadata.labels,children.attachment``), where every field is named in the object.
The HTML space export is read in ``confluence_html``.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from jarvis_core.sources.confluence.text import (
    PageLink,
    storage_to_content,
    user_identity,
    view_to_content,
)
from jarvis_core.sources.html_text import parse_html
from jarvis_core.sources.people import Identity

PAGE_VERSION = 1  # bump when the text of a page is made differently
PAGE_TYPES = ("page", "blogpost")


class ConfluenceError(ValueError):
    """A page, file or export that cannot be read, with the reason."""


@dataclass(frozen=True)
class PageRef:
    page_id: str | None
    title: str | None


@dataclass(frozen=True)
class PageAttachment:
    name: str
    media_type: str | None
    size: int | None
    attachment_id: str | None


@dataclass(frozen=True)
class ConfluencePage:
    page_id: str
    kind: str                       # "page" or "blogpost"
    space: str | None               # space key
    title: str
    parent_id: str | None
    ancestors: tuple[PageRef, ...]  # root first; the parent last
    author: Identity | None         # who created it
    editor: Identity | None         # who made the last version
    created_at: datetime | None     # UTC, naive
    updated_at: datetime | None
    labels: tuple[str, ...]
    version: int | None             # None in the HTML export
    revision: str                   # what incremental runs compare: "v7", or "sha256:..."
    text: str                       # the document: a facts line, then the body as markdown
    links: tuple[PageLink, ...]
    jira_keys: tuple[str, ...]      # Jira macro keys and /browse/ links, not prose keys
    mentions: tuple[Identity, ...]
    attachments: tuple[PageAttachment, ...]
    url: str | None
    file: str                       # export file, relative to the export root
    item: str                       # where in the file: "#results[3]"; "" for one page
    warnings: tuple[str, ...]
    content_hash: str

    def identities(self) -> tuple[Identity, ...]:
        return tuple(dict.fromkeys(p for p in (self.author, self.editor, *self.mentions) if p))


def plain(value: object) -> str | None:
    """A JSON or HTML value as one line of text; None for nothing or only whitespace."""
    text = " ".join(str(value).split()) if value is not None else ""
    return text or None


def _timestamp(value: object, what: str, warnings: list[str]) -> datetime | None:
    if value in (None, ""):
        return None
    text = re.sub(r"([+-]\d{2})(\d{2})$", r"\1:\2", str(value).strip().replace("Z", "+00:00"))
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        warnings.append(f"{what} is not a date: {value!r}")
        return None
    return parsed.astimezone(UTC).replace(tzinfo=None) if parsed.tzinfo else parsed


def _name(who: Identity | None) -> str | None:
    return (who.name or who.email) if who else None


def _size(size: int | None) -> str:
    if size is None:
        return "size unknown"
    return f"{size} B" if size < 1024 else f"{size / 1024:.1f} kB" if size < 1024 ** 2 \
        else f"{size / 1024 ** 2:.1f} MB"


def document_text(*, space: str | None, ancestors: tuple[PageRef, ...], labels: tuple[str, ...],
                  author: Identity | None, editor: Identity | None, created: datetime | None,
                  updated: datetime | None, version: int | None, body: str,
                  attachments: tuple[PageAttachment, ...]) -> str:
    """A facts line (space, path, labels, people, dates), the body, the attachment list."""
    path = " › ".join(ref.title or ref.page_id or "?" for ref in ancestors)
    created_by = " ".join(filter(None, [_name(author), created.date().isoformat()
                                        if created else None]))
    updated_by = " ".join(filter(None, [updated.date().isoformat() if updated else None,
                                        f"by {_name(editor)}" if _name(editor) else None]))
    facts = [f"{label}: {value}" for label, value in (
        ("Space", space), ("Path", path), ("Labels", ", ".join(labels)),
        ("Created", created_by), ("Updated", updated_by),
        ("Version", str(version) if version else None)) if value]
    parts = [" · ".join(facts), body]
    if attachments:
        parts.append("Attachments: " + ", ".join(
            f"{a.name} ({a.media_type or 'unknown type'}, {_size(a.size)})" for a in attachments))
    return "\n\n".join(part for part in parts if part.strip()) + "\n"


def content_hash(title: str, text: str) -> str:
    """Identifies what a page's document says, so an unchanged page is not re-chunked."""
    payload = json.dumps([PAGE_VERSION, title, text], ensure_ascii=False)
    return hashlib.sha256(payload.encode()).hexdigest()


def make_page(**fields) -> ConfluencePage:
    """The page with its document text (from ``body`` and the facts) and content hash."""
    text = document_text(space=fields["space"], ancestors=fields["ancestors"],
                         labels=fields["labels"], author=fields["author"],
                         editor=fields["editor"], created=fields["created_at"],
                         updated=fields["updated_at"], version=fields["version"],
                         body=fields.pop("body"), attachments=fields["attachments"])
    return ConfluencePage(text=text, content_hash=content_hash(fields["title"], text), **fields)


def rest_revision(item: dict) -> str:
    number = (item.get("version") or {}).get("number") if isinstance(item.get("version"),
                                                                       dict) else None
    if isinstance(number, int) and not isinstance(number, bool):
        return f"v{number}"
    encoded = json.dumps(item, sort_keys=True, default=str).encode()
    return "sha256:" + hashlib.sha256(encoded).hexdigest()


def rest_users(item: dict) -> list[Identity]:
    """The people a REST page object names with their names (creator, editors)."""
    version, history = item.get("version"), item.get("history")
    users = [version.get("by")] if isinstance(version, dict) else []
    if isinstance(history, dict):
        users += [history.get("createdBy"), (history.get("lastUpdated") or {}).get("by")
                  if isinstance(history.get("lastUpdated"), dict) else None]
    return [identity for user in users if (identity := user_identity(user))]


def _space_key(item: dict) -> str | None:
    space = item.get("space")
    if isinstance(space, dict) and plain(space.get("key")):
        return plain(space.get("key"))
    expandable = (item.get("_expandable") or {}).get("space") if isinstance(
        item.get("_expandable"), dict) else None
    return plain(str(expandable).rstrip("/").rpartition("/")[2]) if expandable else None


def _results(value: object, path: str) -> list:
    """A REST list: ``{"results": [...]}`` or a bare list; [] when absent."""
    for key in path.split("."):
        value = value.get(key) if isinstance(value, dict) else None
    if isinstance(value, dict):
        value = value.get("results")
    return value if isinstance(value, list) else []


def _rest_attachments(item: dict) -> tuple[PageAttachment, ...]:
    found = []
    for attachment in _results(item, "children.attachment"):
        if not isinstance(attachment, dict) or not plain(attachment.get("title")):
            continue
        extensions = attachment.get("extensions") if isinstance(attachment.get("extensions"),
                                                                dict) else {}
        metadata = attachment.get("metadata") if isinstance(attachment.get("metadata"),
                                                            dict) else {}
        size = extensions.get("fileSize")
        found.append(PageAttachment(
            plain(attachment.get("title")), plain(extensions.get("mediaType")
                                                  or metadata.get("mediaType")),
            size if isinstance(size, int) else None, plain(attachment.get("id"))))
    return tuple(found)


def _rest_body(item: dict) -> tuple[str | None, str]:
    """(markup, representation) of the richest body the object carries."""
    body = item.get("body")
    if not isinstance(body, dict):
        return None, ""
    for representation in ("storage", "view", "export_view", "styled_view"):
        value = body.get(representation)
        if isinstance(value, dict) and "value" in value:
            if not isinstance(value["value"], str):
                raise ConfluenceError(f"body.{representation}.value is a "
                                      f"{type(value['value']).__name__}, not markup text")
            return value["value"], representation
    return None, ""


def rest_page(item: dict, *, file: str, where: str, users: Mapping[str, Identity],
              base_url: str | None = None) -> ConfluencePage:
    """A page from its REST object; ConfluenceError when it has no id or title."""
    page_id, title = plain(item.get("id")), plain(item.get("title"))
    if not page_id:
        raise ConfluenceError("missing 'id'")
    if not title:
        raise ConfluenceError(f"page {page_id}: missing 'title'")
    warnings: list[str] = []
    space = _space_key(item)
    markup, representation = _rest_body(item)
    if markup is None:
        warnings.append("no body (export with expand=body.storage); indexed by title only")
        content = storage_to_content("", users=users, space=space)
    elif representation == "storage":
        content = storage_to_content(markup, users=users, space=space)
    else:
        content = view_to_content(parse_html(markup), space=space)
    ancestors = tuple(PageRef(plain(a.get("id")), plain(a.get("title")))
                      for a in item.get("ancestors") or [] if isinstance(a, dict))
    version = item.get("version") if isinstance(item.get("version"), dict) else {}
    history = item.get("history") if isinstance(item.get("history"), dict) else {}
    last = history.get("lastUpdated") if isinstance(history.get("lastUpdated"), dict) else {}
    number = version.get("number")
    links = item.get("_links") if isinstance(item.get("_links"), dict) else {}
    base = plain(links.get("base")) or base_url
    return make_page(
        page_id=page_id, kind=plain(item.get("type")) or "page", space=space, title=title,
        parent_id=ancestors[-1].page_id if ancestors else None, ancestors=ancestors,
        author=user_identity(history.get("createdBy")),
        editor=user_identity(version.get("by")) or user_identity(last.get("by")),
        created_at=_timestamp(history.get("createdDate"), "history.createdDate", warnings),
        updated_at=_timestamp(version.get("when") or last.get("when"), "version.when",
                              warnings),
        labels=tuple(name for label in _results(item, "metadata.labels")
                     if isinstance(label, dict) and (name := plain(label.get("name")))),
        version=number if isinstance(number, int) and not isinstance(number, bool) else None,
        revision=rest_revision(item), body=content.text, links=tuple(content.links),
        jira_keys=tuple(content.jira_keys), mentions=tuple(content.mentions),
        attachments=_rest_attachments(item),
        url=f"{base or ''}{links['webui']}" if plain(links.get("webui")) else None,
        file=file, item=where, warnings=tuple(warnings))

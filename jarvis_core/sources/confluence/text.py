"""A Confluence page body as indexed text, with the links, Jira keys and people it names.

Two inputs: the storage format (``body.storage`` XHTML from the REST API, with ``ac:``
macros and ``ri:`` resource identifiers) and rendered HTML (the HTML space export's
``#main-content``, or ``body.view``). Both become markdown text with the headings kept, and:

- links to other pages: ``<ac:link><ri:page ri:content-title=...>``, export file names
  (``Ingest-API_65541.html``), ``/pages/viewpage.action?pageId=``, ``/spaces/KEY/pages/<id>``
  and ``/display/KEY/Title`` URLs;
- Jira keys of the Jira issue macro (``ac:structured-macro ac:name="jira"`` with a ``key``
  parameter, rendered as ``data-jira-key`` in HTML) and of ``/browse/KEY`` links; keys
  written in prose are left to ``references.find_references`` on the text;
- people: ``ri:user`` (``ri:account-id``, ``ri:userkey``, ``ri:username``) and rendered
  user links, written ``@Name`` in the text.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import parse_qs, unquote_plus, urlsplit

from bs4 import BeautifulSoup, NavigableString, Tag

from jarvis_core.sources.html_text import TextConverter, parse_html, soup_to_text
from jarvis_core.sources.people import Identity

_JIRA_KEY = re.compile(r"^[A-Z][A-Z0-9_]{1,9}-[1-9][0-9]{0,6}$")
_EXPORT_FILE = re.compile(r"(?:^|[/_])(\d+)\.html$")
_PAGES_URL = re.compile(r"/pages/(\d+)(?:/|$)")
_DISPLAY_URL = re.compile(r"/display/([^/?#]+)/([^?#]+)")
_BROWSE_URL = re.compile(r"/browse/([A-Z][A-Z0-9_]{1,9}-[1-9][0-9]{0,6})(?:[?#/]|$)")
_CODE_MACROS = {"code", "noformat", "code-block"}
_TITLED_MACROS = {"panel", "expand", "info", "note", "warning", "tip", "details"}
_DROPPED = {"ac:image", "ac:emoticon", "ac:placeholder", "ac:parameter", "ac:task-id"}


@dataclass(frozen=True)
class PageLink:
    """A link to another page: by id (export file, URL) or by title (storage format)."""

    page_id: str | None
    title: str | None
    space: str | None
    written: str


@dataclass
class PageContent:
    text: str
    links: list[PageLink] = field(default_factory=list)
    jira_keys: list[str] = field(default_factory=list)
    mentions: list[Identity] = field(default_factory=list)


def user_aliases(account_id: str | None = None, user_key: str | None = None,
                 username: str | None = None) -> tuple[str, ...]:
    """Aliases of a Confluence user. An Atlassian Cloud account id is one account across
    Jira and Confluence, so it also gets the ``jira:`` alias the ticket graph gives Jira
    users: the same person then folds into one in the PersonDirectory."""
    aliases = []
    if account_id:
        aliases += [f"confluence:{account_id}", f"jira:{account_id}"]
    if user_key:
        aliases.append(f"confluence:userkey:{user_key}")
    if username:
        aliases.append(f"confluence:{username}")
    return tuple(aliases)


def user_identity(user: object) -> Identity | None:
    """A REST user object (``version.by``, ``history.createdBy``) as an Identity."""
    if not isinstance(user, dict):
        return None
    name = _text(user.get("displayName") or user.get("publicName"))
    aliases = user_aliases(_text(user.get("accountId")), _text(user.get("userKey")),
                           _text(user.get("username")))
    email = _text(user.get("email"))
    if not (name or email or aliases) or user.get("type") == "anonymous":
        return None
    return Identity(name=name, email=email, aliases=aliases)


def _text(value: object) -> str | None:
    text = str(value).strip() if value is not None else ""
    return text or None


def link_from_url(href: str, space: str | None) -> PageLink | None:
    """A page link from a URL or an export file name; None for anything else."""
    parts = urlsplit(href)
    if parts.scheme in ("mailto", "tel") or not (parts.path or parts.query):
        return None
    page_ids = parse_qs(parts.query).get("pageId")
    if page_ids and page_ids[0].isdigit():
        return PageLink(page_ids[0], None, space, href)
    if found := _PAGES_URL.search(parts.path):
        return PageLink(found.group(1), None, None, href)
    if found := _DISPLAY_URL.search(parts.path):
        title = unquote_plus(found.group(2)).strip()
        return PageLink(None, title, unquote_plus(found.group(1)), href) if title else None
    if not parts.scheme and not parts.netloc and (found := _EXPORT_FILE.search(parts.path)):
        return PageLink(found.group(1), None, space, href)
    return None


def _replace(tag: Tag, replacement: str | Tag) -> None:
    """Put ``replacement`` where ``tag`` was and destroy ``tag`` with what is left in it,
    so its descendants are known to be gone (``Tag.decomposed``)."""
    tag.replace_with(NavigableString(replacement) if isinstance(replacement, str)
                     else replacement)
    tag.decompose()


def _child(tag: Tag, name: str) -> Tag | None:
    found = tag.find(name, recursive=False)
    return found if isinstance(found, Tag) else None


def _parameter(macro: Tag, name: str) -> str | None:
    for parameter in macro.find_all("ac:parameter", recursive=False):
        if parameter.get("ac:name") == name:
            return _text(parameter.get_text())
    return None


class _Collector:
    def __init__(self, users: Mapping[str, Identity], space: str | None) -> None:
        self.users, self.space = users, space
        self.content = PageContent("")

    def key(self, key: str | None) -> None:
        if key and _JIRA_KEY.match(key) and key not in self.content.jira_keys:
            self.content.jira_keys.append(key)

    def person(self, identity: Identity) -> str:
        if identity not in self.content.mentions:
            self.content.mentions.append(identity)
        return "@" + (identity.name or "unknown-user")

    def user(self, account_id: str | None, user_key: str | None, username: str | None,
             name: str | None = None) -> str:
        known = next((self.users[key] for key in (account_id, user_key, username)
                      if key and key in self.users), None)
        identity = known or Identity(name=name, aliases=user_aliases(account_id, user_key,
                                                                      username))
        return self.person(identity)

    def finish(self, soup: BeautifulSoup | Tag) -> PageContent:
        """Links of the remaining anchors collected; a page link is written as its text
        only, an outside link as ``[text](url)``."""
        for anchor in soup.find_all("a", href=True):
            href = str(anchor["href"])
            if found := _BROWSE_URL.search(href):
                self.key(found.group(1))
            elif link := link_from_url(href, self.space):
                self.content.links.append(link)
                del anchor["href"]
        self.content.text = soup_to_text(soup, TextConverter(external_links=True))
        return self.content


def _storage_macro(macro: Tag, collect: _Collector) -> None:
    name = str(macro.get("ac:name") or "").lower()
    if name == "jira":
        key = _parameter(macro, "key")
        collect.key(key)
        _replace(macro, key or "")
        return
    plain = _child(macro, "ac:plain-text-body")
    rich = _child(macro, "ac:rich-text-body")
    if name in _CODE_MACROS or (plain is not None and rich is None):
        pre = BeautifulSoup("", "html.parser").new_tag("pre")
        pre.string = plain.get_text() if plain is not None else ""
        _replace(macro, pre)
    elif rich is not None:
        title = _parameter(macro, "title") if name in _TITLED_MACROS else None
        if title:
            heading = BeautifulSoup("", "html.parser").new_tag("p")
            heading.string = title
            rich.insert(0, heading)
        _replace(macro, rich.extract())
        rich.unwrap()
    elif name == "status":
        _replace(macro, f"[{_parameter(macro, 'title') or ''}]")
    else:
        macro.decompose()


def _storage_link(link: Tag, collect: _Collector) -> None:
    body = _child(link, "ac:plain-text-link-body") or _child(link, "ac:link-body")
    label = body.get_text().strip() if body is not None else ""
    page, blog = _child(link, "ri:page"), _child(link, "ri:blog-post")
    user, attachment = _child(link, "ri:user"), _child(link, "ri:attachment")
    if page is not None or blog is not None:
        target = page if page is not None else blog
        title = _text(target.get("ri:content-title"))
        if title:
            collect.content.links.append(PageLink(
                None, title, _text(target.get("ri:space-key")) or collect.space, title))
        _replace(link, label or title or "")
    elif user is not None:
        _replace(link, collect.user(_text(user.get("ri:account-id")),
                                    _text(user.get("ri:userkey")), _text(user.get("ri:username"))))
    elif attachment is not None:
        _replace(link, label or str(attachment.get("ri:filename") or ""))
    else:
        _replace(link, label)


def storage_to_content(xhtml: str, *, users: Mapping[str, Identity] | None = None,
                       space: str | None = None) -> PageContent:
    """Text, page links, Jira macro keys and mentions of a storage-format body. ``users``
    maps account ids, user keys and usernames to the people the export names, so that a
    mention (which the storage format writes as an id only) gets its name."""
    soup = parse_html(xhtml)
    collect = _Collector(users or {}, space)
    found: dict[str, list[Tag]] = {}  # one walk over the tree, the tags by kind
    for tag in soup.find_all(True):
        kind = "macro" if tag.name in ("ac:structured-macro", "ac:macro") else \
            "drop" if tag.name in _DROPPED else tag.name
        found.setdefault(kind, []).append(tag)
        if tag.name.startswith(("ac:", "ri:")) and kind != "drop":
            found.setdefault("namespaced", []).append(tag)

    def alive(kind: str) -> list[Tag]:
        return [tag for tag in found.get(kind, ()) if not tag.decomposed]

    for macro in reversed(found.get("macro", ())):  # inner macros first
        if not macro.decomposed:
            _storage_macro(macro, collect)
    for link in alive("ac:link"):
        _storage_link(link, collect)
    for user in alive("ri:user"):
        _replace(user, collect.user(_text(user.get("ri:account-id")),
                                    _text(user.get("ri:userkey")), _text(user.get("ri:username"))))
    for tag in alive("drop"):
        tag.decompose()
    for task in alive("ac:task"):
        status = _child(task, "ac:task-status")
        done = status is not None and status.get_text().strip() == "complete"
        if status is not None:
            status.decompose()
        task.name = "li"
        task.insert(0, NavigableString("[x] " if done else "[ ] "))
    for task_list in alive("ac:task-list"):
        task_list.name = "ul"
    for time in alive("time"):
        if time.get("datetime"):
            _replace(time, str(time["datetime"]))
    for tag in alive("namespaced"):
        if tag.parent is not None and tag.name.startswith(("ac:", "ri:")):
            tag.unwrap()
    return collect.finish(soup)


def view_to_content(root: BeautifulSoup | Tag, *, space: str | None = None) -> PageContent:
    """The same for rendered HTML (an HTML export's ``#main-content``, ``body.view``)."""
    collect = _Collector({}, space)
    for macro in root.select("[data-jira-key]"):
        key = _text(macro.get("data-jira-key"))
        collect.key(key)
        _replace(macro, key or "")
    for link in root.select("a.confluence-userlink, a.user-mention, "
                            "a[data-linked-resource-type=userinfo]"):
        name = _text(link.get_text()) or _text(link.get("data-username"))
        _replace(link, collect.user(_text(link.get("data-account-id")),
                                    _text(link.get("data-user-key")),
                                    _text(link.get("data-username")),
                                    name.lstrip("@") if name else None))
    for anchor in root.select("a[data-linked-resource-type=page][data-linked-resource-id]"):
        collect.content.links.append(PageLink(str(anchor["data-linked-resource-id"]), None,
                                              space, str(anchor.get("href") or "")))
        del anchor["href"]
    for toc in root.select(".toc-macro, .client-side-toc-macro"):
        toc.decompose()
    return collect.finish(root)

"""Jira REST issues (v2 wiki markup, v3 Atlassian Document Format) as ticket rows."""

from __future__ import annotations

import re
from functools import cache
from urllib.parse import urlsplit

from jira2markdown.elements import MarkupElements
from pyparsing import Forward, ParserElement

from jarvis_core.sources.tickets.fields import (
    JIRA,
    TicketError,
    _name,
    _required,
    _text,
    _ticket,
    _timestamp,
    person,
)

# Characters and line starts that may be wiki markup; text with none of them is left as it
# is instead of going through the (slow) grammar.
_WIKI_MARKUP = re.compile(r"[*_{}\[\]|^~+!\\<>&`#:()]|\?\?|--|^\s*(?:-|h[1-6]\.|bq\.)",
                          re.MULTILINE)


_JIRA_KEY = re.compile(r"^[A-Z][A-Z0-9_]+-[1-9][0-9]*$")


def adf_to_text(node: object) -> str:
    """Plain text of an Atlassian Document Format tree (Jira REST v3 rich text)."""
    if isinstance(node, list):
        return "".join(adf_to_text(child) for child in node)
    if not isinstance(node, dict):
        return ""
    kind = node.get("type")
    if kind == "text":
        return node.get("text", "")
    if kind == "hardBreak":
        return "\n"
    if kind in ("mention", "emoji"):
        attrs = node.get("attrs") or {}
        return str(attrs.get("text") or attrs.get("shortName") or "")
    inner = adf_to_text(node.get("content") or [])
    if kind == "heading":
        return "#" * int((node.get("attrs") or {}).get("level", 2)) + " " + inner + "\n\n"
    if kind == "listItem":
        return "- " + inner.strip() + "\n"
    if kind == "codeBlock":
        return "```\n" + inner + "\n```\n\n"
    if kind in ("paragraph", "blockquote", "bulletList", "orderedList", "panel", "rule"):
        return inner + ("\n" if kind in ("bulletList", "orderedList") else "\n\n")
    return inner


@cache
def _wiki_markup_grammar() -> ParserElement:
    """jira2markdown's grammar, built once: its ``convert`` builds it on every call, which
    costs more than converting a typical description."""
    elements = MarkupElements()
    inline_markup, markup = Forward(), Forward()
    inline_markup <<= elements.expr(inline_markup, markup, {},
                                    [e for e in elements if e.is_inline_element])
    markup <<= elements.expr(inline_markup, markup, {}, elements)
    return markup


def _jira_markup(value: object) -> str:
    """Description or comment body as markdown: wiki markup (v2) or ADF (v3)."""
    if value is None:
        return ""
    if isinstance(value, dict):
        return adf_to_text(value).strip()
    text = str(value)
    if not _WIKI_MARKUP.search(text):  # prose without markup converts to itself
        return text.strip()
    return _wiki_markup_grammar().transform_string(text).strip()


def _jira_person(value: object) -> dict | None:
    if not isinstance(value, dict):
        return person(name=_text(value))
    return person(value.get("displayName"), value.get("emailAddress"),
                  value.get("accountId") or value.get("name") or value.get("key"))


def _jira_links(fields: dict) -> list[dict]:
    """Issue links from this issue's side: type, direction, the phrase read from here
    ('is blocked by'), the outward phrase that names the relation ('blocks'), target key."""
    links = []
    for link in fields.get("issuelinks") or []:
        if not isinstance(link, dict):
            continue
        kind = link.get("type") or {}
        for direction, other in (("outward", "outwardIssue"), ("inward", "inwardIssue")):
            target = (link.get(other) or {}).get("key") if isinstance(link.get(other),
                                                                      dict) else None
            if target:
                links.append({"type": _text(kind.get("name")) or "Relates",
                              "direction": direction,
                              "phrase": _text(kind.get(direction)) or _text(kind.get("name")),
                              "outward": _text(kind.get("outward")) or _text(kind.get("name")),
                              "target": target})
    parent = fields.get("parent")
    if isinstance(parent, dict) and parent.get("key"):
        links.append({"type": "Parent", "direction": "outward", "phrase": "is child of",
                      "outward": "is child of", "target": parent["key"]})
    return links


def _jira_browse_url(item: dict, key: str) -> str | None:
    api = _text(item.get("self"))
    if not api:
        return None
    parts = urlsplit(api)
    base = parts.path.split("/rest/api/")[0]
    return f"{parts.scheme}://{parts.netloc}{base}/browse/{key}"


def _jira_ticket(item: dict) -> dict:
    if "__invalid__" in item:
        raise TicketError(item["__invalid__"])
    key = _required("key", item.get("key"))
    if not _JIRA_KEY.match(key):
        raise TicketError(f"'key' {key!r} is not a Jira issue key (PROJECT-123)")
    fields = item.get("fields")
    if not isinstance(fields, dict):
        raise TicketError(f"{key}: missing 'fields' object")
    summary = _required("fields.summary", fields.get("summary"))
    comment_block = fields.get("comment") or {}
    raw_comments = comment_block.get("comments", []) if isinstance(comment_block, dict) \
        else comment_block if isinstance(comment_block, list) else []
    comments = [{"author": _jira_person(c.get("author")),
                 "created_at": _timestamp(c.get("created"), f"{key}: comment created"),
                 "body": _jira_markup(c.get("body"))}
                for c in raw_comments if isinstance(c, dict)]
    return _ticket(
        system=JIRA, key=key, number=None, repo=None, summary=summary,
        description=_jira_markup(fields.get("description")),
        status=_name(fields.get("status")), type=_name(fields.get("issuetype")),
        priority=_name(fields.get("priority")),
        labels=[str(label) for label in fields.get("labels") or []],
        components=[n for n in map(_name, fields.get("components") or []) if n],
        fix_versions=[n for n in map(_name, fields.get("fixVersions") or []) if n],
        assignee=_jira_person(fields.get("assignee")),
        reporter=_jira_person(fields.get("reporter")),
        created_at=_timestamp(fields.get("created"), f"{key}: created"),
        updated_at=_timestamp(fields.get("updated"), f"{key}: updated"),
        resolved_at=_timestamp(fields.get("resolutiondate"), f"{key}: resolutiondate"),
        comments=comments, links=_jira_links(fields), url=_jira_browse_url(item, key),
        is_pull_request=False)

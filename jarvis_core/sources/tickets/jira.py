"""Jira REST issues (v2 wiki markup, v3 Atlassian Document Format) as ticket rows."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from jarvis_core.sources.tickets.fields import (
    JIRA,
    TicketError,
    name_of,
    new_ticket,
    person,
    required,
    text_of,
    timestamp,
)
from jarvis_core.sources.tickets.markup import adf_to_text, jira_to_markdown

_JIRA_KEY = re.compile(r"^[A-Z][A-Z0-9_]+-[1-9][0-9]*$")


def markdown_of(value: object, what: str, warnings: list[str]) -> str:
    """A description or comment body as markdown: wiki markup (v2) converted in one linear
    pass, or Atlassian Document Format (v3) as text. A body that exceeds the conversion's
    time budget is kept as written, with a warning naming it."""
    if value is None:
        return ""
    if isinstance(value, dict):
        return adf_to_text(value).strip()
    converted = jira_to_markdown(str(value))
    if converted.warning:
        warnings.append(f"{what}: {converted.warning}")
    return converted.markdown.strip()


def _jira_person(value: object) -> dict | None:
    if not isinstance(value, dict):
        return person(name=text_of(value))
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
                links.append({"type": text_of(kind.get("name")) or "Relates",
                              "direction": direction,
                              "phrase": text_of(kind.get(direction)) or text_of(kind.get("name")),
                              "outward": text_of(kind.get("outward")) or text_of(kind.get("name")),
                              "target": target})
    parent = fields.get("parent")
    if isinstance(parent, dict) and parent.get("key"):
        links.append({"type": "Parent", "direction": "outward", "phrase": "is child of",
                      "outward": "is child of", "target": parent["key"]})
    return links


def _jira_browse_url(item: dict, key: str) -> str | None:
    api = text_of(item.get("self"))
    if not api:
        return None
    parts = urlsplit(api)
    base = parts.path.split("/rest/api/")[0]
    return f"{parts.scheme}://{parts.netloc}{base}/browse/{key}"


def jira_ticket(item: dict) -> dict:
    if "__invalid__" in item:
        raise TicketError(item["__invalid__"])
    key = required("key", item.get("key"))
    if not _JIRA_KEY.match(key):
        raise TicketError(f"'key' {key!r} is not a Jira issue key (PROJECT-123)")
    fields = item.get("fields")
    if not isinstance(fields, dict):
        raise TicketError(f"{key}: missing 'fields' object")
    summary = required("fields.summary", fields.get("summary"))
    comment_block = fields.get("comment") or {}
    raw_comments = comment_block.get("comments", []) if isinstance(comment_block, dict) \
        else comment_block if isinstance(comment_block, list) else []
    warnings: list[str] = []
    comments = [{"author": _jira_person(c.get("author")),
                 "created_at": timestamp(c.get("created"), f"{key}: comment created"),
                 "body": markdown_of(c.get("body"), f"{key} comment {number}", warnings)}
                for number, c in enumerate(raw_comments, 1) if isinstance(c, dict)]
    ticket = new_ticket(
        system=JIRA, key=key, number=None, repo=None, summary=summary,
        description=markdown_of(fields.get("description"), f"{key} description", warnings),
        status=name_of(fields.get("status")), type=name_of(fields.get("issuetype")),
        priority=name_of(fields.get("priority")),
        labels=[str(label) for label in fields.get("labels") or []],
        components=[n for n in map(name_of, fields.get("components") or []) if n],
        fix_versions=[n for n in map(name_of, fields.get("fixVersions") or []) if n],
        assignee=_jira_person(fields.get("assignee")),
        reporter=_jira_person(fields.get("reporter")),
        created_at=timestamp(fields.get("created"), f"{key}: created"),
        updated_at=timestamp(fields.get("updated"), f"{key}: updated"),
        resolved_at=timestamp(fields.get("resolutiondate"), f"{key}: resolutiondate"),
        comments=comments, links=_jira_links(fields), url=_jira_browse_url(item, key),
        is_pull_request=False)
    return {**ticket, "warnings": warnings}

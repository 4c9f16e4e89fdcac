"""Jira REST issues (v2 wiki markup, v3 Atlassian Document Format) as ticket rows."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from jarvis_core.sources.limits import clip
from jarvis_core.sources.tickets.fields import (
    JIRA,
    TicketError,
    as_list,
    name_of,
    new_ticket,
    person,
    required,
    text_of,
    timestamp,
)
from jarvis_core.sources.tickets.markup import adf_to_text, jira_to_markdown

_JIRA_KEY = re.compile(r"^[A-Z][A-Z0-9_]+-[1-9][0-9]*$")


def markdown_of(value: object, what: str, warnings: list[str],
                max_chars: int | None = None) -> str:
    """A description or comment body as markdown: wiki markup (v2) converted in one linear
    pass, or Atlassian Document Format (v3) as text. A body that exceeds the conversion's
    time budget is kept as written, with a warning naming it; one over ``max_chars`` is cut
    first, so a 20 MB description costs no more than the limit."""
    if value is None:
        return ""
    if isinstance(value, (dict, list)):
        text = adf_to_text(value).strip()
        return text if max_chars is None else clip(text, max_chars, what, warnings)
    text = str(value) if max_chars is None else clip(str(value), max_chars, what, warnings)
    converted = jira_to_markdown(text)
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
    for link in as_list(fields.get("issuelinks")):
        if not isinstance(link, dict):
            continue
        kind = link.get("type") or {}
        kind = kind if isinstance(kind, dict) else {"name": kind}  # the type as a bare name
        for direction, other in (("outward", "outwardIssue"), ("inward", "inwardIssue")):
            issue = link.get(other)
            target = _key_of(issue.get("key")) if isinstance(issue, dict) else None
            if target:
                links.append({"type": text_of(kind.get("name")) or "Relates",
                              "direction": direction,
                              "phrase": text_of(kind.get(direction)) or text_of(kind.get("name")),
                              "outward": text_of(kind.get("outward")) or text_of(kind.get("name")),
                              "target": target})
    parent = fields.get("parent")
    if isinstance(parent, dict) and _key_of(parent.get("key")):
        links.append({"type": "Parent", "direction": "outward", "phrase": "is child of",
                      "outward": "is child of", "target": _key_of(parent["key"])})
    return links


def _key_of(value: object) -> str | None:
    """An issue key as text; None for anything that is not a bare value."""
    return None if isinstance(value, (dict, list)) else text_of(value)


def _jira_browse_url(item: dict, key: str) -> str | None:
    api = text_of(item.get("self"))
    if not api:
        return None
    parts = urlsplit(api)
    base = parts.path.split("/rest/api/")[0]
    return f"{parts.scheme}://{parts.netloc}{base}/browse/{key}"


def jira_ticket(item: dict, max_chars: int | None = None) -> dict:
    """One Jira issue as a ticket row; bodies over ``max_chars`` are cut with a warning."""
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
                 "body": markdown_of(c.get("body"), f"{key} comment {number}", warnings,
                                     max_chars)}
                for number, c in enumerate(raw_comments, 1) if isinstance(c, dict)]
    ticket = new_ticket(
        system=JIRA, key=key, number=None, repo=None, summary=summary,
        description=markdown_of(fields.get("description"), f"{key} description", warnings,
                                max_chars),
        status=name_of(fields.get("status")), type=name_of(fields.get("issuetype")),
        priority=name_of(fields.get("priority")),
        labels=[n for n in map(name_of, as_list(fields.get("labels"))) if n],
        components=[n for n in map(name_of, as_list(fields.get("components"))) if n],
        fix_versions=[n for n in map(name_of, as_list(fields.get("fixVersions"))) if n],
        assignee=_jira_person(fields.get("assignee")),
        reporter=_jira_person(fields.get("reporter")),
        created_at=timestamp(fields.get("created"), f"{key}: created"),
        updated_at=timestamp(fields.get("updated"), f"{key}: updated"),
        resolved_at=timestamp(fields.get("resolutiondate"), f"{key}: resolutiondate"),
        comments=comments, links=_jira_links(fields), url=_jira_browse_url(item, key),
        is_pull_request=False)
    return {**ticket, "warnings": warnings}

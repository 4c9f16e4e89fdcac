"""The normalised ticket row every export format becomes, and the text it is chunked as."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from datetime import UTC, datetime

PARSER_VERSION = 2  # 2: Jira wiki markup converted in one linear pass (sources.tickets.markup)
JIRA, GITHUB = "jira", "github"


class TicketError(ValueError):
    """One file or one issue that cannot be read, with the reason."""


def person(name: str | None = None, email: str | None = None,
           account: str | None = None) -> dict | None:
    """A person as a tracker names them: display name, email, login or account id."""
    values = {"name": text_of(name), "email": text_of(email), "account": text_of(account)}
    return values if any(values.values()) else None


def text_of(value: object) -> str | None:
    if value is None:
        return None
    text = str(value).strip()
    return text or None


def name_of(value: object) -> str | None:
    """The display name of a Jira named object (status, priority...) or a plain string."""
    if isinstance(value, dict):
        return text_of(value.get("name") or value.get("value"))
    return text_of(value)


def timestamp(value: object, what: str) -> datetime | None:
    """UTC naive datetime from ISO text (Jira writes '+0000', GitHub 'Z')."""
    if value in (None, ""):
        return None
    text = str(value).strip()
    text = re.sub(r"([+-]\d{2})(\d{2})$", r"\1:\2", text.replace("Z", "+00:00"))
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError as exc:
        raise TicketError(f"{what} is not a date: {value!r}") from exc
    if parsed.tzinfo is not None:
        parsed = parsed.astimezone(UTC).replace(tzinfo=None)
    return parsed


def as_list(value: object) -> list:
    """A list field however an export wrote it: a list, nothing, or one bare value (labels
    given as ``5``, components as one object)."""
    if value is None or value == "":
        return []
    return value if isinstance(value, list) else [value]


def within(ticket: dict, limit: int) -> list[str]:
    """Cut a ticket's text to ``limit`` characters, the description first, then comments in
    order; warnings saying what was cut (``ingest.max_ticket_chars``)."""
    warnings = []
    description = ticket["description"] or ""
    if len(description) > limit:
        ticket["description"] = description[:limit]
        warnings.append(f"description cut to {limit} characters (ingest.max_ticket_chars)")
    budget = limit - len(ticket["description"] or "")
    kept = []
    for comment in ticket["comments"]:
        if budget <= 0:
            break
        body = comment["body"] or ""
        kept.append({**comment, "body": body[:budget]})
        budget -= len(body)
    if len(kept) < len(ticket["comments"]) or budget < 0:
        warnings.append(f"comments cut after {len(kept)} of {len(ticket['comments'])}: the "
                        f"ticket's text is over {limit} characters (ingest.max_ticket_chars)")
    ticket["comments"] = kept
    return warnings


def required(field_name: str, value: object) -> str:
    text = text_of(value) if not isinstance(value, (dict, list)) else None
    if text is None:
        raise TicketError(f"missing or empty '{field_name}'")
    return text


# The columns of a normalised ticket (the ``tickets`` table adds source, path, warnings).
TICKET_FIELDS = ("system", "key", "number", "repo", "summary", "description", "status",
                 "type", "priority", "labels", "components", "fix_versions", "assignee",
                 "reporter", "created_at", "updated_at", "resolved_at", "comments", "links",
                 "url", "is_pull_request")


def new_ticket(**values: object) -> dict:
    return {name: values[name] for name in TICKET_FIELDS}


def content_hash(ticket: dict) -> str:
    """Identifies everything a ticket says; where it was read from does not count."""
    payload = {name: ticket[name] for name in TICKET_FIELDS}
    encoded = json.dumps(payload, sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha256(f"v{PARSER_VERSION}|{encoded}".encode()).hexdigest()


def attach_comments(tickets: Iterable[dict], comments: dict[int, list[dict]]) -> None:
    """Add comments read from GitHub comment files of the same ticket set to their issues
    (by issue number), oldest first."""
    for ticket in tickets:
        extra = comments.get(ticket["number"]) if ticket["system"] == GITHUB else None
        if extra:
            merged = {(c["created_at"], c["body"]): c for c in [*ticket["comments"], *extra]}
            ticket["comments"] = sorted(merged.values(),
                                        key=lambda c: (c["created_at"] or datetime.min,
                                                       c["body"]))


def display_name(who: dict | None) -> str | None:
    who = who or {}
    return who.get("name") or who.get("account") or who.get("email")


def facts_line(ticket: dict) -> str:
    """The first line of a ticket's document: its fields, people and links, so that they
    are searchable and the graph's edges for them have a line to cite."""
    links = ", ".join(f"{link['phrase']} {link['target']}" for link in ticket["links"])
    facts = [f"{name}: {value}" for name, value in (
        ("Status", ticket["status"]), ("Type", ticket["type"]),
        ("Priority", ticket["priority"]), ("Labels", ", ".join(ticket["labels"] or [])),
        ("Components", ", ".join(ticket["components"] or [])),
        ("Fix versions", ", ".join(ticket["fix_versions"] or [])),
        ("Assignee", display_name(ticket["assignee"])),
        ("Reporter", display_name(ticket["reporter"])), ("Links", links)) if value]
    return " · ".join(facts)


def document_text(ticket: dict) -> str:
    """The markdown a ticket is chunked and embedded as: a facts line, the description and
    every comment under its author and date."""
    parts = [facts_line(ticket), ticket["description"] or ""]
    if ticket["comments"]:
        parts.append("## Comments")
        for comment in ticket["comments"]:
            who = display_name(comment["author"]) or "unknown"
            when = comment["created_at"].date().isoformat() if comment["created_at"] else ""
            parts.append(f"### {who} {when}".rstrip() + "\n\n" + (comment["body"] or ""))
    return "\n\n".join(part for part in parts if part.strip()) + "\n"

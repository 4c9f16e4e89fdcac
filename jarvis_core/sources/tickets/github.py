"""GitHub REST issues and pull requests, with comments embedded or from a comments file,
as ticket rows."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from jarvis_core.sources.tickets.fields import (
    GITHUB,
    TicketError,
    as_list,
    name_of,
    new_ticket,
    person,
    required,
    text_of,
    timestamp,
)

_ISSUE_NUMBER_AT_END = re.compile(r"/issues/(\d+)/?$")


_REPO_FROM_API = re.compile(r"/repos/([^/]+/[^/]+)")


def github_repo_of(item: dict) -> str | None:
    """``owner/name`` from an issue's API or web URL."""
    if found := _REPO_FROM_API.search(str(item.get("repository_url") or item.get("url") or "")):
        return found.group(1)
    parts = urlsplit(str(item.get("html_url") or "")).path.strip("/").split("/")
    return "/".join(parts[:2]) if len(parts) >= 4 else None


def _github_person(value: object) -> dict | None:
    if not isinstance(value, dict):
        return person(account=text_of(value))
    return person(value.get("name"), value.get("email"), value.get("login"))


def github_comment(item: dict) -> dict:
    return {"author": _github_person(item.get("user")),
            "created_at": timestamp(item.get("created_at"), "comment created_at"),
            "body": str(item.get("body") or "").strip()}


def comment_issue_number(item: dict) -> int:
    found = _ISSUE_NUMBER_AT_END.search(str(item.get("issue_url") or ""))
    if not found:
        raise TicketError(f"comment without an issue number in 'issue_url': "
                          f"{item.get('issue_url')!r}")
    return int(found.group(1))


def github_ticket(item: dict, repo: str | None) -> dict:
    if "__invalid__" in item:
        raise TicketError(item["__invalid__"])
    number = item.get("number")
    if isinstance(number, bool) or not isinstance(number, int) or not 1 <= number < 2**63:
        raise TicketError(f"missing or invalid 'number': {number!r}")
    repo = repo or github_repo_of(item)
    if not repo:
        raise TicketError(f"#{number}: repository unknown (no 'repository_url'/'html_url'; "
                          "set 'repo' on the ticket set)")
    summary = required("title", item.get("title"))
    is_pull = isinstance(item.get("pull_request"), dict) or item.get("pull_request") is True
    merged = (item.get("pull_request") or {}).get("merged_at") if is_pull and isinstance(
        item.get("pull_request"), dict) else None
    assignees = [a for a in as_list(item.get("assignees")) if a] or (
        [item["assignee"]] if item.get("assignee") else [])
    comments = item.get("comments")
    milestone = item.get("milestone")
    return new_ticket(
        system=GITHUB, key=f"{repo}#{number}", number=number, repo=repo, summary=summary,
        description=str(item.get("body") or "").strip(),
        status="merged" if merged else text_of(item.get("state")),
        type="pull request" if is_pull else "issue", priority=None,
        labels=[n for n in map(name_of, as_list(item.get("labels"))) if n],
        components=[],
        fix_versions=[n for n in [name_of(milestone.get("title"))] if n]
        if isinstance(milestone, dict) else [],
        assignee=_github_person(assignees[0]) if assignees else None,
        reporter=_github_person(item.get("user")),
        created_at=timestamp(item.get("created_at"), f"#{number}: created_at"),
        updated_at=timestamp(item.get("updated_at"), f"#{number}: updated_at"),
        resolved_at=timestamp(item.get("closed_at"), f"#{number}: closed_at"),
        comments=[github_comment(c) for c in comments if isinstance(c, dict)]
        if isinstance(comments, list) else [],
        links=[], url=text_of(item.get("html_url")), is_pull_request=is_pull)

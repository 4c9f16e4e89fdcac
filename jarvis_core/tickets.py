"""Ticket exports as a source: Jira REST issue JSON and GitHub issues JSON, normalised.

Accepted files (one ticket set is a file or a folder of ``*.json`` files, read recursively,
hidden entries skipped):

- Jira: one issue (``{"key": ..., "fields": {...}}``, REST v2 wiki markup or v3 Atlassian
  Document Format) or a search-result page (``{"issues": [...]}``).
- GitHub: one issue, or a list of issues in the REST shape (pull requests carry the
  ``pull_request`` key). Comments come either embedded as a ``comments`` list on the issue,
  or from a file holding the REST repository-comments list
  (``GET /repos/{owner}/{repo}/issues/comments``): objects with ``issue_url`` and ``body``,
  attached to their issue by the number that ends ``issue_url``.

Every ticket becomes one normalised dict (see ``TICKET_FIELDS``) with its description and
comments as markdown (Jira wiki markup through ``jira2markdown``). A file or an issue that
cannot be read is a failure naming the file (and the issue's index in it); the rest goes on.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from urllib.parse import urlsplit

from charset_normalizer import from_bytes
from jira2markdown.elements import MarkupElements
from pyparsing import Forward, ParserElement

PARSER_VERSION = 1
UNREADABLE = "(unreadable)"
# Characters and line starts that may be wiki markup; text with none of them is left as it
# is instead of going through the (slow) grammar.
_WIKI_MARKUP = re.compile(r"[*_{}\[\]|^~+!\\<>&`#:()]|\?\?|--|^\s*(?:-|h[1-6]\.|bq\.)",
                          re.MULTILINE)
_DUPLICATE = "also in "  # the warning on the kept copy of a key found in several files
JIRA, GITHUB = "jira", "github"

_BOMS = (("utf-8-sig", b"\xef\xbb\xbf"), ("utf-32", b"\xff\xfe\x00\x00"),
         ("utf-32", b"\x00\x00\xfe\xff"), ("utf-16", b"\xff\xfe"), ("utf-16", b"\xfe\xff"))
_JIRA_KEY = re.compile(r"^[A-Z][A-Z0-9_]+-[1-9][0-9]*$")
_ISSUE_NUMBER_AT_END = re.compile(r"/issues/(\d+)/?$")
_REPO_FROM_API = re.compile(r"/repos/([^/]+/[^/]+)")


class TicketError(ValueError):
    """One file or one issue that cannot be read, with the reason."""


@dataclass
class TicketFile:
    """What one export file held: tickets, per-issue failures, comments for others, warnings."""

    path: str
    tickets: list[dict] = field(default_factory=list)
    failures: list[tuple[str, str]] = field(default_factory=list)  # (location, reason)
    comments: dict[int, list[dict]] = field(default_factory=dict)  # GitHub number -> comments
    warnings: list[str] = field(default_factory=list)


def person(name: str | None = None, email: str | None = None,
           account: str | None = None) -> dict | None:
    """A person as a tracker names them: display name, email, login or account id."""
    values = {"name": _text(name), "email": _text(email), "account": _text(account)}
    return values if any(values.values()) else None


def decode_json_bytes(data: bytes) -> tuple[str, list[str]]:
    """JSON text from bytes: a BOM's encoding, else UTF-8, else the detected encoding with a
    warning (exports saved by Windows tools are often cp1252)."""
    for encoding, bom in _BOMS:
        if data.startswith(bom):
            return data.decode(encoding).lstrip("\ufeff"), []
    try:
        return data.decode("utf-8"), []
    except UnicodeDecodeError as exc:
        best = from_bytes(data).best()
        if best is None:
            return data.decode("utf-8", errors="replace"), [
                f"not UTF-8 ({exc.reason} at byte {exc.start}); decoded with replacement "
                "characters"]
        return str(best), [f"not UTF-8 ({exc.reason} at byte {exc.start}); decoded as "
                           f"{best.encoding}"]


def ticket_files(root: Path) -> Iterator[tuple[Path, str]]:
    """(file, path relative to the ticket set) of every JSON file, sorted; hidden skipped."""
    if root.is_file():
        yield root, root.name
        return
    for file in sorted(root.rglob("*.json")):
        relative = file.relative_to(root).as_posix()
        if not any(part.startswith(".") for part in relative.split("/")) and file.is_file():
            yield file, relative


def parse_file(data: bytes, path: str, *, source: str, repo: str | None = None,
               expected: str = "auto") -> TicketFile:
    """Every ticket in one export file; raises TicketError when the file as a whole is
    unusable (not JSON, neither format, not the ``expected`` format), records failures of
    single issues."""
    text, warnings = decode_json_bytes(data)
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TicketError(f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
                          ) from exc
    result = TicketFile(path, warnings=warnings)
    for location, item, system in _items(document):
        if expected != "auto" and system.split("-")[0] != expected:
            names = {JIRA: "Jira issues", GITHUB: "GitHub issues"}
            raise TicketError(f"holds {names[system.split('-')[0]]}, but the ticket set's "
                              f"format is {expected}")
        where = f"{path}{location}"
        try:
            if system == "github-comment":
                number = _comment_issue_number(item)
                result.comments.setdefault(number, []).append(_github_comment(item))
                continue
            ticket = (_jira_ticket(item) if system == JIRA else _github_ticket(item, repo))
        except TicketError as exc:
            result.failures.append((where, str(exc)))
            continue
        ticket.update(source=source, path=path, warnings=list(warnings))
        result.tickets.append(ticket)
    return result


def _items(document: object) -> Iterator[tuple[str, dict, str]]:
    """(location within the file, issue object, format) for each issue the file holds."""
    if isinstance(document, dict) and isinstance(document.get("issues"), list):
        for index, item in enumerate(document["issues"]):
            yield f"#issues[{index}]", _object(item, index), JIRA
    elif isinstance(document, dict) and "fields" in document:
        yield "", document, JIRA
    elif isinstance(document, dict) and "number" in document:
        yield "", document, GITHUB
    elif isinstance(document, list) and document:
        first = document[0] if isinstance(document[0], dict) else {}
        kind = "github-comment" if "issue_url" in first and "number" not in first else (
            JIRA if "fields" in first else GITHUB)
        for index, item in enumerate(document):
            yield f"#[{index}]", _object(item, index), kind
    elif isinstance(document, list):
        return
    else:
        keys = ", ".join(sorted(document)[:8]) if isinstance(document, dict) else ""
        raise TicketError(
            "neither a Jira issue or search page (keys 'key'/'fields' or 'issues') nor GitHub "
            f"issues (objects with 'number'); top level is a {type(document).__name__}"
            + (f" with keys {keys}" if keys else ""))


def _object(item: object, index: int) -> dict:
    if not isinstance(item, dict):
        return {"__invalid__": f"issue {index} is a {type(item).__name__}, not an object"}
    return item


def _text(value: object) -> str | None:
    if value is None:
        return None
    text = str(value).strip()
    return text or None


def _name(value: object) -> str | None:
    """The display name of a Jira named object (status, priority...) or a plain string."""
    if isinstance(value, dict):
        return _text(value.get("name") or value.get("value"))
    return _text(value)


def _timestamp(value: object, what: str) -> datetime | None:
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


def _required(field_name: str, value: object) -> str:
    text = _text(value) if not isinstance(value, (dict, list)) else None
    if text is None:
        raise TicketError(f"missing or empty '{field_name}'")
    return text


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


def github_repo_of(item: dict) -> str | None:
    """``owner/name`` from an issue's API or web URL."""
    if found := _REPO_FROM_API.search(str(item.get("repository_url") or item.get("url") or "")):
        return found.group(1)
    parts = urlsplit(str(item.get("html_url") or "")).path.strip("/").split("/")
    return "/".join(parts[:2]) if len(parts) >= 4 else None


def _github_person(value: object) -> dict | None:
    if not isinstance(value, dict):
        return person(account=_text(value))
    return person(value.get("name"), value.get("email"), value.get("login"))


def _github_comment(item: dict) -> dict:
    return {"author": _github_person(item.get("user")),
            "created_at": _timestamp(item.get("created_at"), "comment created_at"),
            "body": str(item.get("body") or "").strip()}


def _comment_issue_number(item: dict) -> int:
    found = _ISSUE_NUMBER_AT_END.search(str(item.get("issue_url") or ""))
    if not found:
        raise TicketError(f"comment without an issue number in 'issue_url': "
                          f"{item.get('issue_url')!r}")
    return int(found.group(1))


def _github_ticket(item: dict, repo: str | None) -> dict:
    if "__invalid__" in item:
        raise TicketError(item["__invalid__"])
    number = item.get("number")
    if isinstance(number, bool) or not isinstance(number, int) or number < 1:
        raise TicketError(f"missing or invalid 'number': {number!r}")
    repo = repo or github_repo_of(item)
    if not repo:
        raise TicketError(f"#{number}: repository unknown (no 'repository_url'/'html_url'; "
                          "set 'repo' on the ticket set)")
    summary = _required("title", item.get("title"))
    is_pull = isinstance(item.get("pull_request"), dict) or item.get("pull_request") is True
    merged = (item.get("pull_request") or {}).get("merged_at") if is_pull and isinstance(
        item.get("pull_request"), dict) else None
    assignees = [a for a in (item.get("assignees") or []) if a] or (
        [item["assignee"]] if item.get("assignee") else [])
    comments = item.get("comments")
    milestone = item.get("milestone")
    return _ticket(
        system=GITHUB, key=f"{repo}#{number}", number=number, repo=repo, summary=summary,
        description=str(item.get("body") or "").strip(),
        status="merged" if merged else _text(item.get("state")),
        type="pull request" if is_pull else "issue", priority=None,
        labels=[_name(label) for label in item.get("labels") or [] if _name(label)],
        components=[],
        fix_versions=[_name(milestone.get("title"))] if isinstance(milestone, dict)
        and milestone.get("title") else [],
        assignee=_github_person(assignees[0]) if assignees else None,
        reporter=_github_person(item.get("user")),
        created_at=_timestamp(item.get("created_at"), f"#{number}: created_at"),
        updated_at=_timestamp(item.get("updated_at"), f"#{number}: updated_at"),
        resolved_at=_timestamp(item.get("closed_at"), f"#{number}: closed_at"),
        comments=[_github_comment(c) for c in comments if isinstance(c, dict)]
        if isinstance(comments, list) else [],
        links=[], url=_text(item.get("html_url")), is_pull_request=is_pull)


# The columns of a normalised ticket (the ``tickets`` table adds source, path, warnings).
TICKET_FIELDS = ("system", "key", "number", "repo", "summary", "description", "status",
                 "type", "priority", "labels", "components", "fix_versions", "assignee",
                 "reporter", "created_at", "updated_at", "resolved_at", "comments", "links",
                 "url", "is_pull_request")


def _ticket(**values: object) -> dict:
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


@dataclass
class TicketSet:
    """Every ticket of one ticket set (newest copy of a key wins), with what failed."""

    tickets: dict[str, dict] = field(default_factory=dict)
    failures: list[tuple[str, str]] = field(default_factory=list)  # (location, reason)
    files: dict[str, str] = field(default_factory=dict)  # relative path -> sha256 of bytes
    file_keys: dict[str, list[str]] = field(default_factory=dict)  # every key a file held
    reused_files: int = 0


def _missing(root: Path) -> None:
    if not root.exists():
        raise TicketError(f"ticket export path does not exist: {root}")


def export_file_hashes(root: Path) -> dict[str, str]:
    """sha256 of every export file's bytes, ``UNREADABLE`` for a file that cannot be read."""
    _missing(root)
    hashes = {}
    for file, relative in ticket_files(root):
        try:
            hashes[relative] = hashlib.sha256(file.read_bytes()).hexdigest()
        except OSError:
            hashes[relative] = UNREADABLE
    return hashes


def _reused(ticket: dict) -> dict:
    """A stored ticket as parsing would give it (the duplicate warning is recomputed)."""
    return {**{name: ticket[name] for name in TICKET_FIELDS},
            "source": ticket["source"], "path": ticket["path"],
            "warnings": [w for w in ticket["warnings"] or [] if not w.startswith(_DUPLICATE)]}


def read_ticket_set(root: Path, source: str, *, repo: str | None = None,
                    expected: str = "auto",
                    reuse: Mapping[str, tuple[str, list[dict]]] | None = None) -> TicketSet:
    """Parse every export file under ``root``, except that a file whose hash is the one in
    ``reuse`` (path -> (hash, its stored tickets)) gives its stored tickets unparsed. A
    duplicate key keeps its most recently updated copy and notes the other file in the
    ticket's warnings."""
    _missing(root)
    result = TicketSet()
    comments: dict[int, list[dict]] = {}
    for file, relative in ticket_files(root):
        try:
            data = file.read_bytes()
            digest = result.files[relative] = hashlib.sha256(data).hexdigest()
            stored = (reuse or {}).get(relative)
            if stored is not None and stored[0] == digest:
                parsed = TicketFile(relative, tickets=[_reused(t) for t in stored[1]])
                result.reused_files += 1
            else:
                parsed = parse_file(data, relative, source=source, repo=repo, expected=expected)
        except (OSError, TicketError) as exc:
            result.files.setdefault(relative, UNREADABLE)
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            result.failures.append((relative, reason))
            continue
        result.failures.extend(parsed.failures)
        result.file_keys[relative] = [ticket["key"] for ticket in parsed.tickets]
        for number, found in parsed.comments.items():
            comments.setdefault(number, []).extend(found)
        for ticket in parsed.tickets:
            kept = result.tickets.get(ticket["key"])
            if kept is not None:
                newer, older = sorted((kept, ticket), key=lambda t: t["updated_at"] or datetime.min,
                                      reverse=True)
                newer["warnings"] = [*newer["warnings"],
                                     f"{_DUPLICATE}{older['path']} (older copy ignored)"]
                ticket = newer
            result.tickets[ticket["key"]] = ticket
    attach_comments(result.tickets.values(), comments)
    for ticket in result.tickets.values():
        ticket["text"] = document_text(ticket)
        ticket["content_hash"] = content_hash(ticket)
    return result

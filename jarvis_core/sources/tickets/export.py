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
cannot be read is a failure naming the file (and the issue's index in it); the rest goes on."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from charset_normalizer import from_bytes

from jarvis_core.settings import IngestSettings
from jarvis_core.sources.changes import UNREADABLE
from jarvis_core.sources.limits import ItemTooSlow, cpu_time_limit
from jarvis_core.sources.listings import ticket_files, ticket_listing
from jarvis_core.sources.tickets.fields import (
    GITHUB,
    JIRA,
    TICKET_FIELDS,
    TicketError,
    attach_comments,
    content_hash,
    document_text,
    within,
)
from jarvis_core.sources.tickets.github import (
    comment_issue_number,
    github_comment,
    github_ticket,
)
from jarvis_core.sources.tickets.jira import jira_ticket

_DUPLICATE = "also in "  # the warning on the kept copy of a key found in several files
_LIMITS = IngestSettings()  # the defaults
_MAX_REASON_CHARS = 300


_BOMS = (("utf-8-sig", b"\xef\xbb\xbf"), ("utf-32", b"\xff\xfe\x00\x00"),
         ("utf-32", b"\x00\x00\xfe\xff"), ("utf-16", b"\xff\xfe"), ("utf-16", b"\xfe\xff"))


@dataclass
class TicketFile:
    """What one export file held: tickets, per-issue failures, comments for others, warnings."""

    path: str
    tickets: list[dict] = field(default_factory=list)
    failures: list[tuple[str, str]] = field(default_factory=list)  # (location, reason)
    comments: dict[int, list[dict]] = field(default_factory=dict)  # GitHub number -> comments
    warnings: list[str] = field(default_factory=list)


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


def parse_file(data: bytes, path: str, *, source: str, repo: str | None = None,
               expected: str = "auto", limits: IngestSettings = _LIMITS) -> TicketFile:
    """Every ticket in one export file; raises TicketError when the file as a whole is
    unusable (not JSON, nested past the parser's depth, neither format, not the
    ``expected`` format), records failures of single issues: whatever one issue holds, it
    is a failure of that issue (the error named), never of the file."""
    text, warnings = decode_json_bytes(data)
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TicketError(f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
                          ) from exc
    except RecursionError as exc:
        raise TicketError("JSON nested too deeply to read (over Python's recursion limit)"
                          ) from exc
    result = TicketFile(path, warnings=warnings)
    for location, item, system in _items(document):
        if expected != "auto" and system.split("-")[0] != expected:
            names = {JIRA: "Jira issues", GITHUB: "GitHub issues"}
            raise TicketError(f"holds {names[system.split('-')[0]]}, but the ticket set's "
                              f"format is {expected}")
        where = f"{path}{location}"
        try:
            with cpu_time_limit(limits.max_item_seconds, where):
                if system == "github-comment":
                    number = comment_issue_number(item)
                    result.comments.setdefault(number, []).append(github_comment(item))
                    continue
                ticket = (jira_ticket(item, limits.max_ticket_chars) if system == JIRA
                          else github_ticket(item, repo))
        except (TicketError, ItemTooSlow) as exc:
            result.failures.append((where, str(exc)))
            continue
        except Exception as exc:  # an item shaped like nothing expected: its failure only
            result.failures.append((where, unexpected(exc)))
            continue
        ticket.update(source=source, path=path,
                      warnings=[*warnings, *ticket.pop("warnings", [])])
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


def unexpected(exc: Exception) -> str:
    """The reason for an error no reader anticipated, short enough for a table cell."""
    return f"unreadable: {type(exc).__name__}: {exc}"[:_MAX_REASON_CHARS]


def _object(item: object, index: int) -> dict:
    if not isinstance(item, dict):
        return {"__invalid__": f"issue {index} is a {type(item).__name__}, not an object"}
    return item


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
                    reuse: Mapping[str, tuple[str, list[dict]]] | None = None,
                    limits: IngestSettings = _LIMITS) -> TicketSet:
    """Parse every export file under ``root``, except that a file whose hash is the one in
    ``reuse`` (path -> (hash, its stored tickets)) gives its stored tickets unparsed. A
    duplicate key keeps its most recently updated copy and notes the other file in the
    ticket's warnings. Refused files (a symlink out of the export, a name that is not
    UTF-8) and files no reader could make sense of are failures; the rest goes on."""
    _missing(root)
    result = TicketSet()
    comments: dict[int, list[dict]] = {}
    files, result.failures = ticket_listing(root)
    for file, relative in files:
        try:
            data = file.read_bytes()
            digest = result.files[relative] = hashlib.sha256(data).hexdigest()
            stored = (reuse or {}).get(relative)
            if stored is not None and stored[0] == digest:
                parsed = TicketFile(relative, tickets=[_reused(t) for t in stored[1]])
                result.reused_files += 1
            else:
                parsed = parse_file(data, relative, source=source, repo=repo, expected=expected,
                                    limits=limits)
        except Exception as exc:  # noqa: BLE001 - one file's problem, whatever it is
            result.files.setdefault(relative, UNREADABLE)
            reason = (exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
                      if isinstance(exc, (OSError, TicketError)) else unexpected(exc))
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
    for key, ticket in list(result.tickets.items()):
        try:
            ticket["warnings"] = [*ticket["warnings"], *within(ticket, limits.max_ticket_chars)]
            ticket["text"] = document_text(ticket)
            ticket["content_hash"] = content_hash(ticket)
        except Exception as exc:  # noqa: BLE001 - a ticket no step expected fails alone
            del result.tickets[key]
            result.failures.append((f"{ticket['path']}#{key}", unexpected(exc)))
    return result

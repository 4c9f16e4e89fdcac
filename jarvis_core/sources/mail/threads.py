"""Mail threads and their documents.

Messages join a thread through ``In-Reply-To`` and ``References`` (every id named links the
two, so a thread holds together when a message in the middle is missing). Only a message
with neither header falls back to its subject: a reply ("Re:", "AW:", "SV:", "Fwd:" ...)
joins the latest earlier thread whose first message had the same normalised subject.

A thread's document is its messages in date order, each under a ``##`` heading naming the
author, date and subject. In a reply whose thread holds earlier messages, quoted text (``>``
blocks with their "On ... wrote:" line, in the usual languages, and Outlook's "Original
Message" / "From: ... Sent: ..." tails) is collapsed, so the same words are indexed once.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from jarvis_core.sources.mail.message import MailMessage
from jarvis_core.sources.people import Identity

THREAD_VERSION = 1
QUOTE_MARK = "> …"
_REPLY_PREFIX = re.compile(
    r"^\s*(?:\[[^\]]{1,40}\]\s*)*"  # list tags: [lumen-dev]
    r"(?:(?:re|fwd?|aw|wg|sv|vs|vb|tr|antw|ref|rif|odp|pd|rv|res|enc|r)\s*"
    r"(?:\[\d+\]|\(\d+\))?\s*[:：]\s*(?:\[[^\]]{1,40}\]\s*)*)+",
    re.IGNORECASE)
_LIST_TAG = re.compile(r"^\s*(?:\[[^\]]{1,40}\]\s*)+")
_QUOTED = re.compile(r"^\s*>")
# "On Mon, 12 Oct 2026 at 10:00, Maya Chen <maya@...> wrote:" and its translations; it only
# counts right before a quote block, so the loose shape is safe.
_ATTRIBUTION = re.compile(
    r"\b(?:wrote|writes|schrieb|schreef|a\s+écrit|escribió|escreveu|ha\s+scritto|skrev|"
    r"kirjoitti|napisał[a]?|napsal[a]?|написал[а]?|yazdı|írta)\b[^:\n]{0,80}:\s*$",
    re.IGNORECASE)
# The first words of an attribution wrapped onto two lines ("Am Do., 15. Okt. 2026 um 18:20
# Uhr" / "schrieb Maya Chen <...>:").
_ATTRIBUTION_OPENER = re.compile(
    r"^\s*(?:on|am|le|el|op|den|il|em|no dia|på|dne|dnia|w dniu)\s", re.IGNORECASE)
_ORIGINAL_MESSAGE = re.compile(
    r"^\s*[-_]{2,}\s*(?:original message|ursprüngliche nachricht|originalnachricht|"
    r"message d'origine|mensaje original|messaggio originale|oorspronkelijk bericht|"
    r"originalmeddelande|opprinnelig melding|oprindelig meddelelse|alkuperäinen viesti|"
    r"mensagem original|wiadomość oryginalna)\s*[-_]{2,}\s*$", re.IGNORECASE)
_OUTLOOK_FROM = re.compile(
    r"^\s*\**(?:from|von|de|da|van|från|fra|od|lähettäjä|от)\s?:\**\s", re.IGNORECASE)
_OUTLOOK_SENT = re.compile(
    r"^\s*\**(?:sent|date|gesendet|datum|envoyé|enviado|inviato|verzonden|skickat|sendt|"
    r"wysłano|lähetetty|отправлено|data)\s?:\**\s", re.IGNORECASE)
_SEPARATOR = re.compile(r"^\s*(?:_{5,}|-{3,})\s*$")


def normal_subject(subject: str) -> str:
    """'Re: AW: [lumen-dev] Dedupe key' -> 'dedupe key' (for matching, case-folded)."""
    return " ".join(_REPLY_PREFIX.sub("", subject or "").split()).casefold()


def is_reply_subject(subject: str) -> bool:
    return bool(_REPLY_PREFIX.match(_LIST_TAG.sub("", subject or "")))


def display_subject(subject: str) -> str:
    """The subject without reply/forward prefixes and list tags, as written otherwise."""
    return " ".join(_REPLY_PREFIX.sub("", subject or "").split()) or "(no subject)"


@dataclass(frozen=True)
class MailThread:
    thread_id: str                 # the Message-ID of its earliest message
    subject: str                   # that message's subject without prefixes
    message_ids: tuple[str, ...]   # in date order
    participants: tuple[Identity, ...]  # authors first, then recipients
    started_at: datetime | None
    last_at: datetime | None
    text: str
    sections: tuple[tuple[str, int, int], ...]  # (message id, char start, char end) in text
    content_hash: str


def _order(message: MailMessage) -> tuple:
    return (message.date is None, message.date or datetime.min, message.file, message.item)


class _Groups:
    def __init__(self) -> None:
        self.parent: dict[str, str] = {}

    def find(self, item: str) -> str:
        self.parent.setdefault(item, item)
        while self.parent[item] != item:
            self.parent[item] = self.parent[self.parent[item]]
            item = self.parent[item]
        return item

    def union(self, first: str, second: str) -> None:
        a, b = self.find(first), self.find(second)
        if a != b:
            self.parent[max(a, b)] = min(a, b)


def group_threads(messages: Iterable[MailMessage]) -> list[list[MailMessage]]:
    """Messages grouped into threads, each in date order; threads ordered by first date."""
    ordered = sorted(messages, key=_order)
    groups = _Groups()
    for message in ordered:
        groups.find(message.message_id)
        for other in (*message.references, *([message.in_reply_to] if message.in_reply_to
                                               else [])):
            groups.union(message.message_id, other)
    components: dict[str, list[MailMessage]] = {}
    for message in ordered:
        components.setdefault(groups.find(message.message_id), []).append(message)
    # Subject fallback, in date order so a reply finds the thread started before it.
    threads: list[list[MailMessage]] = []
    started: dict[str, list[MailMessage]] = {}  # normalised subject -> latest thread with it
    for thread in sorted(components.values(), key=lambda messages: _order(messages[0])):
        first, subject = thread[0], normal_subject(thread[0].subject)
        headerless = not first.references and not first.in_reply_to
        if headerless and is_reply_subject(first.subject) and subject in started:
            started[subject].extend(thread)
            continue
        threads.append(thread)
        if subject:
            started[subject] = thread
    for thread in threads:
        thread.sort(key=_order)
    return threads


def _attribution_start(lines: list[str], index: int) -> int | None:
    """The first line of an attribution ending just above line ``index`` (blank lines
    between allowed), or None. Gmail wraps long ones onto two lines."""
    above = index - 1
    while above >= 0 and not lines[above].strip():
        above -= 1
    if above < 0:
        return None
    wrapped = above >= 1 and lines[above - 1].strip() != ""
    if _ATTRIBUTION.search(lines[above].strip()):
        opener = wrapped and _ATTRIBUTION_OPENER.match(lines[above - 1]) \
            and not _ATTRIBUTION_OPENER.match(lines[above])
        return above - 1 if opener else above
    if wrapped and _ATTRIBUTION.search(f"{lines[above - 1].strip()} {lines[above].strip()}"):
        return above - 1
    return None


def _outlook_tail(lines: list[str]) -> int | None:
    """Where an Outlook-style quoted original starts: an 'Original Message' rule, or a
    'From:' line with a 'Sent:'/'Date:' line right below."""
    for index, line in enumerate(lines):
        if _ORIGINAL_MESSAGE.match(line):
            return index
        if _OUTLOOK_FROM.match(line) and any(_OUTLOOK_SENT.match(below)
                                             for below in lines[index + 1:index + 4]):
            start = index
            while start > 0 and (_SEPARATOR.match(lines[start - 1])
                                 or not lines[start - 1].strip()):
                start -= 1
            return start
    return None


def collapse_quotes(body: str) -> str:
    """The body with quoted text collapsed: a quote block inside the reply becomes one
    ``> …`` line, a trailing one (with its attribution line) disappears."""
    lines = body.split("\n")
    tail = _outlook_tail(lines)
    if tail is not None:
        lines = lines[:tail]
    kept: list[str] = []
    index = 0
    while index < len(lines):
        if not _QUOTED.match(lines[index]):
            kept.append(lines[index])
            index += 1
            continue
        end = index
        while end < len(lines) and (_QUOTED.match(lines[end]) or (
                not lines[end].strip() and any(_QUOTED.match(line) for line in lines[end:end + 2]
                                               if line.strip()))):
            end += 1
        attribution = _attribution_start(kept, len(kept))
        if attribution is not None:
            del kept[attribution:]
        if any(line.strip() for line in lines[end:]):  # a quote the reply goes on after
            kept += ["", QUOTE_MARK, ""]
        index = end
    return re.sub(r"\n{3,}", "\n\n", "\n".join(kept)).strip("\n")


def _who(identity: Identity | None) -> str:
    if identity is None:
        return "unknown sender"
    if identity.name and identity.email:
        return f"{identity.name} <{identity.email}>"
    return identity.name or identity.email or "unknown sender"


def _short(identity: Identity) -> str:
    return identity.name or identity.email or "?"


def _size(size: int) -> str:
    return f"{size} B" if size < 1024 else f"{size / 1024:.1f} kB" if size < 1024 ** 2 \
        else f"{size / 1024 ** 2:.1f} MB"


def _when(date: datetime | None) -> str:
    return date.strftime("%Y-%m-%d %H:%M UTC") if date else "undated"


def _message_section(message: MailMessage, collapse: bool) -> str:
    heading = f"## {_who(message.sender)} · {_when(message.date)} · " \
              f"{message.subject or '(no subject)'}"
    lines = [heading]
    recipients = [("To", message.to), ("Cc", message.cc)]
    written = [f"{label}: {', '.join(map(_short, people))}" for label, people in recipients
               if people]
    if written:
        lines.append(" · ".join(written))
    body = collapse_quotes(message.body) if collapse else message.body
    parts = ["\n".join(lines), body.strip("\n")]
    if message.attachments:
        listed = ", ".join(f"{a.filename or 'unnamed'} ({a.content_type}, {_size(a.size)})"
                           for a in message.attachments)
        parts.append(f"Attachments: {listed}")
    return "\n\n".join(part for part in parts if part)


def build_thread(messages: list[MailMessage]) -> MailThread:
    """The thread document of messages already in date order."""
    first = messages[0]
    authors = [m.sender for m in messages if m.sender]
    participants = tuple(dict.fromkeys([*authors, *(p for m in messages for p in m.to + m.cc)]))
    dates = [m.date for m in messages if m.date]
    names = ", ".join(dict.fromkeys(map(_short, authors))) or "unknown senders"
    days = list(dict.fromkeys(date.date().isoformat() for date in (dates[:1] + dates[-1:])))
    span = " – ".join(days) or "undated"
    text = f"Thread: {len(messages)} message{'s' if len(messages) != 1 else ''} · {span} · " \
           f"{names}"
    sections = []
    for position, message in enumerate(messages):
        text += "\n\n"
        start = len(text)
        text += _message_section(message, collapse=position > 0)
        sections.append((message.message_id, start, len(text)))
    text += "\n"
    ids = tuple(m.message_id for m in messages)
    payload = json.dumps([THREAD_VERSION, ids, text], ensure_ascii=False)
    return MailThread(
        thread_id=first.message_id, subject=display_subject(first.subject), message_ids=ids,
        participants=participants, started_at=dates[0] if dates else None,
        last_at=dates[-1] if dates else None, text=text, sections=tuple(sections),
        content_hash=hashlib.sha256(payload.encode()).hexdigest())


def build_threads(messages: Iterable[MailMessage]) -> list[MailThread]:
    return [build_thread(group) for group in group_threads(messages)]

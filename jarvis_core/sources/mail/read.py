"""Mail as a source: mbox files, Maildir folders and loose ``.eml`` files, read incrementally.

A mail source is a file (an mbox, or one ``.eml``) or a folder, read recursively: every
Maildir in it (a folder with ``cur/`` and ``new/``; Maildir++ subfolders such as ``.Sent``
included), every ``*.eml`` file, and every mbox (``*.mbox``/``*.mbx``, or any other file
starting with a ``From`` line, as Thunderbird and mutt write them). Hidden entries and
anything else are skipped.

Incremental: an mbox is read from the byte where the last run stopped when the bytes read
before are unchanged (their sha256 is kept), so a grown mbox costs only its new messages; a
rewritten one (compacted, edited) is read again whole. A truncated last message (the file
does not end with a newline, e.g. a client still writing) is read for what it says, reported,
and read again next time. A Maildir or ``.eml`` file whose bytes are unchanged (also after a
rename, as Maildir flags do) reuses its stored messages.

One message's problems never stop the others: they are ``MailProblem`` rows naming the file,
the message and the reason; only a missing source raises ``MailError``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path

from jarvis_core.sources.listings import EML, MAILDIR, MBOX, mail_files
from jarvis_core.sources.mail.message import Attachment, MailError, MailMessage, parse_message
from jarvis_core.sources.mail.threads import MailThread, build_threads
from jarvis_core.sources.people import Identity

__all__ = ["MBOX", "MAILDIR", "EML", "Attachment", "MailError", "MailFile", "MailMessage",
           "MailProblem", "MailRead", "MailThread", "mail_files", "read_mail_source",
           "mail_identities"]

ERROR, WARNING = "error", "warning"
_BLOCK = 1 << 20
_ENVELOPE_DATE = re.compile(rb"([A-Z][a-z]{2}\s+[A-Z][a-z]{2}\s+\d{1,2}\s+\d\d:\d\d:\d\d\s+\d{4})")


@dataclass(frozen=True)
class MailFile:
    """What was read from one file, kept between runs."""

    path: str                 # relative to the mail source
    kind: str                 # MBOX, MAILDIR or EML
    digest: str               # sha256 of the file; for an mbox, of its first `offset` bytes
    offset: int               # bytes read (an mbox's truncated last message is not counted)
    count: int                # messages read from it, failed ones included
    messages: tuple[tuple[str, str], ...]       # (Message-ID, item) of each message read
    failures: tuple[tuple[str, str], ...] = ()  # (item, reason) of messages not read


@dataclass(frozen=True)
class MailProblem:
    file: str
    item: str
    reason: str
    severity: str = ERROR     # ERROR: not read or incomplete; WARNING: read with a problem


@dataclass
class MailRead:
    messages: dict[str, MailMessage] = field(default_factory=dict)  # by Message-ID
    files: dict[str, MailFile] = field(default_factory=dict)
    problems: list[MailProblem] = field(default_factory=list)
    parsed: int = 0           # messages parsed this run
    reused: int = 0           # messages taken from the previous run unparsed

    @property
    def threads(self) -> list[MailThread]:
        """Every thread's document (the ingest makes them a batch at a time instead)."""
        return build_threads(self.messages.values())


def _envelope_date(line: bytes) -> datetime | None:
    """The date of an mbox 'From sender Mon Oct 12 14:03:00 2026' line (UTC by convention)."""
    found = _ENVELOPE_DATE.search(line)
    if not found:
        return None
    try:
        return datetime.strptime(" ".join(found.group(1).decode().split()), "%a %b %d %H:%M:%S %Y")
    except ValueError:
        return None


def _message_bytes(lines: list[bytes]) -> bytes:
    """An mbox entry's bytes without the blank line that separates it from the next."""
    data = b"".join(lines)
    for blank in (b"\r\n", b"\n"):
        if data.endswith(blank * 2):
            return data[:-len(blank)]
    return data


@dataclass
class _FileRead:
    state: MailFile
    messages: list[MailMessage]
    problems: list[MailProblem]
    parsed: int = 0


def _parse(data: bytes, relative: str, item: str, read: _FileRead,
           ids: list[tuple[str, str]], envelope: datetime | None = None) -> MailMessage | None:
    try:
        message = parse_message(data, relative, item, envelope_date=envelope)
    except Exception as exc:  # noqa: BLE001 - one bad message never stops the file
        reason = str(exc) if isinstance(exc, MailError) else \
            f"unreadable message: {type(exc).__name__}: {exc}"
        read.problems.append(MailProblem(relative, item, reason))
        return None
    read.parsed += 1
    read.messages.append(message)
    ids.append((message.message_id, item))
    return message


def _reusable(previous: MailFile | None, stored: Mapping[str, MailMessage]) -> bool:
    return previous is not None and all(mid in stored for mid, _ in previous.messages)


def _restored(state: MailFile, relative: str, stored: Mapping[str, MailMessage]
              ) -> list[MailMessage]:
    """The stored messages of a file, as read from it (a duplicate's stored copy may come
    from another file)."""
    return [replace(stored[mid], file=relative, item=item) for mid, item in state.messages]


def _read_mbox(path: Path, relative: str, previous: MailFile | None,
               stored: Mapping[str, MailMessage]) -> _FileRead:
    hasher, start = hashlib.sha256(), 0
    ids: list[tuple[str, str]] = []
    failures: list[tuple[str, str]] = []
    read = _FileRead(MailFile(relative, MBOX, "", 0, 0, ()), [], [])
    with path.open("rb") as handle:
        if (_reusable(previous, stored) and previous.kind == MBOX
                and previous.offset <= path.stat().st_size):
            prefix = hashlib.sha256()
            remaining = previous.offset
            while remaining and (block := handle.read(min(_BLOCK, remaining))):
                prefix.update(block)
                remaining -= len(block)
            if prefix.hexdigest() == previous.digest:
                hasher, start = prefix, previous.offset
                ids, failures = list(previous.messages), list(previous.failures)
                read.messages = _restored(previous, relative, stored)
                read.problems = [MailProblem(relative, item, reason) for item, reason in failures]
            else:
                handle.seek(0)
        count = previous.count if start else 0
        committed = (hasher.copy(), start, count, len(ids), len(failures))
        position, begun, lines, envelope, last = start, None, [], None, b""

        def finish(complete: bool) -> None:
            nonlocal count
            count += 1
            item = f"message {count} (byte {begun})"
            message = _parse(_message_bytes(lines), relative, item, read, ids,
                             _envelope_date(envelope))
            if not complete:
                read.problems.append(MailProblem(
                    relative, item, "truncated: the file ends inside this message (no final "
                    "newline); read as far as it goes, and read again when the file grows"))
            elif message is None:
                failures.append((item, read.problems[-1].reason))

        for line in handle:
            if line.startswith(b"From "):
                if begun is not None:
                    finish(True)
                elif b"".join(lines).strip():
                    read.problems.append(MailProblem(
                        relative, f"bytes {start}-{position}", "text before the first 'From ' "
                        "line is no message; skipped"))
                committed = (hasher.copy(), position, count, len(ids), len(failures))
                begun, lines, envelope = position, [], line
            else:
                lines.append(line)
            hasher.update(line)
            position += len(line)
            last = line
        if begun is not None and last.endswith(b"\n"):
            finish(True)
            committed = (hasher, position, count, len(ids), len(failures))
        elif begun is not None:
            finish(False)
        elif start == 0 and b"".join(lines).strip():
            read.problems.append(MailProblem(relative, "", "not an mbox: no line starts with "
                                             "'From ' (an mbox entry's first line)"))
    digest, offset, count, kept_ids, kept_failures = committed
    read.state = MailFile(relative, MBOX, digest.hexdigest(), offset, count,
                          tuple(ids[:kept_ids]), tuple(failures[:kept_failures]))
    return read


def _read_single(path: Path, relative: str, kind: str, previous: MailFile | None,
                 by_digest: Mapping[str, MailFile], stored: Mapping[str, MailMessage]
                 ) -> _FileRead:
    """A one-message file; its stored messages when its bytes are unchanged, also when it
    was renamed (a Maildir file moving from new/ to cur/ or changing flags)."""
    data = path.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if previous is None or previous.digest != digest:
        previous = by_digest.get(digest)
    if _reusable(previous, stored) and previous.digest == digest:
        state = replace(previous, path=relative, kind=kind)
        return _FileRead(state, _restored(state, relative, stored),
                         [MailProblem(relative, item, reason) for item, reason in state.failures])
    read = _FileRead(MailFile(relative, kind, digest, len(data), 1, ()), [], [])
    ids: list[tuple[str, str]] = []
    if _parse(data, relative, "", read, ids) is None:
        read.state = replace(read.state, failures=((read.problems[-1].item,
                                                    read.problems[-1].reason),))
    read.state = replace(read.state, messages=tuple(ids))
    return read


def read_mail_source(root: Path, *, files: Mapping[str, MailFile] | None = None,
                     messages: Mapping[str, MailMessage] | None = None) -> MailRead:
    """Every message of the mail source at ``root`` (and so its threads). ``files`` and
    ``messages`` are what the previous run returned (its ``files`` and ``messages``):
    unchanged files and the already-read part of a grown mbox are taken from them without
    parsing. A Message-ID seen twice keeps its first copy (files in path order), the other
    is a warning."""
    if not root.exists():
        raise MailError(f"mail source path does not exist: {root}")
    files, stored = files or {}, messages or {}
    by_digest = {state.digest: state for state in files.values() if state.kind != MBOX}
    result = MailRead()
    for path, relative, kind in mail_files(root):
        previous = files.get(relative)
        try:
            if kind == MBOX:
                read = _read_mbox(path, relative, previous, stored)
            else:
                read = _read_single(path, relative, kind, previous, by_digest, stored)
        except OSError as exc:
            result.problems.append(MailProblem(relative, "", exc.strerror or str(exc)))
            continue
        result.files[relative] = read.state
        result.problems += read.problems
        result.parsed += read.parsed
        result.reused += len(read.messages) - read.parsed
        for message in read.messages:
            kept = result.messages.get(message.message_id)
            if kept is not None:
                result.problems.append(MailProblem(
                    relative, message.item, f"duplicate Message-ID <{message.message_id}>, "
                    f"already read from {kept.file} {kept.item}".rstrip() + "; skipped", WARNING))
                continue
            result.messages[message.message_id] = message
            result.problems += [MailProblem(relative, message.item, warning, WARNING)
                                for warning in message.warnings]
    return result


def mail_identities(messages: Iterable[MailMessage]) -> list[Identity]:
    """Every sender and recipient, distinct, for a PersonDirectory."""
    return list(dict.fromkeys(identity for message in messages
                              for identity in message.identities()))

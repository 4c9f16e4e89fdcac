"""One mail message from its bytes: ids, date, people, subject, the text body, attachments.

Parsing uses the standard library (``email.policy.default``), which never refuses a message:
it records defects instead. Those defects, an unknown or wrong charset, a missing Message-ID
or Date become warnings on the message, so a damaged message is still indexed for what it
says; only bytes with no mail header at all are refused (``MailError``).
"""

from __future__ import annotations

import codecs
import functools
import hashlib
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from email import policy
from email.header import decode_header, make_header
from email.message import EmailMessage, Message
from email.parser import BytesParser
from email.policy import EmailPolicy
from email.utils import getaddresses

from charset_normalizer import from_bytes

from jarvis_core.sources.html_text import html_to_text
from jarvis_core.sources.people import Identity


@functools.lru_cache(maxsize=4096)
def _parsed_header(name: str, value: str):
    return policy.default.header_fetch_parse(name, value)


class _CachedHeaders(EmailPolicy):
    """``email.policy.default``, except that a header value is parsed once: the standard
    library parses a header on every access, and its MIME walk asks for each part's
    Content-Type many times, which made header parsing most of the time spent per message.
    Header objects are immutable, so sharing them is safe."""

    def header_fetch_parse(self, name, value):
        try:
            return _parsed_header(name, value)
        except TypeError:  # an unhashable value set through the API
            return super().header_fetch_parse(name, value)


_PARSER = BytesParser(policy=_CachedHeaders())
_ANGLE_ID = re.compile(r"<([^<>\s]+)>")
_SURROGATES = re.compile(r"[\ud800-\udfff]")
_HEADER_END = re.compile(rb"\r?\n\r?\n")
# Headers that identify a message without a Message-ID (mbox clients rewrite Status: etc.).
_IDENTIFYING = ("from", "to", "cc", "date", "subject", "in-reply-to", "references")
_UNKNOWN_CHARSETS = {"unknown-8bit", "x-unknown", "unknown"}
# The stdlib's defect classes say what is wrong only by their name.
_DEFECTS = {
    "CloseBoundaryNotFoundDefect": "the multipart has no closing boundary (cut off?)",
    "StartBoundaryNotFoundDefect": "the multipart boundary never occurs",
    "NoBoundaryInMultipartDefect": "a multipart without a boundary",
    "FirstHeaderLineIsContinuationDefect": "the first header line is a continuation",
    "MissingHeaderBodySeparatorDefect": "no blank line between headers and body",
    "MultipartInvariantViolationDefect": "a multipart whose payload is not parts",
    "InvalidMultipartContentTransferEncodingDefect": "a multipart with a content encoding",
    "InvalidBase64CharactersDefect": "invalid characters in base64 data",
    "InvalidBase64PaddingDefect": "base64 data with bad padding",
    "InvalidBase64LengthDefect": "base64 data of impossible length",
    "UndecodableBytesDefect": "undecodable bytes",
}


class MailError(ValueError):
    """A message, file or mail source that cannot be read, with the reason."""


@dataclass(frozen=True)
class Attachment:
    """An attachment as listed (its bytes are never read into the text)."""

    filename: str | None
    content_type: str
    size: int  # decoded bytes
    part: str  # MIME part number, "2" or "1.3"


@dataclass(frozen=True)
class MailMessage:
    message_id: str           # without the angle brackets
    file: str                 # path relative to the mail source
    item: str                 # where in the file: "message 3 (byte 5120)"; "" for one-message files
    date: datetime | None     # UTC, naive
    sender: Identity | None
    to: tuple[Identity, ...]
    cc: tuple[Identity, ...]
    subject: str
    in_reply_to: str | None
    references: tuple[str, ...]
    body: str                 # as sent: quotes are collapsed in the thread document
    body_type: str            # "plain", "html", or "" when the message has no text body
    attachments: tuple[Attachment, ...]
    warnings: tuple[str, ...]
    derived_id: bool = False  # the Message-ID was missing and derived from a hash

    def identities(self) -> tuple[Identity, ...]:
        return tuple(dict.fromkeys(
            [*([self.sender] if self.sender else []), *self.to, *self.cc]))


def clean(text: str) -> str:
    """Undecodable bytes (surrogate escapes left by header decoding) as U+FFFD."""
    return _SURROGATES.sub("\ufffd", text)


def _raw_headers(message: Message, name: str) -> list[str]:
    """Header values as written (unfolded), without the policy's parsing."""
    return [" ".join(str(value).split()) for key, value in message.raw_items()
            if key.lower() == name]


def _header_problems(name: str, header: object, text: str, warnings: list[str]) -> None:
    for defect in getattr(header, "defects", ()):
        if type(defect).__name__ != "ObsoleteHeaderDefect":
            warnings.append(f"{name} header: {defect}")
    if "\ufffd" in text:
        warnings.append(f"{name} header: undecodable characters replaced (unknown or wrong "
                        "charset)")


def _header_text(message: Message, name: str, warnings: list[str]) -> str:
    """A text header decoded (RFC 2047); a header the policy cannot parse is decoded by hand."""
    try:
        value = message.get(name)
        text = clean(" ".join(str(value).split())) if value is not None else ""
        _header_problems(name, value, text, warnings)
        return text
    except Exception as exc:  # noqa: BLE001 - the stdlib's header parsers fail in many ways
        raw = " ".join(_raw_headers(message, name.lower()))
        warnings.append(f"{name} header unreadable ({type(exc).__name__}); kept as written")
        try:
            return clean(str(make_header(decode_header(raw))))
        except (LookupError, UnicodeError, ValueError):
            return clean(raw)


def _ids(values: list[str]) -> list[str]:
    found = [match.group(1) for value in values for match in _ANGLE_ID.finditer(value)]
    if not found:  # a bare id without brackets
        found = [value.strip() for value in values if "@" in value and " " not in value.strip()]
    return list(dict.fromkeys(found))


def _identities(message: Message, name: str, warnings: list[str]) -> tuple[Identity, ...]:
    try:
        header = message.get(name)
        pairs = [(address.display_name, address.addr_spec)
                 for address in getattr(header, "addresses", ())] if header is not None else []
        _header_problems(name, header, clean(str(header or "")), warnings)
    except Exception as exc:  # noqa: BLE001
        warnings.append(f"{name} header unreadable ({type(exc).__name__}); addresses parsed "
                        "leniently")
        pairs = getaddresses(_raw_headers(message, name.lower()))
    people = []
    for display, address in pairs:
        display, address = clean(display or "").strip() or None, clean(address or "").strip()
        if display or "@" in address:
            people.append(Identity(name=display, email=address if "@" in address else None))
    return tuple(dict.fromkeys(people))


def _utc(value: datetime) -> datetime:
    return value.astimezone(UTC).replace(tzinfo=None) if value.tzinfo else value


def _date(message: Message, envelope_date: datetime | None, warnings: list[str]
          ) -> datetime | None:
    try:
        header = message.get("Date")
        parsed = getattr(header, "datetime", None) if header is not None else None
    except Exception:  # noqa: BLE001
        header, parsed = "(unreadable)", None
    if parsed is not None:
        return _utc(parsed)
    problem = "no Date header" if header is None else f"Date header {str(header)!r} unreadable"
    if envelope_date is not None:
        warnings.append(f"{problem}; used the mbox envelope date")
        return envelope_date
    warnings.append(problem)
    return None


def _decode_text(part: Message, label: str, warnings: list[str]) -> str:
    """A text part's payload as str: its charset, else the detected one, else UTF-8 with
    replacement characters; every fallback is a warning."""
    payload = part.get_payload(decode=True)
    if not isinstance(payload, bytes):
        return ""
    charset = part.get_content_charset() or "us-ascii"
    try:
        if charset in _UNKNOWN_CHARSETS:
            raise LookupError(charset)
        codecs.lookup(charset)
    except LookupError:
        best = from_bytes(payload).best()
        fallback = best.encoding if best is not None else "utf-8"
        warnings.append(f"{label}: unknown charset {charset!r}; decoded as {fallback}")
        return payload.decode(fallback, errors="replace")
    try:
        return payload.decode(charset)
    except UnicodeDecodeError as exc:
        if charset in ("us-ascii", "ascii"):  # 8-bit text sent without a charset
            try:
                return payload.decode("utf-8")
            except UnicodeDecodeError:
                pass
        warnings.append(f"{label}: bytes not valid {charset} (at byte {exc.start}); "
                        "undecodable bytes replaced")
        return payload.decode(charset, errors="replace")


def _leaves(part: Message, number: str = ""):
    """(part number, part) of every non-multipart part; an attached message is one leaf."""
    if part.is_multipart() and part.get_content_type() != "message/rfc822":
        for index, child in enumerate(part.iter_parts(), 1):
            yield from _leaves(child, f"{number}.{index}" if number else str(index))
    else:
        yield number or "1", part


def _body_part(message: EmailMessage) -> Message | None:
    """The text/plain body, else text/html; an empty plain alternative yields to the HTML."""
    try:
        plain = message.get_body(preferencelist=("plain",))
        html = message.get_body(preferencelist=("html",))
    except Exception:  # noqa: BLE001 - broken multipart structures
        return None
    if plain is not None and html is not None:
        plain_payload = plain.get_payload(decode=True)
        if isinstance(plain_payload, bytes) and not plain_payload.strip():
            return html
    return plain or html


def _attachment(number: str, part: Message, warnings: list[str]) -> Attachment:
    try:
        filename = part.get_filename()
    except Exception:  # noqa: BLE001
        filename = None
        warnings.append(f"part {number}: unreadable attachment file name")
    size = 0
    try:
        if part.get_content_type() == "message/rfc822":
            inner = part.get_payload()
            inner = inner[0] if isinstance(inner, list) and inner else None
            if isinstance(inner, Message):
                size = len(inner.as_bytes())
                filename = filename or f"{clean(str(inner.get('Subject') or 'message'))}.eml"
        elif isinstance(payload := part.get_payload(decode=True), bytes):
            size = len(payload)
    except Exception as exc:  # noqa: BLE001 - a damaged part still gets listed
        warnings.append(f"part {number}: size unknown ({type(exc).__name__})")
    return Attachment(clean(filename) if filename else None, part.get_content_type(), size,
                      number)


def _is_attachment(part: Message) -> bool:
    disposition = part.get_content_disposition()
    return (disposition == "attachment" or part.get_param("name") is not None
            or part.get_param("filename", header="content-disposition") is not None
            or part.get_content_maintype() not in ("text", "multipart"))


def _defect(defect: Exception) -> str:
    name = type(defect).__name__
    return f"broken MIME: {_DEFECTS.get(name) or str(defect) or name}"


def _defects(message: Message, parts: list[tuple[str, Message]]) -> list[str]:
    found = [f"message: {_defect(d)}" for d in message.defects]
    for number, part in parts:
        if part is not message:
            found += [f"part {number} ({part.get_content_type()}): {_defect(d)}"
                      for d in part.defects]
    return list(dict.fromkeys(found))


def derived_message_id(message: Message, data: bytes) -> str:
    """A stable id for a message without Message-ID: a hash of its identifying headers and
    its body bytes (not of status headers a mail client rewrites)."""
    digest = hashlib.sha256()
    for name in _IDENTIFYING:
        digest.update(("\n".join(_raw_headers(message, name)) + "\x00").encode("utf-8",
                                                                                "replace"))
    separator = _HEADER_END.search(data)
    digest.update(data[separator.end():] if separator else b"")
    return f"{digest.hexdigest()[:32]}@derived.jarvis"


def parse_message(data: bytes, file: str, item: str = "", *,
                  envelope_date: datetime | None = None) -> MailMessage:
    """The message in ``data``; MailError when the bytes are no mail message at all."""
    message = _PARSER.parsebytes(data)
    if not any(_raw_headers(message, name) for name in ("from", "date", "subject", "message-id")):
        raise MailError("not a mail message: no From, Date, Subject or Message-ID header")
    warnings: list[str] = []
    ids = _ids(_raw_headers(message, "message-id"))
    derived = not ids
    message_id = ids[0] if ids else derived_message_id(message, data)
    if derived:
        warnings.append(f"no Message-ID header; derived id {message_id} from a hash of its "
                        "headers and body")
    senders = _identities(message, "From", warnings)
    body_part = _body_part(message)
    body, body_type = "", ""
    if body_part is not None:
        body_type = "html" if body_part.get_content_subtype() == "html" else "plain"
        text = _decode_text(body_part, f"{body_type} body", warnings)
        body = html_to_text(text, layout_tables=True) if body_type == "html" else text
        body = clean(body).replace("\r\n", "\n").strip("\n")
    parts = list(_leaves(message))
    attachments = tuple(_attachment(number, part, warnings) for number, part in parts
                        if part is not body_part and _is_attachment(part))
    warnings += _defects(message, parts)
    return MailMessage(
        message_id=message_id, file=file, item=item,
        date=_date(message, envelope_date, warnings), sender=senders[0] if senders else None,
        to=_identities(message, "To", warnings), cc=_identities(message, "Cc", warnings),
        subject=_header_text(message, "Subject", warnings),
        in_reply_to=next(iter(_ids(_raw_headers(message, "in-reply-to"))), None),
        references=tuple(_ids(_raw_headers(message, "references"))), body=body,
        body_type=body_type, attachments=attachments, warnings=tuple(warnings),
        derived_id=derived)

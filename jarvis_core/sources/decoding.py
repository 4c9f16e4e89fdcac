"""Text files as bytes become text the same way for every kind that reads them (a vault's
notes, a repository's docs): BOM-marked UTF-16/UTF-8, else UTF-8, with a warning when bad
bytes were replaced and an error for what is not text."""

from __future__ import annotations

import codecs

_SNIFF_BYTES = 8192
_MAX_REPLACEMENT_RATIO = 0.2


class NoteReadError(Exception):
    """A note that cannot be ingested; the message says why."""


def decode_note_bytes(data: bytes) -> tuple[str, list[str]]:
    """Decode note bytes: BOM-marked UTF-16/UTF-8, else UTF-8 with a warning on bad bytes."""
    for bom, encoding in ((codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16")):
        if data.startswith(bom):
            try:
                return data.decode(encoding), [f"decoded as {encoding.upper()} (byte order mark)"]
            except UnicodeDecodeError as exc:
                raise NoteReadError(f"invalid UTF-16 at byte {exc.start}") from exc
    if b"\x00" in data[:_SNIFF_BYTES]:
        raise NoteReadError("binary content (NUL bytes), not a text note")
    data = data.removeprefix(codecs.BOM_UTF8)
    try:
        return data.decode("utf-8"), []
    except UnicodeDecodeError as exc:
        text = data.decode("utf-8", errors="replace")
        if text.count("\ufffd") > max(1, len(text) * _MAX_REPLACEMENT_RATIO):
            raise NoteReadError(
                f"binary or non-UTF-8 content: invalid UTF-8 from byte {exc.start} on"
            ) from exc
        return text, [f"invalid UTF-8 at byte {exc.start}; undecodable bytes replaced with U+FFFD"]

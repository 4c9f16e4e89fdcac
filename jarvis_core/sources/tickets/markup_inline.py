"""Inline Jira wiki markup (one line of text) to markdown, in time linear in the line.

The rules follow jira2markdown's inline elements (so both agree on most text): ``*bold*``,
``-strike-``, ``+under+``, ``^sup^``, ``~sub~``, ``??cite??`` pair the way its ``QuotedElement``
does, ``{{mono}}``, links, mentions, mail links, attachments, images, bare URLs, ``\\\\`` line
breaks, ``--``/``---`` dashes, and a stray ``*`` is escaped. What differs on purpose: images
and attachments become their names, ``{color}`` tags are dropped, any ``[~name]`` is a mention,
and a backslash escapes the markup character after it.

No backtracking: the scanner jumps from one character that can start markup to the next (a
regex search from the current position), and each "where does it close?" question is answered
from per-line caches that only move forward, so every character is visited a bounded number of
times. ``Work`` counts those visits and enforces the caller's time budget.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from string import punctuation
from time import thread_time

_CHECK_EVERY = 4096  # steps between two looks at the clock

# Characters that may start inline markup (- + ^ ~ ! ? only after a non-word character and
# before a non-space): one character class and one-character looks around it, the fastest
# shape for Python's re.
_CANDIDATE = re.compile(r"[*\[\\{\-+^~!?](?<!\w[-+^~!?])(?!(?<=[-+^~!?])\s)")
_URL_TAIL = re.compile(r"\S+")
_SCHEMES = ("https", "http", "ftp")
_IMAGE_NAME = re.compile(r"[ -~]{3,}")  # jira2markdown: printable ASCII and spaces, 3 or more
_IMAGE_ATTRIBUTE = re.compile(r"[A-Za-z0-9 ]+(?:=[ \"-+\--~]+)?")  # name[=value without , !]
_MAIL = re.compile(r"[A-Za-z0-9@._+-]+")
_QUOTED = {"*": ("**", "**"), "-": ("~~", "~~"), "+": ("<u>", "</u>"),
           "^": ("<sup>", "</sup>"), "~": ("<sub>", "</sub>"), "??": ("<q>", "</q>")}
_SKIPS_BRACKETS = frozenset("-^~")  # closers inside [links] do not count for these
# A closer is the token not right after whitespace (jira2markdown skips "White() + token").
_CLOSERS = {token: re.compile(r"(?<![ \t\r])" + re.escape(token)) for token in _QUOTED}
_WHITE = " \t\r\n"
_ESCAPABLE = frozenset("*-+^~?_[]{}!|#")
_MENTION_FOLLOWERS = frozenset(_WHITE + punctuation.replace("[", ""))


class BudgetExceeded(Exception):
    """The item's time budget ran out; the caller keeps the text as written."""


class Work:
    """Counts what the converter visits (characters scanned, tokens handled), the figure
    the linear-time tests check, and stops the conversion once the time budget is spent.

    The budget is this thread's CPU time: other work on a busy machine does not change which
    items fit, so an item converts the same way from one run to the next."""

    __slots__ = ("steps", "_deadline", "_next_check")

    def __init__(self, budget_seconds: float) -> None:
        self.steps = 0
        self._deadline = thread_time() + budget_seconds
        self._next_check = _CHECK_EVERY

    def add(self, count: int = 1) -> None:
        self.steps += count
        if self.steps >= self._next_check:
            self._next_check = self.steps + _CHECK_EVERY
            if thread_time() > self._deadline:
                raise BudgetExceeded


class Line:
    """One string being converted, with forward-only caches of where things occur next."""

    __slots__ = ("text", "work", "_found", "_closers")

    def __init__(self, text: str, work: Work) -> None:
        self.text = text
        self.work = work
        self._found: dict[str, tuple[int, int]] = {}
        self._closers: dict[str, list[int]] = {}

    def find(self, needle: str, start: int) -> int:
        """Index of the first ``needle`` at or after ``start``, -1 if none; a later query
        that the last answer still covers costs nothing, so forward scans never repeat."""
        cached = self._found.get(needle)
        if cached and cached[0] <= start and (cached[1] >= start or cached[1] < 0):
            return cached[1]
        found = self.text.find(needle, start)
        self.work.add((found if found >= 0 else len(self.text)) - start + 1)
        self._found[needle] = (start, found)
        return found

    def closer(self, token: str, start: int) -> int:
        """First position at or after ``start`` where ``token`` can close a quoted element
        (jira2markdown skips a token after whitespace, and for - ^ ~ one inside [...])."""
        positions = self._closers.get(token)
        if positions is None:
            positions = self._closers[token] = self._closing_positions(token)
        index = bisect_left(positions, start)
        return positions[index] if index < len(positions) else -1

    def _closing_positions(self, token: str) -> list[int]:
        self.work.add(len(self.text))
        positions = [m.start() for m in _CLOSERS[token].finditer(self.text)]
        if token not in _SKIPS_BRACKETS or "[" not in self.text:
            return positions
        spans = self._bracket_spans()
        kept, index = [], 0
        for position in positions:  # both lists ascend: one merge walk
            while index < len(spans) and spans[index][1] < position:
                index += 1
            if not (index < len(spans) and spans[index][0] < position < spans[index][1]):
                kept.append(position)
        return kept

    def _bracket_spans(self) -> list[tuple[int, int]]:
        spans, start = [], self.text.find("[")
        while start >= 0:
            end = self.text.find("]", start + 1)
            if end < 0:
                break
            spans.append((start, end))
            start = self.text.find("[", end + 1)
        self.work.add(len(self.text))
        return spans


def convert_inline(text: str, work: Work) -> str:
    """Markdown for one line of wiki markup (no newlines in ``text``)."""
    found = _CANDIDATE.search(text)
    if found is None:
        work.add(len(text))
        return text
    line, out, pos, steps = Line(text, work), [], 0, 0
    urls = _url_spans(text, work) if "://" in text else []
    next_url = 0
    while found is not None:
        start = found.start()
        steps += start - pos + 1
        if steps > _CHECK_EVERY:  # counted locally: a call per token would cost a third more
            work.add(steps)
            steps = 0
        while next_url < len(urls) and urls[next_url][0] < pos:
            next_url += 1
        if next_url < len(urls) and urls[next_url][0] < start:
            # a bare URL stays as written, so its characters are not read as markup
            out.append(text[pos:urls[next_url][1]])
            pos = urls[next_url][1]
        else:
            out.append(text[pos:start])
            handled = _HANDLERS[text[start]](line, start)
            if handled is None:
                out.append("\\*" if text[start] == "*" else text[start])
                pos = start + 1
            else:
                out.append(handled[0])
                pos = handled[1]
        found = _CANDIDATE.search(text, pos)
    work.add(steps + len(text) - pos)
    out.append(text[pos:])
    return "".join(out)


def _url_spans(text: str, work: Work) -> list[tuple[int, int]]:
    """(start, end) of each bare http(s)/ftp URL: the scheme, :// and what follows up to
    whitespace, as jira2markdown's Url element reads them."""
    spans, position = [], 0
    while (colon := text.find("://", position)) >= 0:
        tail = _URL_TAIL.match(text, colon + 3)
        scheme = next((s for s in _SCHEMES if text[max(0, colon - len(s)):colon].lower() == s),
                      None)
        if tail is None or scheme is None:
            position = colon + 3
            continue
        spans.append((colon - len(scheme), tail.end()))
        position = tail.end()
    work.add(len(text))
    return spans


def _is_word(char: str) -> bool:
    return char.isalnum() or char == "_"


def _printable(char: str) -> bool:
    return "!" <= char <= "~"


def quoted_span(line: Line, start: int, token: str, *, check_before: bool = True
                ) -> tuple[int, int] | None:
    """(content start, closer) of a ``token``-quoted element at ``start``: after a non-word
    character, not followed by whitespace or the token, closed by the first possible closer
    on the line, which must be followed by a non-word character."""
    text, size = line.text, len(token)
    if not text.startswith(token, start):
        return None
    if check_before and start > 0 and _is_word(text[start - 1]):
        return None
    body = start + size
    if body >= len(text) or text[body] in _WHITE or text[body] in token:
        return None
    close = line.closer(token, body + 1)
    if close < 0:
        return None
    after = close + size
    if after < len(text) and _is_word(text[after]):
        return None
    return body, close


def _quoted(line: Line, start: int, token: str) -> tuple[str, int] | None:
    span = quoted_span(line, start, token)
    if span is None:
        return None
    body, close = span
    opening, closing = _QUOTED[token]
    after = close + len(token)
    inner = convert_inline(line.text[body:close], line.work)
    # jira2markdown puts a space between two elements that touch (*a**b* -> **a** **b**)
    gap = " " if quoted_span(line, after, token, check_before=False) else ""
    return opening + inner + closing + gap, after


def _star(line: Line, start: int) -> tuple[str, int] | None:
    return _quoted(line, start, "*")


def _dash(line: Line, start: int) -> tuple[str, int] | None:
    """-- and --- standing alone between spaces are dashes; otherwise - may strike out."""
    text = line.text
    for run, glyph in (("--", "\u2013"), ("---", "\u2014")):
        end = start + len(run)
        if (text.startswith(run, start) and (end == len(text) or not _printable(text[end]))
                and (start == 0 or not _printable(text[start - 1]))):
            return glyph, end
    return _quoted(line, start, "-")


def _simple_quote(line: Line, start: int) -> tuple[str, int] | None:
    token = "??" if line.text[start] == "?" else line.text[start]
    return _quoted(line, start, token)


def _backslash(line: Line, start: int) -> tuple[str, int] | None:
    """\\\\ is a line break; a backslash before a markup character keeps that character
    literal (markdown reads the same escape)."""
    text = line.text
    if text.startswith("\\\\", start):
        standalone = (start == 0 or text[start - 1] != "\\") and not text.startswith(
            "\\", start + 2)
        return ("\n", start + 2) if standalone else None
    if start + 1 < len(text) and text[start + 1] in _ESCAPABLE:
        return text[start:start + 2], start + 2
    return None


def _brace(line: Line, start: int) -> tuple[str, int] | None:
    """{{monospace}} (kept verbatim) or a {color} tag (dropped, its text stays)."""
    text = line.text
    if text.startswith("{{", start):
        close = line.find("}}", start + 2)
        if close < 0:
            return None
        code = text[start + 2:close]
        fence = "``" if "`" in code else "`"
        pad = " " if fence == "``" else ""
        return f"{fence}{pad}{code}{pad}{fence}", close + 2
    if not text.startswith(("{color:", "{color}"), start):
        return None
    end = line.find("}", start)
    return ("", end + 1) if end >= 0 else None


def _bracket(line: Line, start: int) -> tuple[str, int] | None:
    """[~mention], [alias|~mention], [mailto:x], [^attachment], [alias|url], [url]."""
    text = line.text
    close = line.find("]", start + 1)
    if close < 0:
        return None
    pipe = line.find("|", start + 1)
    alias = text[start + 1:pipe] if 0 <= pipe < close else None
    target = text[start + 1:close] if alias is None else text[pipe + 1:close]
    if target.startswith("~") and len(target) > 1 and not any(c in _WHITE for c in target):
        return _mention(line, start, close, target[1:])
    if target.startswith("mailto:") and _MAIL.fullmatch(target, 7):
        return _mail(line, alias, target[7:]), close + 1
    if text.startswith("^", start + 1):
        return text[start + 2:close], close + 1
    return _link(line, alias, target), close + 1


def _mention(line: Line, start: int, close: int, name: str) -> tuple[str, int]:
    """@name, spaced from the words around it as jira2markdown does."""
    text = line.text
    if name.lower().startswith("accountid:"):
        name = name[len("accountid:"):]
    before = " " if start > 0 and text[start - 1] not in _WHITE else ""
    after_index = close + 1
    follows = (after_index < len(text) and text[after_index] not in _MENTION_FOLLOWERS
               and not text.startswith("[~", after_index))
    return f"{before}@{name}{' ' if follows else ''}", after_index


def _mail(line: Line, alias: str | None, email: str) -> str:
    label = convert_inline(alias, line.work) if alias else ""
    if label == email or not label.strip():
        return f"<{email}>"
    return f"[{label}](mailto:{email})"


def _link(line: Line, alias: str | None, url: str) -> str:
    label = convert_inline(alias, line.work) if alias else ""
    if url.lower().startswith("www."):
        url = f"https://{url}"
    if url.lower().startswith(("http", "ftp")):
        return f"[{label}]({url})" if label else f"<{url}>"
    target = convert_inline(url, line.work)
    return f"[{label}\\|{target}]" if label else f"[{target}]"


def _bang(line: Line, start: int) -> tuple[str, int] | None:
    """!image.png! or !image.png|thumbnail,width=300! becomes the image's name."""
    text = line.text
    if start > 0 and _is_word(text[start - 1]):
        return None
    close = line.find("!", start + 1)
    if close < 0:
        return None
    pipe = line.find("|", start + 1)
    name_end = pipe if 0 <= pipe < close else close
    name = text[start + 1:name_end]
    # jira2markdown also takes "! Thanks !"; a name padded with spaces is prose, not a file
    if not _IMAGE_NAME.fullmatch(name) or name[0] == " " or name[-1] == " ":
        return None
    if name_end == pipe and not _image_attributes_ok(text[pipe + 1:close]):
        return None
    return name, close + 1


def image_end(line: Line, start: int) -> int:
    """End of the image markup at ``start`` (for table cells, whose | it may hold), else -1."""
    found = _bang(line, start)
    return found[1] if found else -1


def _image_attributes_ok(attributes: str) -> bool:
    parts = attributes.split(",")
    if parts and not parts[-1]:
        parts.pop()  # a trailing comma is allowed
    return all(_IMAGE_ATTRIBUTE.fullmatch(part) for part in parts)


_HANDLERS = {"*": _star, "-": _dash, "+": _simple_quote, "^": _simple_quote,
             "~": _simple_quote, "?": _simple_quote, "\\": _backslash, "{": _brace,
             "[": _bracket, "!": _bang}

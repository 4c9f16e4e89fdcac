"""Mentions of source-code symbols in free text, and their resolution against the symbol
nodes of every repository (``jarvis_core.sources.repo.code.model``: ``symbol:`` nodes with
``name``, ``qualified_name``, ``path``, ``start_line`` and ``end_line``).

A mention is written the way people write code in prose:

- a backticked identifier or dotted name, ``createUser`` or ``UserService.createUser()`` in
  backticks (Jira's ``{{createUser}}`` is backticked when a ticket's markup is converted);
- a call, ``createUser()`` or ``user_service.create_user()`` (empty parentheses: ``file(s)``
  in prose is no call);
- a dotted name shaped like code, ``UserService.createUser`` or ``user_service.create_user``
  (a part with an underscore or a camelCase hump, or a leading CapitalisedName):
  ``e.g``, ``example.com`` or ``v1.2`` are not; a receiver ``self.`` / ``this.`` is dropped;
- ``path:line`` (``src/app/service.py:42``, ``service.py:42``, ``service.py#L42``, a
  Python traceback's ``File "/srv/app/service.py", line 42``, a GitHub or GitLab permalink
  ``https://github.com/o/r/blob/main/src/app/service.py#L42``).

A bare word never is, nor a keyword (``function() {`` pasted into a ticket), and a name
counts only when it names one symbol: a name several symbols share (``get()``, ``run()``)
is ambiguous, listed with its candidates; a name no symbol has (most backticked text is not
code) resolves to nothing and is not listed. A document mentions each target once, at its
first place (that line is the edge's evidence): stack traces repeat the same frames.
"""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

SYMBOL, LINE = "symbol", "line"
# Several symbols answer to a mention: listed with (at most CANDIDATES_LISTED) candidates,
# no warning (a common name is no missing item).
AMBIGUOUS_SYMBOL = "ambiguous_symbol"
CANDIDATES_LISTED = 10

_IDENT = r"[A-Za-z_]\w*"
_CODE_SPAN = re.compile(r"`([^`\n]+)`")
# A code span holding one name, maybe called: `createUser`, `UserService#get(id)`
_CODE_NAME = re.compile(rf"\s*({_IDENT}(?:(?:\.|::|#){_IDENT})*)\s*(?:\([^()]*\))?\s*")
_CALLED = re.compile(rf"{_IDENT}(?:(?:\.|::){_IDENT})*")
_DOTTED = re.compile(rf"{_IDENT}(?:(?:\.|::){_IDENT})+")
_CODE_SHAPED = re.compile(r"_|[a-z][A-Z]|^[A-Z][a-z]")
_SEPARATOR = re.compile(r"::|#")
_RECEIVER = re.compile(r"^(?:self|this|cls)\.")
# Keywords and literals: in code pasted into prose they look like calls or names
# (``function() {``, ``super()``, a backticked ``this`` or ``null``) but never name a symbol.
_KEYWORDS = frozenset("""
    and as assert async await break case catch class const continue def del delete do elif
    else except extends finally fn for func function if import in instanceof is lambda let
    new not of or pass raise return self sizeof super switch this throw try typeof var void
    while with yield true false null nil undefined True False None""".split())
# Anchors: patterns that start with a literal are found by a fast skip; the name, path or
# scheme around each is then read in both directions (a pattern starting with a character
# class is tried at every position of the text: three times slower on ticket text).
_PARENS, _DOT, _COLONS, _SCHEME_END = (re.compile(anchor) for anchor in (
    r"\(\)", r"\.[A-Za-z_]", r"::[A-Za-z_]", r"://"))
_LINE_MARK = re.compile(r"#L\d")
_LINE_TAIL = re.compile(r"(\.[A-Za-z][A-Za-z0-9]{0,7})(?::|#L)([1-9][0-9]{0,6})(?!\d)")
_TRACEBACK = re.compile(r'File "([^"\n]+)", line ([1-9][0-9]{0,6})')  # a Python traceback
# A permalink to a line on GitHub or GitLab: .../blob/<branch or commit>/<path>#L<line>
_BLOB_URL = re.compile(
    r"https?://[^\s/]+/[^\s#?]+?/(?:-/)?blob/[^\s/]+/([^\s#?]+)#L([1-9][0-9]{0,6})(?!\d)")
_NAME_CHARS, _PATH_CHARS, _WORD_CHARS, _NON_SPACE = (re.compile(run) for run in (
    r"[\w.:$]*", r"[\w./-]*", r"\w*", r"\S*"))


class _Scan:
    """A text read around anchors: the run of some characters ending or starting at an
    offset (runs to the left are matched on the reversed text)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._reversed: str | None = None

    def run_before(self, at: int, chars: re.Pattern) -> int:
        """Where the run of ``chars`` ending at ``at`` starts."""
        if self._reversed is None:
            self._reversed = self.text[::-1]
        back = len(self.text) - at
        return at - (chars.match(self._reversed, back).end() - back)

    def run_after(self, at: int, chars: re.Pattern) -> int:
        return chars.match(self.text, at).end()

    def before(self, at: int) -> str:
        return self.text[at - 1] if at > 0 else ""

    def after(self, at: int) -> str:
        return self.text[at:at + 1]


def find_symbol_mentions(text: str, urls: list[tuple[int, int]] | None = None
                         ) -> list[tuple[str, str, int, int]]:
    """(kind, target, start, end) of the first mention of each symbol in ``text``, outside
    ``urls`` (``url_spans``) but for permalinks: a dotted or plain name (``SYMBOL``, the
    separators ``::`` and ``#`` written as dots) or ``path:line`` (``LINE``), the span being
    the name or the place as written. Once per target: the first line citing it is its
    evidence."""
    scan, urls = _Scan(text), url_spans(text) if urls is None else urls
    found: dict[tuple[str, str], tuple[str, str, int, int]] = {}

    def add(kind: str, target: str, start: int, end: int, address: bool = False) -> None:
        if kind == SYMBOL:
            target = _RECEIVER.sub("", _SEPARATOR.sub(".", target))
        first = found.get((kind, target))
        if (first is None or start < first[2]) and target not in _KEYWORDS \
                and (address or not inside(urls, start)):
            found[kind, target] = (kind, target, start, end)

    for span in _CODE_SPAN.finditer(text):
        if name := _CODE_NAME.fullmatch(span.group(1)):
            add(SYMBOL, name.group(1), span.start(1) + name.start(1),
                span.start(1) + name.end(1))
    for parens in _PARENS.finditer(text):
        start = scan.run_before(parens.start(), _NAME_CHARS)
        if _CALLED.fullmatch(text, start, parens.start()):
            add(SYMBOL, text[start:parens.start()], start, parens.start())
    for start, end in _dotted_names(scan):
        name = _SEPARATOR.sub(".", text[start:end])
        if any(_CODE_SHAPED.search(part) for part in name.split(".")):
            add(SYMBOL, name, start, end)
    for tail in _LINE_TAIL.finditer(text):
        start = scan.run_before(tail.start(), _PATH_CHARS)
        if start < tail.start() and text[tail.start() - 1] not in "./-" \
                and scan.before(start) not in (":", "@"):
            add(LINE, f"{text[start:tail.end(1)]}:{tail.group(2)}", start, tail.end())
    for match in _TRACEBACK.finditer(text):
        add(LINE, f"{match.group(1)}:{match.group(2)}", match.start(), match.end())
    for match in _BLOB_URL.finditer(text):
        add(LINE, f"{match.group(1)}:{match.group(2)}", match.start(), match.end(), True)
    return sorted(found.values(), key=lambda mention: mention[2])


def _dotted_names(scan: _Scan) -> list[tuple[int, int]]:
    """Spans of the dotted names (``a.b``, ``a::b``) standing alone: not in a path, an
    e-mail address or a word with a dash, not followed by a line (``service.py:42``)."""
    anchors = sorted(m.start() for pattern in (_DOT, _COLONS)
                     for m in pattern.finditer(scan.text))
    spans, done = [], 0
    for at in anchors:
        if at < done:
            continue
        start = scan.run_before(at, _NAME_CHARS)
        end = done = scan.run_after(at, _NAME_CHARS)
        while end > start and scan.text[end - 1] in ".:":   # a sentence's full stop
            end -= 1
        standalone = scan.before(start) not in ("/", "@", "-") \
            and scan.after(end) not in ("/", "@", "-") and not _LINE_MARK.match(scan.text, end)
        if standalone and _DOTTED.fullmatch(scan.text, start, end):
            spans.append((start, end))
    return spans


def url_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of the URLs (``scheme://...``) in ``text``, in order: what is inside
    one is part of an address."""
    if "://" not in text:
        return []
    scan, spans = _Scan(text), []
    for anchor in _SCHEME_END.finditer(text):
        start = scan.run_before(anchor.start(), _WORD_CHARS)
        end = scan.run_after(anchor.end(), _NON_SPACE)
        if start < anchor.start() < end - 3 and (not spans or start >= spans[-1][1]):
            spans.append((start, end))
    return spans


def inside(spans: list[tuple[int, int]], offset: int) -> bool:
    """Whether ``offset`` is inside one of ``spans`` (in order, not overlapping)."""
    at = bisect.bisect_right(spans, (offset, math.inf)) - 1
    return at >= 0 and spans[at][0] <= offset < spans[at][1]


@dataclass(frozen=True)
class _Symbol:
    key: str
    file: str   # '<repo>/<path>': its file node's key without 'file:'
    path: str
    qualified_name: str
    start_line: int
    end_line: int

    def holds(self, other: _Symbol) -> bool:
        """Whether ``other`` is nested in this symbol (a method in its class)."""
        return self.file == other.file and self.start_line <= other.start_line \
            and other.end_line <= self.end_line and self.span() > other.span()

    def span(self) -> int:
        return self.end_line - self.start_line


class SymbolIndex:
    """Symbol nodes by name, by qualified name and by file, resolving mentions with a few
    dictionary look-ups each. One item is one (path, qualified name): a repository
    configured twice, or a getter and setter of one property, is one item, several keys."""

    def __init__(self, files: Mapping[str, set[str]]) -> None:
        self.files = files                            # path -> file node keys
        self.resolved: dict[tuple[str, str], tuple[tuple[str, ...], str]] = {}
        self.by_name: dict[str, list[_Symbol]] = {}
        self.by_qualified: dict[str, list[_Symbol]] = {}
        self.in_file: dict[str, list[_Symbol]] = {}   # path -> its symbols in every repo
        self.paths_named: dict[str, set[str]] = {}    # file name -> paths

    def add(self, key: str, properties: Mapping) -> None:
        path = str(properties.get("path") or "")
        qualified = str(properties.get("qualified_name") or "")
        if not path or not qualified:
            return
        symbol = _Symbol(key, key.removeprefix("symbol:").partition("::")[0], path, qualified,
                         int(properties.get("start_line") or 0),
                         int(properties.get("end_line") or 0))
        name = str(properties.get("name") or qualified.rpartition(".")[2])
        self.by_name.setdefault(name, []).append(symbol)
        self.by_qualified.setdefault(qualified, []).append(symbol)
        self.in_file.setdefault(path, []).append(symbol)
        self.add_path(path)

    def add_path(self, path: str) -> None:
        """A path ``path:line`` mentions may name (a file without symbols falls back to
        its file node)."""
        self.paths_named.setdefault(path.rpartition("/")[2], set()).add(path)

    def resolve(self, kind: str, target: str) -> tuple[tuple[str, ...], str]:
        """(keys, reason): the keys of one item and 'resolved'; the candidates (at most
        CANDIDATES_LISTED) and AMBIGUOUS_SYMBOL; none and 'no_such_symbol' (or
        'no_such_file'). A ``LINE`` target resolves to the innermost symbol of its file
        holding the line, else to the file. Remembered: a common name is cited often."""
        if (kind, target) not in self.resolved:
            self.resolved[kind, target] = self._line(target) if kind == LINE else \
                self._one(self.by_name.get(target, [])) if "." not in target else \
                self._one(self.by_qualified.get(target) or self._module_qualified(target))
        return self.resolved[kind, target]

    def _module_qualified(self, target: str) -> list[_Symbol]:
        """``references.find_references``, ``com.x.UserService.createUser``,
        ``Alloy.createController``: a qualified name after the module (the file's path
        without extension) or the package (its folder), as far as written, in any case."""
        parts = target.split(".")
        for cut in range(1, len(parts)):
            prefix = [part.casefold() for part in parts[:cut]]
            found = [symbol for symbol in self.by_qualified.get(".".join(parts[cut:]), ())
                     if _ends_with(symbol.path.rpartition(".")[0].casefold().split("/"), prefix)
                     or _ends_with(symbol.path.casefold().split("/")[:-1], prefix)]
            if found:
                return found
        return []

    def _line(self, target: str) -> tuple[tuple[str, ...], str]:
        written, _, number = target.rpartition(":")
        line = int(number)
        items: dict[tuple[str, str], set[str]] = {}  # (path, qualified name or '') -> keys
        for path in self.paths_named.get(written.rpartition("/")[2], ()):
            if path != written and not path.endswith("/" + written) \
                    and not written.endswith("/" + path):  # an absolute path in a trace
                continue
            innermost: dict[str, _Symbol] = {}
            for symbol in self.in_file.get(path, ()):
                best = innermost.get(symbol.file)
                if symbol.start_line <= line <= symbol.end_line and (
                        best is None or symbol.span() < best.span()):
                    innermost[symbol.file] = symbol
            for symbol in innermost.values():
                items.setdefault((path, symbol.qualified_name), set()).add(symbol.key)
            for key in self.files.get(path, ()):
                if key.removeprefix("file:") not in innermost:
                    items.setdefault((path, ""), set()).add(key)
        return _one_item(items, "no_such_file")

    @staticmethod
    def _one(symbols: list[_Symbol]) -> tuple[tuple[str, ...], str]:
        """The candidates less those nested in another one of their file (a constructor
        named as its class), as items."""
        by_file: dict[str, list[_Symbol]] = {}
        for symbol in symbols:
            by_file.setdefault(symbol.file, []).append(symbol)
        items: dict[tuple[str, str], set[str]] = {}
        for in_file in by_file.values():
            for symbol in in_file:
                if not any(other.holds(symbol) for other in in_file):
                    items.setdefault((symbol.path, symbol.qualified_name), set()).add(
                        symbol.key)
        return _one_item(items, "no_such_symbol")


def _one_item(items: Mapping[tuple[str, str], set[str]], missing: str
              ) -> tuple[tuple[str, ...], str]:
    keys = sorted(key for keys in items.values() for key in keys)
    if len(items) == 1:
        return tuple(keys), "resolved"
    return tuple(keys[:CANDIDATES_LISTED]), AMBIGUOUS_SYMBOL if keys else missing


def _ends_with(parts: list[str], suffix: list[str]) -> bool:
    return len(parts) >= len(suffix) and parts[len(parts) - len(suffix):] == suffix

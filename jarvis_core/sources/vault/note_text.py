"""Where in a note a link, tag or reference was written: the line, the chunks holding it and
an excerpt, in time linear in the note's size however many links it has.

Finding each link's place by searching its whole line made graph extraction quadratic (one
note with 10k wikilinks on a line took 31.7 CPU-s). Here wikilinks are indexed once per
line, chunks are found by bisection, each (line, needle) is looked up once, and every other
search draws on a budget proportional to the note's size: past it an occurrence falls back
to the chunks at the start of its line, which is still the right line."""

from __future__ import annotations

import json
import re
from bisect import bisect_right
from dataclasses import dataclass
from itertools import accumulate

from jarvis_core.sources.vault.markdown_rules import WIKILINK_SOURCE, wikilink_parts

MAX_EVIDENCE_CHARS = 300
# Characters searched per character of the note (body and frontmatter), plus a floor.
SEARCH_BUDGET_PER_CHAR = 32
SEARCH_BUDGET_FLOOR = 1_000_000
# Chunks a whole line stands for when no match places the occurrence more precisely.
MAX_LINE_EVIDENCE = 3
_LINE_BREAK = re.compile(r"\r\n?|\n")  # what the parser and the chunker count as a break
_TAG_RUN = re.compile(r"#([\w/-]+)")


@dataclass(frozen=True)
class Occurrence:
    """One place a note states something: the chunks around it and the line itself."""

    line: int
    evidence: tuple[str, ...]
    text: str


def excerpt(text: str, at: int | None) -> str:
    """The stripped text, cut to MAX_EVIDENCE_CHARS around position ``at`` of ``text`` (the
    first match) if longer."""
    stripped = text.strip()
    if len(stripped) <= MAX_EVIDENCE_CHARS:
        return stripped
    at = None if at is None else at - (len(text) - len(text.lstrip()))
    start = 0 if at is None else max(0, min(at - 100, len(stripped) - MAX_EVIDENCE_CHARS))
    return stripped[start:start + MAX_EVIDENCE_CHARS].strip()


def tag_pattern(tag: str) -> re.Pattern[str]:
    return re.compile("#" + re.escape(tag) + r"(?![\w/-])", re.IGNORECASE)


class NoteText:
    """A note's body lines, chunks and frontmatter, with every lookup cached.

    ``work`` counts characters searched and chunks visited: the figure that stays linear
    in the note's size (tests assert on it rather than on time)."""

    def __init__(self, row: dict, chunks: list[dict]) -> None:
        self.body: str = row.get("body") or ""
        self.body_start_line: int = row.get("body_start_line") or 1
        self.frontmatter: dict = json.loads(row.get("frontmatter") or "{}")
        self.line_starts = [0] + [found.end() for found in _LINE_BREAK.finditer(self.body)]
        self.chunks = sorted((c["char_start"], c["char_end"], c["chunk_id"]) for c in chunks)
        self._chunk_starts = [start for start, _, _ in self.chunks]
        self._reach = list(accumulate((end for _, end, _ in self.chunks), max))
        self._lines: dict[int, tuple[int, str]] = {}
        self._wikilinks: dict[int, dict[str, list[tuple[int, int]]]] = {}
        self._tags: dict[int, dict[str, list[tuple[int, int]]]] = {}
        self._occurrences: dict[tuple, Occurrence] = {}
        self._rendered: dict[str, str] = {}
        self.work = 0
        self._budget = SEARCH_BUDGET_PER_CHAR * (len(self.body) + len(row.get("frontmatter")
                                                                     or "")) + SEARCH_BUDGET_FLOOR

    def in_body(self, line: int) -> bool:
        return 0 <= line - self.body_start_line < len(self.line_starts)

    # -- body -------------------------------------------------------------------------

    def wikilink_occurrence(self, line: int, target: str) -> Occurrence:
        """A wikilink or embed of ``target`` on ``line``: placed by the line's wikilinks."""
        key = (line, "wikilink", target)
        if key not in self._occurrences:
            start, text = self._line(line)
            spans = self._line_wikilinks(line, start, text).get(target, [])
            self._occurrences[key] = self._occurrence(line, start, text, spans, f"[[{target}]]")
        return self._occurrences[key]

    def tag_occurrence(self, line: int, tag: str) -> Occurrence:
        """A ``#tag`` on ``line``: placed by the line's tags, else by a budgeted search."""
        key = (line, "tag", tag)
        if key not in self._occurrences:
            start, text = self._line(line)
            spans = self._line_tags(line, start, text).get(tag.lower())
            if spans is None:
                return self.body_occurrence(line, tag_pattern(tag), f"#{tag}")
            self._occurrences[key] = self._occurrence(line, start, text, spans, f"#{tag}")
        return self._occurrences[key]

    def body_occurrence(self, line: int, pattern: re.Pattern[str], written: str) -> Occurrence:
        """Evidence: the chunks holding a match of ``pattern`` on the line (the chunks the
        line starts in if none holds one whole); ``written`` stands in for an empty line."""
        key = (line, pattern.pattern, pattern.flags, written)
        if key not in self._occurrences:
            start, text = self._line(line)
            spans = [(start + m.start(), start + m.end()) for m in self._search(pattern, text)]
            self._occurrences[key] = self._occurrence(line, start, text, spans, written)
        return self._occurrences[key]

    def chunks_holding(self, start: int, end: int) -> tuple[str, ...]:
        """Chunks holding the span whole, else those overlapping it (at most a few)."""
        return tuple(sorted(self._holding([(start, end)]) or self._overlapping(start, end)))

    def line_excerpt(self, offset: int) -> str:
        """The line holding body offset ``offset``, cut around it as
        ``references.line_text`` cuts it."""
        index = bisect_right(self.line_starts, offset) - 1
        start, text = self._line(self.body_start_line + index)
        if len(text) <= MAX_EVIDENCE_CHARS:
            return text.strip()
        at = max(0, min(offset - start - MAX_EVIDENCE_CHARS // 3, len(text) - MAX_EVIDENCE_CHARS))
        return text[at:at + MAX_EVIDENCE_CHARS].strip()

    def _line(self, line: int) -> tuple[int, str]:
        """(body offset, text without its line break) of a file line in the body."""
        index = line - self.body_start_line
        if index not in self._lines:
            start = self.line_starts[index]
            end = (self.line_starts[index + 1] if index + 1 < len(self.line_starts)
                   else len(self.body))
            self._lines[index] = (start, _LINE_BREAK.sub("", self.body[start:end]))
            self.work += end - start
        return self._lines[index]

    def _line_wikilinks(self, line: int, start: int, text: str) -> dict[str, list[tuple[int, int]]]:
        if line not in self._wikilinks:
            found: dict[str, list[tuple[int, int]]] = {}
            for match in WIKILINK_SOURCE.finditer(text):
                parts = wikilink_parts(match.group(2))
                if parts is not None:
                    opening = match.start() + len(match.group(1))
                    found.setdefault(parts[0], []).append((start + opening, start + match.end()))
            self._wikilinks[line] = found
            self.work += len(text)
        return self._wikilinks[line]

    def _line_tags(self, line: int, start: int, text: str) -> dict[str, list[tuple[int, int]]]:
        if line not in self._tags:
            found: dict[str, list[tuple[int, int]]] = {}
            for match in _TAG_RUN.finditer(text):
                tag = match.group(1).rstrip("/").lower()
                found.setdefault(tag, []).append((start + match.start(),
                                                  start + match.start() + 1 + len(tag)))
            self._tags[line] = found
            self.work += len(text)
        return self._tags[line]

    def _search(self, pattern: re.Pattern[str], text: str) -> list[re.Match[str]]:
        """Matches of ``pattern`` in ``text`` while the note's search budget lasts."""
        if self._budget < len(text):
            return []
        self._budget -= len(text)
        self.work += len(text)
        return list(pattern.finditer(text))

    def _occurrence(self, line: int, start: int, text: str, spans: list[tuple[int, int]],
                    written: str) -> Occurrence:
        holding = self._holding(spans) or self._line_chunks(start, start + len(text))
        at = spans[0][0] - start if spans else None
        return Occurrence(line, tuple(sorted(holding)), excerpt(text, at) or written)

    def _holding(self, spans: list[tuple[int, int]]) -> set[str]:
        """Chunks holding one of ``spans`` whole: walk back from the last chunk starting at
        or before the span while an earlier chunk may still reach past its end."""
        holding: set[str] = set()
        for span_start, span_end in spans:
            index = bisect_right(self._chunk_starts, span_start) - 1
            while index >= 0 and self._reach[index] >= span_end:
                self.work += 1
                if self.chunks[index][1] >= span_end:
                    holding.add(self.chunks[index][2])
                index -= 1
        return holding

    def _overlapping(self, start: int, end: int, limit: int | None = None) -> set[str]:
        """Chunks overlapping [start, end), the first ``limit`` of them."""
        end = max(end, start + 1)
        found: list[str] = []
        for index in range(bisect_right(self._reach, start), len(self.chunks)):
            chunk_start, chunk_end, chunk_id = self.chunks[index]
            self.work += 1
            if chunk_start >= end or (limit is not None and len(found) >= limit):
                break
            if chunk_end > start:
                found.append(chunk_id)
        return set(found)

    def _line_chunks(self, start: int, end: int) -> set[str]:
        return self._overlapping(start, end, MAX_LINE_EVIDENCE)

    # -- frontmatter ------------------------------------------------------------------

    def frontmatter_occurrence(self, key: str, line: int, written: str) -> Occurrence:
        """Frontmatter has no chunk: the evidence is the field, rendered from its value
        (the raw YAML is not stored), e.g. ``up: "[[Lumen]]"``."""
        cache_key = (line, "frontmatter", key, written)
        if cache_key not in self._occurrences:
            text = f"{key}: {self._render(key)}"
            found = self._search(re.compile(re.escape(written), re.IGNORECASE), text)
            self._occurrences[cache_key] = Occurrence(
                line, (), excerpt(text, found[0].start() if found else None))
        return self._occurrences[cache_key]

    def frontmatter_tag_field(self, tag: str) -> str:
        for key in ("tags", "tag"):
            rendered = self._render(key).lower()
            if self._budget >= len(rendered):
                self._budget -= len(rendered)
                self.work += len(rendered)
                if tag in rendered:
                    return key
        return "tags"

    def _render(self, key: str) -> str:
        if key not in self._rendered:
            self._rendered[key] = json.dumps(self.frontmatter.get(key), ensure_ascii=False)
        return self._rendered[key]

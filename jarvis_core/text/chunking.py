"""Heading-aware chunks of a markdown note body that fit the embedding model exactly.

The embedding model silently ignores every token past its ``max_seq_length``, so a chunk
that is even one token too long loses text without notice. Every chunk's embed text is
therefore measured with the model's own tokenizer, and cut again when a join pushed it over.

Chunks are slices of the body: sections split at headings, whole blocks packed greedily,
and only blocks too big on their own cut finer (sentences, lines, words, token windows).
"""

from __future__ import annotations

import hashlib
import re
from bisect import bisect_left, bisect_right
from collections import Counter
from dataclasses import dataclass

from jarvis_core.sources.vault.markdown import new_markdown_parser
from jarvis_core.stores.vectors.base import embedding_text
from jarvis_core.text.tokens import TokenCounter

_LINE_BREAK = re.compile(r"\r\n?|\n")
_SENTENCE_END = re.compile(r"[.!?…]+[\"'”’)\]]*\s+|[。！？]+[」』”’)]*\s*")
_NONBLANK_LINE_START = re.compile(r"(?:\r\n?|\n)(?=[^\S\r\n]*\S)")
_WORD_GAP = re.compile(r"\s+")

_CONTAINER_TOKENS = {"bullet_list_open", "ordered_list_open", "list_item_open", "blockquote_open"}
_LINE_ORIENTED_TOKENS = {"fence", "code_block", "html_block", "table_open"}

# How an oversized span is cut, each kind naming the kind of its parts: a block into its
# leaf blocks, prose into sentences, sentences and code into lines, lines into words, and
# words into token windows.
_BLOCK, _PROSE, _CODE, _SENTENCE, _LINE, _WORD, _WINDOW = (
    "block", "prose", "code", "sentence", "line", "word", "window"
)
# Windows are a fraction of the budget so that several pack into a chunk beside the overlap.
_WINDOWS_PER_CHUNK = 8


@dataclass(frozen=True)
class Chunk:
    position: int
    heading_path: tuple[str, ...]
    text: str
    context: str  # the "title > headings" line embedded before the text (cut if very long)
    token_count: int
    char_start: int
    char_end: int
    chunk_id: str

    @property
    def embed_text(self) -> str:
        return embedding_text(self.context, self.text)


def context_header(title: str, heading_path: tuple[str, ...]) -> str:
    """One line naming the note and the enclosing headings, the title not repeated."""
    parts = [_one_line(title), *(_one_line(heading) for heading in heading_path)]
    if len(parts) > 1 and parts[1] == parts[0]:
        del parts[1]
    return " > ".join(part for part in parts if part)


def chunk_document(
    body: str, *, title: str, doc_key: str, counter: TokenCounter, overlap_tokens: int = 32
) -> list[Chunk]:
    """Split ``body`` into chunks whose embed text never exceeds ``counter.max_tokens``."""
    if not body.strip():
        return []
    chunker = DocumentChunker(body, counter, overlap_tokens)
    return chunker.chunks(title, doc_key, chunker.sections())


def chunk_id(doc_key: str, heading_path: tuple[str, ...], text: str, occurrence: int) -> str:
    """Content-addressed so edits elsewhere in the note leave this id alone."""
    key = "\x1f".join((doc_key, " > ".join(heading_path), text, str(occurrence)))
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:32]


def _one_line(text: str) -> str:
    return " ".join(text.split())


@dataclass(frozen=True)
class _Piece:
    """A span of the body that fits the budget on its own; ``tokens`` exclude special tokens."""

    start: int
    end: int
    tokens: int
    kind: str


@dataclass(frozen=True)
class _Unit:
    """A top-level block with the blank lines (and reference definitions) after it."""

    start: int
    end: int
    tokens: int


class DocumentChunker:
    """Holds the body, its block structure and the tokenizer while the chunks are cut; a
    subclass reads another structure (code_chunking.py) by its own ``_read_blocks``."""

    def __init__(self, body: str, counter: TokenCounter, overlap_tokens: int) -> None:
        self.body = body
        self.counter = counter
        self.overlap_tokens = overlap_tokens
        self.special_tokens = counter.count([""])[0]
        if counter.max_tokens - self.special_tokens < 2:
            raise ValueError(f"max_tokens={counter.max_tokens} leaves no room for text")
        self.line_starts = [0] + [match.end() for match in _LINE_BREAK.finditer(body)]
        self.leaf_starts: list[int] = []
        self.leaf_kinds: list[str] = []
        self.unit_starts: list[int] = []
        self.headings: dict[int, tuple[int, str]] = {}  # unit start -> (level, text)
        self._read_blocks()

    def _line_start(self, line: int) -> int:
        return self.line_starts[line] if line < len(self.line_starts) else len(self.body)

    def _read_blocks(self) -> None:
        """Top-level blocks start units; leaf blocks at any depth are where big ones are cut."""
        tokens = new_markdown_parser().parse(self.body)
        in_table = False
        for index, token in enumerate(tokens):
            if token.type == "table_close":
                in_table = False
            if in_table or token.map is None or token.nesting == -1 or token.type == "inline":
                continue
            start = self._line_start(token.map[0])
            if token.level == 0:
                self.unit_starts.append(start)
                if token.type == "heading_open":
                    self.headings[start] = (int(token.tag[1:]), _plain_text(tokens[index + 1]))
            if token.type not in _CONTAINER_TOKENS:
                self.leaf_starts.append(start)
                self.leaf_kinds.append(_CODE if token.type in _LINE_ORIENTED_TOKENS else _PROSE)
            in_table = token.type == "table_open"
        if not self.unit_starts or self.body[: self.unit_starts[0]].strip():
            self.unit_starts.insert(0, 0)  # text with no block of its own, e.g. link references

    def sections(self) -> list[tuple[tuple[str, ...], list[_Unit]]]:
        """Units grouped by heading, each group with its heading path (outermost first).

        A heading with nothing under it (``## Comments`` right before ``### Maya``) is no
        section of its own: it joins the section after it, or the one before it when none
        follows, so no chunk is a bare heading unless the body is nothing else."""
        bounds = [*self.unit_starts, len(self.body)]
        units = [(unit_start, span) for unit_start, span
                 in zip(self.unit_starts, map(self._trim, bounds, bounds[1:])) if span]
        counts = self._content_tokens([self.body[start:end] for _, (start, end) in units])
        sections: list[tuple[tuple[str, ...], list[_Unit]]] = [((), [])]
        open_headings: list[tuple[int, str]] = []
        for (unit_start, (start, end)), tokens in zip(units, counts):
            if unit_start in self.headings:
                level, text = self.headings[unit_start]
                outer = [heading for heading in open_headings if heading[0] < level]
                open_headings = [*outer, (level, text)]
                sections.append((tuple(text for _, text in open_headings if text), []))
            sections[-1][1].append(_Unit(start, end, tokens))
        joined: list[tuple[tuple[str, ...], list[_Unit]]] = []
        bare_headings: list[_Unit] = []
        for index, (heading_path, section_units) in enumerate(sections):
            if index and len(section_units) == 1:  # a heading alone
                bare_headings.extend(section_units)
            elif section_units:
                joined.append((heading_path, [*bare_headings, *section_units]))
                bare_headings = []
        if bare_headings and joined:
            joined[-1][1].extend(bare_headings)
        elif bare_headings:
            joined.append((sections[-1][0], bare_headings))
        return joined

    def chunks(self, title: str, doc_key: str,
               sections: list[tuple[tuple[str, ...], list[_Unit]]]) -> list[Chunk]:
        """The chunks of ``sections``, each headed by the title and its heading path."""
        chunks: list[Chunk] = []
        occurrences: Counter[tuple[tuple[str, ...], str]] = Counter()
        for heading_path, units in sections:
            header = self.fitted_header(context_header(title, heading_path))
            for start, end, token_count in self.pack(units, header):
                text = self.body[start:end]
                occurrence = occurrences[heading_path, text]
                occurrences[heading_path, text] += 1
                chunks.append(Chunk(
                    position=len(chunks), heading_path=heading_path, text=text,
                    context=header, token_count=token_count, char_start=start,
                    char_end=end, chunk_id=chunk_id(doc_key, heading_path, text, occurrence)))
        return chunks

    def fitted_header(self, header: str) -> str:
        """The header, cut short if it would leave less than half the budget for text."""
        allowance = (self.counter.max_tokens - self.special_tokens) // 2
        if not header or self._content_tokens([header])[0] <= allowance:
            return header
        return header[: self.counter.offsets(header)[allowance][0]].rstrip()

    def pack(self, units: list[_Unit], header: str) -> list[tuple[int, int, int]]:
        """Greedy chunks of one section as (start, end, token count of the embed text)."""
        budget = self.counter.max_tokens - self.special_tokens
        if header:
            budget -= self._content_tokens([header])[0]
        pieces: list[_Piece] = []
        for unit in units:
            if unit.tokens <= budget:
                pieces.append(_Piece(unit.start, unit.end, unit.tokens, _BLOCK))
            else:
                pieces.extend(self._split(unit.start, unit.end, _BLOCK, budget))
        chunks: list[tuple[int, int, int]] = []
        previous: tuple[int, int] | None = None
        first = 0
        while first < len(pieces):
            overlap_limit = min(self.overlap_tokens, budget - pieces[first].tokens)
            overlap = self._overlap(*previous, overlap_limit) if previous else None
            room = budget - (overlap[1] if overlap else 0)
            stop = _fill(pieces, first, room)
            if self._cut_after_headings(pieces, first, stop, room, budget):
                stop = _fill(pieces, first, room)
            while True:
                start = overlap[0] if overlap else pieces[first].start
                end = pieces[stop - 1].end
                token_count = self.counter.count([embedding_text(header, self.body[start:end])])[0]
                if token_count <= self.counter.max_tokens:
                    break
                if stop - first > 1:
                    stop -= 1
                elif overlap:
                    overlap = None
                else:
                    break
            if token_count > self.counter.max_tokens:  # counts were not additive: cut finer
                piece = pieces[first]
                excess = token_count - self.counter.max_tokens
                pieces[first:first + 1] = self._split(
                    piece.start, piece.end, piece.kind, max(1, piece.tokens - excess)
                )
                continue
            chunks.append((start, end, token_count))
            previous = (start, end)
            first = stop
        return chunks

    def _is_heading(self, piece: _Piece) -> bool:
        return piece.start in self.headings

    def _cut_after_headings(self, pieces: list[_Piece], first: int, stop: int, room: int,
                            budget: int) -> bool:
        """Whether ``pieces[stop]`` was cut finer in place because the chunk of
        ``pieces[first:stop]`` starts with headings and holds next to nothing else (a fence's
        first line): its first parts then fill the chunk, so that headings share a chunk with
        their text (when at least a token window's worth of room is left)."""
        if stop == len(pieces) or not self._is_heading(pieces[first]):
            return False
        text = first
        while text < stop and self._is_heading(pieces[text]):
            text += 1
        window = budget // _WINDOWS_PER_CHUNK
        left = room - sum(piece.tokens for piece in pieces[first:stop])
        after = pieces[stop]
        if (left < window or self._is_heading(after)
                or sum(piece.tokens for piece in pieces[text:stop]) >= window):
            return False
        pieces[stop:stop + 1] = self._split(after.start, after.end, after.kind, left)
        return True

    def _split(self, start: int, end: int, kind: str, budget: int) -> list[_Piece]:
        """Pieces of an oversized span, cut as coarsely as lets each fit ``budget``."""
        parts = self._segments(start, end, kind, budget)
        if len(parts) == 1:
            part_start, part_end, part_kind = parts[0]
            if kind == _WINDOW:
                raise ValueError(f"text {self.body[start:end]!r} does not fit {budget} tokens")
            return self._split(part_start, part_end, part_kind, budget)
        counts = self._content_tokens([self.body[s:e] for s, e, _ in parts])
        pieces: list[_Piece] = []
        for (part_start, part_end, part_kind), tokens in zip(parts, counts):
            if tokens <= budget:
                pieces.append(_Piece(part_start, part_end, tokens, part_kind))
            else:
                pieces.extend(self._split(part_start, part_end, part_kind, budget))
        return pieces

    def _segments(
        self, start: int, end: int, kind: str, budget: int
    ) -> list[tuple[int, int, str]]:
        """The span cut one level finer, as trimmed (start, end, kind) parts covering it."""
        if kind == _BLOCK:
            first_leaf = bisect_right(self.leaf_starts, start)
            last_leaf = bisect_left(self.leaf_starts, end)
            cuts = self.leaf_starts[first_leaf:last_leaf]
            kinds = [self.leaf_kinds[first_leaf - 1] if first_leaf else _PROSE,
                     *self.leaf_kinds[first_leaf:last_leaf]]
        elif kind == _PROSE:
            cuts = [match.end() for match in _SENTENCE_END.finditer(self.body, start, end)]
            kinds = [_SENTENCE] * (len(cuts) + 1)
        elif kind in (_SENTENCE, _CODE):
            cuts = [match.end() for match in _LINE_BREAK.finditer(self.body, start, end)]
            kinds = [_LINE] * (len(cuts) + 1)
        elif kind == _LINE:
            cuts = [match.end() for match in _WORD_GAP.finditer(self.body, start, end)]
            kinds = [_WORD] * (len(cuts) + 1)
        else:
            cuts = self._window_cuts(start, end, max(1, budget // _WINDOWS_PER_CHUNK))
            kinds = [_WINDOW] * (len(cuts) + 1)
        bounds = [start, *cuts, end]
        spans = map(self._trim, bounds, bounds[1:])
        return [(span[0], span[1], part_kind) for span, part_kind in zip(spans, kinds) if span]

    def _window_cuts(self, start: int, end: int, window_tokens: int) -> list[int]:
        """Cuts at every ``window_tokens``-th token boundary of a span with no spaces left."""
        spans = self.counter.offsets(self.body[start:end])
        return [start + spans[index][0]
                for index in range(window_tokens, len(spans), window_tokens)]

    def _overlap(self, start: int, end: int, limit: int) -> tuple[int, int] | None:
        """Where to start so as to repeat the previous chunk's last tokens (at most ``limit``).

        Returns (start, tokens repeated): whole sentences or lines when the last one is short
        enough, else a token tail; never the whole previous chunk, which would only repeat it.
        """
        if limit <= 0:
            return None
        text = self.body[start:end]
        spans = self.counter.offsets(text)
        if len(spans) <= limit:
            return None
        token_starts = [span[0] for span in spans]
        boundaries = sorted(
            {match.end() for match in _SENTENCE_END.finditer(text)}
            | {match.end() for match in _NONBLANK_LINE_START.finditer(text)}
        )
        for boundary in boundaries:
            tail_tokens = len(spans) - bisect_left(token_starts, boundary)
            if 0 < tail_tokens <= limit:
                return start + boundary, tail_tokens
        first_token = len(spans) - limit
        first_token = next(
            (index for index in range(first_token, len(spans))
             if text[spans[index][0] - 1].isspace()),
            first_token,
        )
        return start + spans[first_token][0], len(spans) - first_token

    def _trim(self, start: int, end: int) -> tuple[int, int] | None:
        """The span without surrounding blank space, keeping a first line's indentation."""
        body = self.body
        while end > start and body[end - 1].isspace():
            end -= 1
        first_visible = start
        while first_visible < end and body[first_visible].isspace():
            first_visible += 1
        if first_visible == end:
            return None
        last_break = max(body.rfind("\n", start, first_visible),
                         body.rfind("\r", start, first_visible))
        if last_break >= 0:
            return last_break + 1, end
        at_line_start = start == 0 or body[start - 1] in "\r\n"
        return (start if at_line_start else first_visible), end

    def _content_tokens(self, texts: list[str]) -> list[int]:
        return [count - self.special_tokens for count in self.counter.count(texts)]


def _fill(pieces: list[_Piece], first: int, room: int) -> int:
    """The end of the run of pieces from ``first`` whose tokens fit ``room``."""
    stop = first
    while stop < len(pieces) and pieces[stop].tokens <= room:
        room -= pieces[stop].tokens
        stop += 1
    return stop


def _plain_text(inline_token) -> str:
    """A heading's words without markup, on one line (setext headings may span lines)."""
    words = []
    for child in inline_token.children or []:
        if child.type in ("text", "code_inline"):
            words.append(child.content)
        elif child.type in ("softbreak", "hardbreak"):
            words.append(" ")
        elif child.type == "image":
            words.append(_plain_text(child))
    return _one_line("".join(words)) or _one_line(inline_token.content)

"""Parsing one Obsidian note into the facts the pipeline stores: frontmatter, tags,
wikilinks, embeds, markdown links, headings, block ids and typed relations.

Pure Python without I/O, so the Dagster assets and the query side share it. Structure
comes from markdown-it (the shared configuration in ``jarvis_core.markdown``) extended
with inline rules for wikilinks and tags, so link-like text inside code spans, fenced
or indented code is never mistaken for a link, tag or embed.
"""

from __future__ import annotations

import math
import re
import threading
import unicodedata
from bisect import bisect_left, bisect_right
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import PurePosixPath
from typing import Any

import yaml
from markdown_it import MarkdownIt
from markdown_it.rules_inline import autolink, image, link, linkify
from markdown_it.rules_inline.state_inline import StateInline
from markdown_it.token import Token

from jarvis_core.markdown import new_markdown_parser

__all__ = ["Heading", "MarkdownLink", "ParsedNote", "TypedRelation", "WikiLink", "parse_note"]


@dataclass(frozen=True)
class WikiLink:
    target: str
    heading: str | None
    block: str | None
    alias: str | None
    embed: bool
    line: int


@dataclass(frozen=True)
class MarkdownLink:
    url: str
    text: str
    line: int
    image: bool
    bare: bool


@dataclass(frozen=True)
class Heading:
    level: int
    text: str
    line: int


@dataclass(frozen=True)
class TypedRelation:
    subject: str
    relation: str
    object: str
    line: int


@dataclass
class ParsedNote:
    title: str
    frontmatter: dict
    frontmatter_error: str | None
    body: str
    body_start_line: int
    aliases: list[str] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    wikilinks: list[WikiLink] = field(default_factory=list)
    embeds: list[WikiLink] = field(default_factory=list)
    links: list[MarkdownLink] = field(default_factory=list)
    headings: list[Heading] = field(default_factory=list)
    block_ids: list[str] = field(default_factory=list)
    relations: list[TypedRelation] = field(default_factory=list)
    frontmatter_links: dict[str, list[str]] = field(default_factory=dict)
    # canonical tag -> 1-based file lines it occurs on (a frontmatter tag: its key's line),
    # so that graph edges built from tags can point at their evidence
    tag_lines: dict[str, list[int]] = field(default_factory=dict)
    created: str | None = None
    modified: str | None = None


def parse_note(text: str, *, path: str) -> ParsedNote:
    """Parse one note; never raises, odd input just yields fewer facts."""
    text = text.removeprefix("\ufeff")
    yaml_text, body, body_start_line = _split_frontmatter(text)
    frontmatter, frontmatter_error = {}, None
    if yaml_text is not None:
        frontmatter, frontmatter_error = _load_frontmatter(yaml_text)
    note = ParsedNote(
        title=_title(frontmatter, path),
        frontmatter=frontmatter,
        frontmatter_error=frontmatter_error,
        body=body,
        body_start_line=body_start_line,
        aliases=_frontmatter_aliases(frontmatter),
        created=_first_timestamp(frontmatter, _CREATED_KEYS) or _date_in_file_name(path),
        modified=_first_timestamp(frontmatter, _MODIFIED_KEYS),
    )
    tags: list[tuple[str, int]] = []  # (tag as written, line)
    if yaml_text is not None:
        for key, tag in _frontmatter_tags(frontmatter):
            tags.append((tag, _frontmatter_key_line(yaml_text, key)))
        _collect_frontmatter_links(frontmatter, yaml_text, note)
    _collect_body(body, body_start_line, note, tags)
    for tag, line in tags:
        lines = note.tag_lines.setdefault(unicodedata.normalize("NFC", tag).lower(), [])
        if line not in lines:
            lines.append(line)
    note.tags = list(note.tag_lines)
    return note


# --- frontmatter -----------------------------------------------------------------------

_LINE_BREAK = re.compile(r"\r\n?|\n")  # what markdown-it counts as a line break
_FRONTMATTER_CLOSERS = ("---", "...")
_CREATED_KEYS = ("created", "date", "created_at")
_MODIFIED_KEYS = ("updated", "modified", "updated_at")
# libyaml recurses on the C stack and segfaults on ~30k nested brackets; text this short
# cannot nest that deep, and longer frontmatter goes to the pure-Python loader, which
# stops at Python's recursion limit with a catchable RecursionError instead.
_C_LOADER_MAX_CHARS = 4096
_FAST_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
# Aliases let a few lines of YAML expand into billions of values (the "billion laughs").
_MAX_FRONTMATTER_VALUES = 100_000
_MAX_FRONTMATTER_DEPTH = 64


class _FrontmatterTooComplex(Exception):
    """Frontmatter that would expand into too many or too deeply nested values."""


def _split_frontmatter(text: str) -> tuple[str | None, str, int]:
    """(YAML text or None, body, 1-based line where the body starts)."""
    opening = _LINE_BREAK.search(text)
    if opening is None or text[: opening.start()].rstrip(" \t") != "---":
        return None, text, 1
    line_start, line_number = opening.end(), 2
    while True:
        line_break = _LINE_BREAK.search(text, line_start)
        line_end = line_break.start() if line_break else len(text)
        if text[line_start:line_end].rstrip(" \t") in _FRONTMATTER_CLOSERS:
            body_start = line_break.end() if line_break else len(text)
            return text[opening.end() : line_start], text[body_start:], line_number + 1
        if line_break is None:
            return None, text, 1
        line_start, line_number = line_break.end(), line_number + 1


def _load_frontmatter(yaml_text: str) -> tuple[dict, str | None]:
    """(JSON-safe mapping, error message); the mapping is empty when there is an error."""
    loader = _FAST_YAML_LOADER if len(yaml_text) <= _C_LOADER_MAX_CHARS else yaml.SafeLoader
    try:
        data = _json_safe(yaml.load(yaml_text, Loader=loader))
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        # mark lines are 0-based and the YAML starts below the opening fence
        where = f" at line {mark.line + 2}" if mark else ""
        return {}, f"invalid YAML frontmatter{where}: {exc.problem or exc}"
    except _FrontmatterTooComplex:
        return {}, "invalid YAML frontmatter: too many or too deeply nested values"
    except (yaml.YAMLError, ValueError, RecursionError) as exc:
        return {}, f"invalid YAML frontmatter: {exc}"
    if data is None:
        return {}, None
    if not isinstance(data, dict):
        return {}, f"invalid YAML frontmatter: expected a mapping, got {type(data).__name__}"
    return data, None


def _json_safe(data: Any) -> Any:
    """Dates become ISO strings and anything JSON cannot hold becomes its str()."""
    budget = _MAX_FRONTMATTER_VALUES

    def convert(value: Any, depth: int) -> Any:
        nonlocal budget
        budget -= 1
        if budget < 0 or depth > _MAX_FRONTMATTER_DEPTH:
            raise _FrontmatterTooComplex
        if isinstance(value, dict):
            return {_json_key(key): convert(item, depth + 1) for key, item in value.items()}
        if isinstance(value, (list, tuple)):
            return [convert(item, depth + 1) for item in value]
        if isinstance(value, date):
            return value.isoformat()
        if isinstance(value, float) and not math.isfinite(value):
            return str(value)
        if value is None or isinstance(value, (str, int, float, bool)):
            return value
        return str(value)

    return convert(data, 0)


def _json_key(key: Any) -> str:
    if isinstance(key, str):
        return key
    return key.isoformat() if isinstance(key, date) else str(key)


def _title(frontmatter: dict, path: str) -> str:
    title = frontmatter.get("title")
    if isinstance(title, str) and title.strip():
        return title.strip()
    return PurePosixPath(path).stem


def _strings(value: Any) -> list[str]:
    """The scalar strings of a frontmatter value that should be a string or a list of them."""
    items = value if isinstance(value, list) else [value]
    return [
        str(item)
        for item in items
        if isinstance(item, (str, int, float)) and not isinstance(item, bool)
    ]


def _frontmatter_aliases(frontmatter: dict) -> list[str]:
    aliases: list[str] = []
    for key in ("aliases", "alias"):
        value = frontmatter.get(key)
        if isinstance(value, str):
            aliases += value.split(",")
        else:
            aliases += _strings(value)
    return list(dict.fromkeys(alias.strip() for alias in aliases if alias.strip()))


def _frontmatter_tags(frontmatter: dict) -> list[tuple[str, str]]:
    """(key, tag) for the valid tags of 'tags'/'tag'; Obsidian ignores ones it could not
    write inline."""
    tags = []
    for key in ("tags", "tag"):
        for string in _strings(frontmatter.get(key)):
            for word in re.split(r"[,\s]+", string):
                word = word.lstrip("#")
                if _tag_end(word, 0, len(word)) == len(word) and (tag := _valid_tag(word)):
                    tags.append((key, tag))
    return tags


def _frontmatter_key_line(yaml_text: str, key: str) -> int:
    """1-based file line of a top-level ``key:``; the first YAML line if it is not found
    (e.g. a flow mapping), since the value is still somewhere in the frontmatter."""
    key_at_line_start = re.compile(rf"[\"']?{re.escape(key)}[\"']?[ \t]*:")
    for index, line in enumerate(_LINE_BREAK.split(yaml_text)):
        if key_at_line_start.match(line):
            return index + 2  # +1 for 1-based, +1 for the opening fence
    return 2


def _first_timestamp(frontmatter: dict, keys: tuple[str, ...]) -> str | None:
    for key in keys:
        value = frontmatter.get(key)
        if isinstance(value, str) and (timestamp := _iso_timestamp(value.strip())):
            return timestamp
    return None


def _iso_timestamp(value: str) -> str | None:
    for kind in (date, datetime):
        try:
            return kind.fromisoformat(value).isoformat()
        except ValueError:
            continue
    return None


_FILE_NAME_DATE = re.compile(r"(?<!\d)(\d{4})-(\d{2})-(\d{2})(?!\d)")


def _date_in_file_name(path: str) -> str | None:
    """Daily notes carry their date only in the name, e.g. 'Daily/2024-03-15.md'."""
    for match in _FILE_NAME_DATE.finditer(PurePosixPath(path).stem):
        try:
            return date(*map(int, match.groups())).isoformat()
        except ValueError:
            continue
    return None


def _collect_frontmatter_links(frontmatter: dict, yaml_text: str, note: ParsedNote) -> None:
    """Wikilinks in frontmatter values count like body ones (e.g. ``up: "[[Lumen]]"``)."""
    line_starts = [0] + [found.end() for found in _LINE_BREAK.finditer(yaml_text)]
    cursor = 0
    for key, value in frontmatter.items():
        for string in _nested_strings(value):
            for match in _WIKILINK_SOURCE.finditer(string):
                parts = _wikilink_parts(match.group(2))
                if parts is None:
                    continue
                found = yaml_text.find(match.group(0), cursor)
                if found < 0:
                    found = yaml_text.find(match.group(0))
                if found >= 0:
                    cursor = found + len(match.group(0))
                # bisect gives the 1-based line within the YAML; +1 for the opening fence
                line = 1 + bisect_right(line_starts, found if found >= 0 else cursor)
                wikilink = WikiLink(*parts, embed=bool(match.group(1)), line=line)
                (note.embeds if wikilink.embed else note.wikilinks).append(wikilink)
                if wikilink.target:
                    targets = note.frontmatter_links.setdefault(key, [])
                    if wikilink.target not in targets:
                        targets.append(wikilink.target)
    for string in _strings(frontmatter.get("relationships")):
        if relation := _frontmatter_relation(string):
            note.relations.append(relation)


def _nested_strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list):
        return [string for item in value for string in _nested_strings(item)]
    return []


_RELATION_NAME = r"[A-Za-z][A-Za-z0-9_]*"
_FRONTMATTER_RELATION = re.compile(
    rf"\s*(?:(?P<subject>\[\[[^\[\]\n]+\]\]|this)\s+)?(?P<relation>{_RELATION_NAME})"
    rf"\s+(?P<object>\[\[[^\[\]\n]+\]\]|this)\s*",
    re.IGNORECASE,
)


def _frontmatter_relation(string: str) -> TypedRelation | None:
    """'REL [[B]]' (this note is the subject) or '[[A]] REL [[B]]'."""
    match = _FRONTMATTER_RELATION.fullmatch(string)
    if match is None:
        return None
    sides = []
    for side in (match.group("subject") or "this", match.group("object")):
        if side.lower() == "this":
            sides.append("")
        elif (parts := _wikilink_parts(side[2:-2])) is not None:
            sides.append(parts[0])
        else:
            return None
    if sides == ["", ""]:
        return None
    return TypedRelation(sides[0], match.group("relation").upper(), sides[1], line=0)


# --- markdown-it rules ----------------------------------------------------------------

_WIKILINK_SOURCE = re.compile(r"(!?)\[\[([^\[\]\n]+)\]\]")


def _wikilink_parts(inner: str) -> tuple[str, str | None, str | None, str | None] | None:
    """(target, heading, block, alias) of the text between '[[' and ']]', None if empty.

    Outside tables the alias separator may be written '\\|' (the escape Obsidian needs
    inside table cells); the table rule has already unescaped it in cells.
    """
    reference, separator, alias = inner.partition("|")
    if separator and reference.endswith("\\"):
        reference = reference[:-1]
    target, _, fragment = reference.partition("#")
    target, fragment, heading, block = target.strip(), fragment.strip(), None, None
    if fragment.startswith("^"):
        block = fragment[1:].strip() or None
    elif fragment:
        heading = fragment
    if not (target or heading or block):
        return None
    return target, heading, block, alias.strip() or None


def _wikilink_rule(state: StateInline, silent: bool) -> bool:
    """``[[...]]`` and ``![[...]]``; placed before CommonMark's link rule so it wins.

    Silent mode only serves link-label scanning, which would take a wikilink token for
    a nested link and drop the whole ``[text [[A]]](url)``; declining keeps that link.
    Inside link text (``linkLevel``) brackets stay text, as links do not nest.
    """
    if silent or state.linkLevel > 0 or state.src[state.pos] not in "![":
        return False
    match = _WIKILINK_SOURCE.match(state.src, state.pos, state.posMax)
    if match is None or (parts := _wikilink_parts(match.group(2))) is None:
        return False
    token = state.push("wikilink", "", 0)
    token.content = match.group(0)
    token.meta = {"parts": parts, "embed": bool(match.group(1)), "offset": state.pos}
    state.pos = match.end()
    return True


_EMPHASIS_MARKERS = "*_~"


def _tag_rule(state: StateInline, silent: bool) -> bool:
    """``#tag`` after whitespace, '(' or the start of the text (emphasis markers allowed
    in between, so ``**#urgent**`` counts as Obsidian shows it)."""
    src, start = state.src, state.pos
    if src[start] != "#" or state.linkLevel > 0:
        return False
    before = start - 1
    while before >= 0 and src[before] in _EMPHASIS_MARKERS:
        before -= 1
    if before >= 0 and not (src[before].isspace() or src[before] == "("):
        return False
    end = _tag_end(src, start + 1, state.posMax)
    tag = _valid_tag(src[start + 1 : end])
    if tag is None:
        return False
    if not silent:
        token = state.push("tag", "", 0)
        token.content = src[start:end]
        token.meta = {"tag": tag, "offset": start}
    state.pos = end
    return True


def _tag_end(text: str, start: int, limit: int) -> int:
    """End of the run of tag characters: letters (with their combining marks), digits, _ - /."""
    end = start
    while end < limit and (
        text[end].isalnum() or text[end] in "_-/" or unicodedata.category(text[end]).startswith("M")
    ):
        end += 1
    return end


def _valid_tag(run: str) -> str | None:
    """The tag a run of tag characters spells, or None (``#123`` and ``#/x`` are not tags)."""
    tag = run.rstrip("/")
    if not tag or tag.isdigit() or tag.startswith("/"):
        return None
    return tag


_InlineRule = Callable[[StateInline, bool], bool]


def _remembering_offset(rule: _InlineRule) -> _InlineRule:
    """Wrap a link-producing rule so its token keeps where it began, for line numbers."""

    def rule_with_offset(state: StateInline, silent: bool) -> bool:
        start, token_count = state.pos, len(state.tokens)
        matched = rule(state, silent)
        if matched and not silent:
            for token in state.tokens[token_count:]:
                if token.type in ("link_open", "image"):
                    token.meta["offset"] = start
                    break
        return matched

    return rule_with_offset


def _as_written(url: str) -> str:
    return url


def _any_link_is_valid(url: str) -> bool:
    return True


def _build_parser() -> MarkdownIt:
    """The shared configuration plus Obsidian syntax, tuned for extraction, not rendering:

    URLs are kept as written (no percent-encoding), ``file:`` and other schemes a renderer
    would refuse are still links, and only URLs with a scheme are bare links, because
    fuzzy matching turns every 'README.md' or 'setup.py' (Moldovan and Paraguayan TLDs)
    into a link.
    """
    parser = new_markdown_parser()
    parser.linkify.set({"fuzzy_link": False, "fuzzy_email": False})
    parser.normalizeLink = _as_written  # type: ignore[method-assign]
    parser.normalizeLinkText = _as_written  # type: ignore[method-assign]
    parser.validateLink = _any_link_is_valid  # type: ignore[method-assign]
    link_rules = {"link": link, "image": image, "autolink": autolink, "linkify": linkify}
    for name, rule in link_rules.items():
        parser.inline.ruler.at(name, _remembering_offset(rule))
    parser.inline.ruler.before("link", "wikilink", _wikilink_rule)
    parser.inline.ruler.before("link", "tag", _tag_rule)
    return parser


_per_thread = threading.local()


def _parser() -> MarkdownIt:
    """One parser per thread: building one costs far more than parsing a note, and the
    linkify matcher inside keeps per-call state, so threads must not share it."""
    parser = getattr(_per_thread, "parser", None)
    if parser is None:
        parser = _per_thread.parser = _build_parser()
    return parser


# --- body -----------------------------------------------------------------------------

# Obsidian block ids end a block's last line; a line of just '^id' names the block above.
_BLOCK_ID = re.compile(r"(?:^|\s)\^([A-Za-z0-9-]+)$")
_BREAK = "\x01"  # separates text pieces a relation may not span
_RELATION = re.compile(
    r"(?:\x00(?P<subject>\d+)\x00|(?<!\w)(?P<subject_this>this))"
    rf"\s*(?:\|\s*(?P<piped>{_RELATION_NAME})\s*\||->\s*(?P<arrowed>{_RELATION_NAME})\s*->"
    rf"|-\[\s*(?P<bracketed>{_RELATION_NAME})\s*\]->)\s*"
    r"(?=\x00(?P<object>\d+)\x00|(?P<object_this>this)(?!\w))",
    re.IGNORECASE,
)


def _collect_body(body: str, body_start_line: int, note: ParsedNote,
                  tags: list[tuple[str, int]]) -> None:
    tokens = _parser().parse(body)
    for index, token in enumerate(tokens):
        if token.type != "inline" or token.map is None:
            continue
        first_line = body_start_line + token.map[0]
        parent = tokens[index - 1] if index else None
        if parent is not None and parent.type == "heading_open":
            text = " ".join(line.strip() for line in token.content.split("\n"))
            note.headings.append(Heading(int(parent.tag[1:]), text, first_line))
        elif parent is not None and parent.type == "paragraph_open":
            if block_id := _BLOCK_ID.search(token.content):
                note.block_ids.append(block_id.group(1))
        _collect_inline(token, first_line, note, tags)


class _OpenLink:
    """A markdown link whose text is still being read."""

    def __init__(self, token: Token, offset: int | None, bare: bool) -> None:
        self.url = str(token.attrs.get("href", ""))
        self.offset = offset
        self.bare = bare
        self.text: list[str] = []


def _collect_inline(inline: Token, first_line: int, note: ParsedNote,
                    tags: list[tuple[str, int]]) -> None:
    content = inline.content
    line_breaks = [found.start() for found in re.finditer("\n", content)]

    def line_at(offset: int) -> int:
        return first_line + bisect_left(line_breaks, offset)

    pieces: list[str] = []  # text with wikilinks as \x00<index>\x00, for typed relations
    relation_sides: list[WikiLink] = []
    open_links: list[_OpenLink] = []
    cursor = 0
    for child in inline.children or ():
        offset = child.meta.get("offset")
        if offset is not None:
            cursor = offset
        piece = _BREAK
        if child.type == "text" and not open_links:
            piece = child.content
        elif child.type == "wikilink":
            wikilink = WikiLink(*child.meta["parts"], child.meta["embed"], line_at(offset))
            if wikilink.embed:
                note.embeds.append(wikilink)
            else:
                note.wikilinks.append(wikilink)
                piece = f"\x00{len(relation_sides)}\x00"
                relation_sides.append(wikilink)
        elif child.type == "tag":
            tags.append((child.meta["tag"], line_at(offset)))
        elif child.type == "image":
            src = str(child.attrs.get("src", ""))
            note.links.append(MarkdownLink(src, child.content, line_at(cursor), True, False))
        elif child.type == "link_open":
            open_links.append(_OpenLink(child, offset, bare=child.info == "auto"))
        elif child.type == "link_close" and open_links:
            opened = open_links.pop()
            text = "".join(opened.text)
            if opened.offset is None:  # linked after inline parsing (core linkify): find it
                found = content.find(text, cursor)
                opened.offset = cursor = found if found >= 0 else cursor
            shown_text = "" if opened.bare else text
            line = line_at(opened.offset)
            note.links.append(MarkdownLink(opened.url, shown_text, line, False, opened.bare))
        elif open_links and child.type in ("text", "code_inline"):
            open_links[-1].text.append(child.content)
        elif open_links and child.type in ("softbreak", "hardbreak"):
            open_links[-1].text.append(" ")
        pieces.append(piece)
    if relation_sides:
        note.relations += _inline_relations("".join(pieces), relation_sides)


def _inline_relations(sequence: str, sides: list[WikiLink]) -> list[TypedRelation]:
    relations = []
    for match in _RELATION.finditer(sequence):
        subject = sides[int(match.group("subject"))] if match.group("subject") else None
        object_ = sides[int(match.group("object"))] if match.group("object") else None
        anchor = subject or object_
        if anchor is None:
            continue
        relation = match.group("piped") or match.group("arrowed") or match.group("bracketed")
        relations.append(
            TypedRelation(
                subject.target if subject else "",
                relation.upper(),
                object_.target if object_ else "",
                anchor.line,
            )
        )
    return relations

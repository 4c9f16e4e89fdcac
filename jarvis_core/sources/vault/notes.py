"""Parsing one Obsidian note into the facts the pipeline stores: frontmatter, tags,
wikilinks, embeds, markdown links, headings, block ids and typed relations.

Pure Python without I/O, so the Dagster assets and the query side share it. Structure
comes from markdown-it (the shared configuration in ``jarvis_core.sources.vault.markdown``) extended
with inline rules for wikilinks and tags, so link-like text inside code spans, fenced
or indented code is never mistaken for a link, tag or embed."""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_left

from markdown_it.token import Token

from jarvis_core.sources.vault.frontmatter import (
    CREATED_KEYS,
    MODIFIED_KEYS,
    RELATION_NAME,
    collect_frontmatter_links,
    date_in_file_name,
    first_timestamp,
    frontmatter_aliases,
    frontmatter_key_line,
    frontmatter_tags,
    load_frontmatter,
    note_title,
    split_frontmatter,
)
from jarvis_core.sources.vault.markdown_rules import note_parser
from jarvis_core.sources.vault.parsed_note import (
    Heading,
    MarkdownLink,
    ParsedNote,
    TypedRelation,
    WikiLink,
)


def parse_note(text: str, *, path: str) -> ParsedNote:
    """Parse one note; never raises, odd input just yields fewer facts."""
    text = text.removeprefix("\ufeff")
    yaml_text, body, body_start_line = split_frontmatter(text)
    frontmatter, frontmatter_error = {}, None
    if yaml_text is not None:
        frontmatter, frontmatter_error = load_frontmatter(yaml_text)
    note = ParsedNote(
        title=note_title(frontmatter, path),
        frontmatter=frontmatter,
        frontmatter_error=frontmatter_error,
        body=body,
        body_start_line=body_start_line,
        aliases=frontmatter_aliases(frontmatter),
        created=first_timestamp(frontmatter, CREATED_KEYS) or date_in_file_name(path),
        modified=first_timestamp(frontmatter, MODIFIED_KEYS),
    )
    tags: list[tuple[str, int]] = []  # (tag as written, line)
    if yaml_text is not None:
        for key, tag in frontmatter_tags(frontmatter):
            tags.append((tag, frontmatter_key_line(yaml_text, key)))
        collect_frontmatter_links(frontmatter, yaml_text, note)
    _collect_body(body, body_start_line, note, tags)
    for tag, line in tags:
        lines = note.tag_lines.setdefault(unicodedata.normalize("NFC", tag).lower(), [])
        if line not in lines:
            lines.append(line)
    note.tags = list(note.tag_lines)
    return note


# Obsidian block ids end a block's last line; a line of just '^id' names the block above.
_BLOCK_ID = re.compile(r"(?:^|\s)\^([A-Za-z0-9-]+)$")


_BREAK = "\x01"  # separates text pieces a relation may not span


_RELATION = re.compile(
    r"(?:\x00(?P<subject>\d+)\x00|(?<!\w)(?P<subject_this>this))"
    rf"\s*(?:\|\s*(?P<piped>{RELATION_NAME})\s*\||->\s*(?P<arrowed>{RELATION_NAME})\s*->"
    rf"|-\[\s*(?P<bracketed>{RELATION_NAME})\s*\]->)\s*"
    r"(?=\x00(?P<object>\d+)\x00|(?P<object_this>this)(?!\w))",
    re.IGNORECASE,
)


def _collect_body(body: str, body_start_line: int, note: ParsedNote,
                  tags: list[tuple[str, int]]) -> None:
    tokens = note_parser().parse(body)
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

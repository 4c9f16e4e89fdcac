"""What the note parser reads from a note: links, embeds, headings, relations, tags."""

from __future__ import annotations

from dataclasses import dataclass, field


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

"""YAML frontmatter of a note: parsed safely, with the facts Jarvis reads from it (title,
aliases, tags, dates, relation fields)."""

from __future__ import annotations

import math
import re
from bisect import bisect_right
from datetime import date, datetime
from pathlib import PurePosixPath
from typing import Any

import yaml

from jarvis_core.sources.vault.markdown_rules import (
    WIKILINK_SOURCE,
    tag_end,
    valid_tag,
    wikilink_parts,
)
from jarvis_core.sources.vault.parsed_note import ParsedNote, TypedRelation, WikiLink

_LINE_BREAK = re.compile(r"\r\n?|\n")  # what markdown-it counts as a line break


_FRONTMATTER_CLOSERS = ("---", "...")


CREATED_KEYS = ("created", "date", "created_at")


MODIFIED_KEYS = ("updated", "modified", "updated_at")


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


def split_frontmatter(text: str) -> tuple[str | None, str, int]:
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


def load_frontmatter(yaml_text: str) -> tuple[dict, str | None]:
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


def note_title(frontmatter: dict, path: str) -> str:
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


def frontmatter_aliases(frontmatter: dict) -> list[str]:
    aliases: list[str] = []
    for key in ("aliases", "alias"):
        value = frontmatter.get(key)
        if isinstance(value, str):
            aliases += value.split(",")
        else:
            aliases += _strings(value)
    return list(dict.fromkeys(alias.strip() for alias in aliases if alias.strip()))


def frontmatter_tags(frontmatter: dict) -> list[tuple[str, str]]:
    """(key, tag) for the valid tags of 'tags'/'tag'; Obsidian ignores ones it could not
    write inline."""
    tags = []
    for key in ("tags", "tag"):
        for string in _strings(frontmatter.get(key)):
            for word in re.split(r"[,\s]+", string):
                word = word.lstrip("#")
                if tag_end(word, 0, len(word)) == len(word) and (tag := valid_tag(word)):
                    tags.append((key, tag))
    return tags


def frontmatter_key_line(yaml_text: str, key: str) -> int:
    """1-based file line of a top-level ``key:``; the first YAML line if it is not found
    (e.g. a flow mapping), since the value is still somewhere in the frontmatter."""
    key_at_line_start = re.compile(rf"[\"']?{re.escape(key)}[\"']?[ \t]*:")
    for index, line in enumerate(_LINE_BREAK.split(yaml_text)):
        if key_at_line_start.match(line):
            return index + 2  # +1 for 1-based, +1 for the opening fence
    return 2


def first_timestamp(frontmatter: dict, keys: tuple[str, ...]) -> str | None:
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


def date_in_file_name(path: str) -> str | None:
    """Daily notes carry their date only in the name, e.g. 'Daily/2024-03-15.md'."""
    for match in _FILE_NAME_DATE.finditer(PurePosixPath(path).stem):
        try:
            return date(*map(int, match.groups())).isoformat()
        except ValueError:
            continue
    return None


def collect_frontmatter_links(frontmatter: dict, yaml_text: str, note: ParsedNote) -> None:
    """Wikilinks in frontmatter values count like body ones (e.g. ``up: "[[Lumen]]"``)."""
    line_starts = [0] + [found.end() for found in _LINE_BREAK.finditer(yaml_text)]
    cursor = 0
    for key, value in frontmatter.items():
        for string in _nested_strings(value):
            for match in WIKILINK_SOURCE.finditer(string):
                parts = wikilink_parts(match.group(2))
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


RELATION_NAME = r"[A-Za-z][A-Za-z0-9_]*"


_FRONTMATTER_RELATION = re.compile(
    rf"\s*(?:(?P<subject>\[\[[^\[\]\n]+\]\]|this)\s+)?(?P<relation>{RELATION_NAME})"
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
        elif (parts := wikilink_parts(side[2:-2])) is not None:
            sides.append(parts[0])
        else:
            return None
    if sides == ["", ""]:
        return None
    return TypedRelation(sides[0], match.group("relation").upper(), sides[1], line=0)

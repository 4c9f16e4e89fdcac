"""Obsidian's inline syntax as markdown-it rules: wikilinks, embeds and tags, with the
offsets they were written at."""

from __future__ import annotations

import re
import threading
import unicodedata
from collections.abc import Callable

from markdown_it import MarkdownIt
from markdown_it.rules_inline import autolink, image, link, linkify
from markdown_it.rules_inline.state_inline import StateInline

from jarvis_core.sources.vault.markdown import new_markdown_parser

WIKILINK_SOURCE = re.compile(r"(!?)\[\[([^\[\]\n]+)\]\]")


def wikilink_parts(inner: str) -> tuple[str, str | None, str | None, str | None] | None:
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
    match = WIKILINK_SOURCE.match(state.src, state.pos, state.posMax)
    if match is None or (parts := wikilink_parts(match.group(2))) is None:
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
    end = tag_end(src, start + 1, state.posMax)
    tag = valid_tag(src[start + 1 : end])
    if tag is None:
        return False
    if not silent:
        token = state.push("tag", "", 0)
        token.content = src[start:end]
        token.meta = {"tag": tag, "offset": start}
    state.pos = end
    return True


def tag_end(text: str, start: int, limit: int) -> int:
    """End of the run of tag characters: letters (with their combining marks), digits, _ - /."""
    end = start
    while end < limit and (
        text[end].isalnum() or text[end] in "_-/" or unicodedata.category(text[end]).startswith("M")
    ):
        end += 1
    return end


def valid_tag(run: str) -> str | None:
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


def note_parser() -> MarkdownIt:
    """One parser per thread: building one costs far more than parsing a note, and the
    linkify matcher inside keeps per-call state, so threads must not share it."""
    parser = getattr(_per_thread, "parser", None)
    if parser is None:
        parser = _per_thread.parser = _build_parser()
    return parser

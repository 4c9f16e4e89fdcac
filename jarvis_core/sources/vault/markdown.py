"""The one markdown-it configuration every part of Jarvis parses notes with."""

from markdown_it import MarkdownIt


def new_markdown_parser() -> MarkdownIt:
    """CommonMark plus GFM tables and strikethrough, with bare-URL detection.

    Callers add Obsidian syntax (wikilinks, tags) as inline rules; block structure
    (headings, fences, paragraphs, lists) is CommonMark's and is what chunking follows.
    """
    return MarkdownIt("commonmark", {"linkify": True}).enable(["table", "strikethrough", "linkify"])

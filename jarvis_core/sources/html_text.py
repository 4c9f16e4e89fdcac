"""HTML as the text Jarvis indexes: markdown headings (``#``) so the chunker splits on them,
lists, tables and code blocks kept, no markup escaping (``station_id`` must stay searchable),
and links reduced to their text unless the caller keeps external URLs.

Mail bodies and Confluence pages both go through here (``markdownify`` over BeautifulSoup with
the standard library's ``html.parser``, which keeps Confluence's ``ac:``/``ri:`` tag names).
"""

from __future__ import annotations

import re

from bs4 import BeautifulSoup, Comment, Tag
from markdownify import ATX, MarkdownConverter

_BLANK_RUNS = re.compile(r"\n[ \t]*\n(?:[ \t]*\n)+")
_TRAILING_SPACE = re.compile(r"[ \t]+\n")
_DROPPED = ("head", "script", "style", "title", "meta", "link", "noscript", "template")


def parse_html(html: str) -> BeautifulSoup:
    return BeautifulSoup(html, "html.parser")


class TextConverter(MarkdownConverter):
    """markdownify set up for indexing; ``external_links`` keeps ``[text](url)`` for http(s)
    links whose text is not the URL itself (wiki pages cite GitHub issues that way), and
    ``layout_tables`` renders tables as plain lines (mail HTML uses tables for layout)."""

    def __init__(self, *, external_links: bool = False, layout_tables: bool = False) -> None:
        super().__init__(heading_style=ATX, bullets="-", escape_asterisks=False,
                         escape_underscores=False, escape_misc=False, autolinks=False,
                         wrap=True, wrap_width=None, table_infer_header=True)
        self.external_links = external_links
        self.layout_tables = layout_tables

    def convert_a(self, el, text, parent_tags):
        href = str(el.get("href") or "")
        label = text.strip()
        if (self.external_links and href.startswith(("http://", "https://"))
                and label and label != href and "_noformat" not in parent_tags):
            return f"[{label}]({href})"
        return text

    def convert_img(self, el, text, parent_tags):
        return ""

    def convert_table(self, el, text, parent_tags):
        return "\n\n" + text.strip("\n") + "\n\n" if self.layout_tables else \
            super().convert_table(el, text, parent_tags)

    def convert_tr(self, el, text, parent_tags):
        return " ".join(text.split()) + "\n" if self.layout_tables else \
            super().convert_tr(el, text, parent_tags)

    def convert_td(self, el, text, parent_tags):
        return " " + text.strip() + " " if self.layout_tables else \
            super().convert_td(el, text, parent_tags)

    convert_th = convert_td


def tidy(text: str) -> str:
    """No trailing spaces, at most one blank line in a row, no blank lines at the ends."""
    text = _TRAILING_SPACE.sub("\n", text.replace("\xa0", " ").replace("\r\n", "\n"))
    return _BLANK_RUNS.sub("\n\n", text).strip("\n")


def soup_to_text(soup: BeautifulSoup | Tag, converter: TextConverter) -> str:
    """The text of a parsed document or element; the tree is modified (non-content removed)."""
    for comment in soup.find_all(string=lambda node: isinstance(node, Comment)):
        comment.extract()
    for tag in soup.find_all(_DROPPED):
        tag.decompose()
    return tidy(converter.convert_soup(soup))


def html_to_text(html: str, *, external_links: bool = False, layout_tables: bool = False) -> str:
    return soup_to_text(parse_html(html), TextConverter(external_links=external_links,
                                                        layout_tables=layout_tables))

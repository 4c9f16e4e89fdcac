"""The README and the docs/ pages as the tests read them (rendered by markdown-it, as a
Markdown viewer would): their shell blocks, each block's ``docs-test`` marker, their
headings and their links.

Every ```bash block is a list of commands run by tests/e2e/test_documented_commands.py,
unless an HTML comment right before it says otherwise:

- ``<!-- docs-test: ci -->``: a set-up command that .ci/run runs verbatim (checked);
- ``<!-- docs-test: server URL -->``: a long-running server, started and checked for an
  HTTP answer at URL, then stopped;
- ``<!-- docs-test: skip: REASON -->``: not run, for the reason given.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from markdown_it import MarkdownIt

PROJECT_ROOT = Path(__file__).resolve().parent.parent
PAGES = (PROJECT_ROOT / "README.md", *sorted((PROJECT_ROOT / "docs").glob("*.md")))
SHELL = "bash"
# Fence languages a reader would take for commands: only ```bash blocks are shell blocks.
OTHER_SHELLS = ("sh", "shell", "console", "zsh", "shell-session")
_MARKER = re.compile(
    r"^<!--\s*docs-test:\s*(?P<kind>ci|server|skip)\b\s*:?\s*(?P<arg>.*?)\s*-->\s*$", re.DOTALL)


@dataclass(frozen=True)
class ShellBlock:
    page: Path
    line: int  # 1-based line of the opening fence
    commands: tuple[str, ...]
    marker: str | None  # "ci", "server", "skip" or None: run
    argument: str  # the server's URL, the skip's reason

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(PROJECT_ROOT)}:{self.line}"


@dataclass(frozen=True)
class Fence:
    page: Path
    line: int
    language: str
    text: str


@cache
def _tokens(page: Path):
    return MarkdownIt("commonmark").enable("table").parse(page.read_text(encoding="utf-8"))


def fences(page: Path) -> list[Fence]:
    return [Fence(page, token.map[0] + 1, token.info.strip(), token.content)
            for token in _tokens(page) if token.type == "fence"]


def markers(page: Path) -> list[tuple[int, str]]:
    """Every ``docs-test`` comment of ``page``: its line and its text."""
    return [(token.map[0] + 1, token.content.strip()) for token in _tokens(page)
            if token.type == "html_block" and "docs-test" in token.content]


def shell_blocks(page: Path) -> list[ShellBlock]:
    """The page's ```bash blocks with the marker right before each, if any. A ``docs-test``
    comment that is malformed raises ValueError naming its line."""
    tokens = _tokens(page)
    blocks = []
    for index, token in enumerate(tokens):
        if token.type != "fence" or token.info.strip() != SHELL:
            continue
        before = tokens[index - 1] if index else None
        marker, argument = None, ""
        if before is not None and before.type == "html_block" and "docs-test" in before.content:
            found = _MARKER.match(before.content.strip())
            if found is None:
                raise ValueError(f"{page.name}:{before.map[0] + 1}: a docs-test marker is "
                                 "'ci', 'server URL' or 'skip: reason'")
            marker, argument = found["kind"], " ".join(found["arg"].split())
        blocks.append(ShellBlock(page, token.map[0] + 1, commands(token.content), marker,
                                 argument))
    return blocks


def commands(block: str) -> tuple[str, ...]:
    """A block's commands: its lines with backslash continuations joined, without blank and
    comment-only lines."""
    joined = re.sub(r"\s*\\\n\s*", " ", block)
    return tuple(line.strip() for line in joined.splitlines()
                 if line.strip() and not line.lstrip().startswith("#"))


def _unquoted(command: str):
    """The characters of ``command`` that bash reads outside quotes and escapes, with
    their index."""
    quote, escaped = None, False
    for index, char in enumerate(command):
        if escaped:
            escaped = False
        elif char == "\\" and quote != "'":
            escaped = True
        elif quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        else:
            yield index, char


def without_comment(command: str) -> str:
    """``command`` up to an unquoted ``#`` that starts a word (bash's comment rule)."""
    for index, char in _unquoted(command):
        if char == "#" and (index == 0 or command[index - 1].isspace()):
            return command[:index].rstrip()
    return command


def has_shell_operators(command: str) -> bool:
    """Whether ``command`` (without its comment) is more than one program with its
    arguments: an unquoted pipe, list, redirection or subshell, or a command substitution."""
    command = without_comment(command)
    return "$(" in command or "`" in command or any(
        char in "|&;<>()" for _, char in _unquoted(command))


def headings(page: Path) -> list[str]:
    """The anchors GitHub gives the page's headings: lower case, punctuation dropped,
    spaces as hyphens, ``-1``, ``-2``… for repeats."""
    tokens = _tokens(page)
    anchors, seen = [], Counter()
    for index, token in enumerate(tokens):
        if token.type != "heading_open":
            continue
        text = "".join(child.content for child in tokens[index + 1].children
                       if child.type in ("text", "code_inline"))
        slug = re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")
        anchors.append(f"{slug}-{seen[slug]}" if seen[slug] else slug)
        seen[slug] += 1
    return anchors


def links(page: Path) -> list[str]:
    """Every link target of the rendered page."""
    return [child.attrs["href"] for token in _tokens(page) if token.type == "inline"
            for child in token.children or () if child.type == "link_open"]

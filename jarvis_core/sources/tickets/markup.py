"""Jira text to markdown: wiki markup (REST v2) in one linear pass, and Atlassian Document
Format (REST v3) to text.

Wiki markup replaces jira2markdown's pyparsing grammar, which backtracks and took minutes on
some real tickets. Blocks are found first: ``{code}``/``{noformat}`` (kept verbatim as fenced
code), ``{quote}`` and ``{panel}`` (their text converted again), then line by line lists,
tables, headings, ``bq.`` quotes and rules; the text of each line goes through
``markup_inline``. The output agrees with jira2markdown's on most tickets (see
``jarvis_bench.jira_markup`` for the differences and why). A time budget per item turns a
pathological item into its text as written, with a warning, instead of blocking a run.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from jarvis_core.sources.tickets.markup_inline import (
    BudgetExceeded,
    Line,
    Work,
    convert_inline,
    image_end,
)

BUDGET_SECONDS = 0.2
_MAX_DEPTH = 6  # quote > panel > list item ... deeper text is converted inline only
_ADF_WRAP_DEPTH = 64
_MACRO = re.compile(r"\{(?:(code|noformat)|(quote)\}|(panel)[:}])")
_FENCE_RUN = re.compile(r"`{3,}")
_CODE_LANGUAGE = re.compile(r":([A-Za-z0-9#+]+)(?=[}|])")
_HEADING = re.compile(r"[ \t]*h([1-6])\. (.*)")
_BLOCKQUOTE = re.compile(r"[ \t]*bq\. (.*)")
_RULER = re.compile(r"[ \t]*----[ \t]*")
_BLOCK_START = re.compile(r"[ \t]*(?:[-*#|]|h[1-6]\. |bq\. )")  # worth a closer look
_CELL_BREAK = re.compile(r"[|\[!]")
# (kind, nested marker, bullets, text): the bullets are one character repeated; a list of the
# other kind may nest one level with its own marker first (#* is a bullet in a numbered list).
_LIST_ROWS = (("unordered", re.compile(r"[ \t]*(#?)(\*+|-+) (.*)")),
              ("ordered", re.compile(r"[ \t]*(\*?)(#+) (.*)")))
_LIST_STYLE = {"unordered": ("-", 2, 3, "#*-"), "ordered": ("1.", 3, 2, "*#")}


@dataclass(frozen=True)
class MarkupResult:
    """Markdown for one description or comment; ``warning`` says why it is the text as
    written (budget exceeded); ``steps`` is the work done, proportional to the text."""

    markdown: str
    warning: str | None = None
    steps: int = 0


def jira_to_markdown(text: str, *, budget_seconds: float = BUDGET_SECONDS) -> MarkupResult:
    """Markdown for Jira wiki markup; past ``budget_seconds`` the text as written."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    work = Work(budget_seconds)
    try:
        return MarkupResult(_convert(text, work, 0).strip("\n"), None, work.steps)
    except BudgetExceeded:
        return MarkupResult(text.strip("\n"), (
            f"wiki markup not converted: {len(text):,} characters exceeded the "
            f"{budget_seconds * 1000:g} ms budget; kept as written"), work.steps)


def _convert(text: str, work: Work, depth: int) -> str:
    """Blocks of ``text`` in order: macros rendered, the text between them line by line."""
    out: list[str] = []
    position, starts_line = 0, True
    for start, end, block in _macros(text, work, depth):
        out.append(_lines(text[position:start], starts_line, work, depth))
        _break_line(out)
        out.append(block)
        if end < len(text) and text[end] != "\n":
            out.append("\n")  # what follows the closing tag starts a line of its own
        position, starts_line = end, False
    out.append(_lines(text[position:], starts_line, work, depth))
    return "".join(out)


def _break_line(out: list[str]) -> None:
    """Start a new line unless the output is empty or already at one."""
    last = next((piece for piece in reversed(out) if piece), "")
    if last and not last.endswith("\n"):
        out.append("\n")


def _macros(text: str, work: Work, depth: int) -> Iterator[tuple[int, int, str]]:
    """(start, end, markdown) of each closed {code}, {noformat}, {quote} and {panel}.

    A macro ends at the first closing tag after it; once a kind has no closing tag left,
    its later openings are text, so each search covers new ground only."""
    line, unclosed, position = Line(text, work), set(), 0
    while (found := _MACRO.search(text, position)) is not None:
        work.add(found.start() - position + 1)
        kind = found.group(1) or found.group(2) or found.group(3)
        tag_end = found.end() if kind == "quote" else line.find("}", found.start()) + 1
        closing = "{" + kind + "}"
        close = -1 if kind in unclosed or tag_end == 0 else text.find(closing, tag_end)
        if close < 0:
            unclosed.add(kind)
            position = found.start() + 1
            continue
        work.add(close - tag_end + len(closing))
        body = text[tag_end:close]
        tag = text[found.start():tag_end]
        yield found.start(), close + len(closing), _render_macro(kind, tag, body, work, depth)
        position = close + len(closing)


def _render_macro(kind: str, tag: str, body: str, work: Work, depth: int) -> str:
    """Code verbatim in a fence labelled with its language (never Java by default, as
    jira2markdown does: every code ticket would match a search for "java");
    quote and panel text converted again, with their lines' indentation dropped."""
    if kind in ("code", "noformat"):
        language = _CODE_LANGUAGE.match(tag, len("{code")) if kind == "code" else None
        label = language.group(1) if language else ""
        return _fenced(body.strip("\n"), label)
    text = _convert("\n".join(line.lstrip() for line in body.strip().splitlines()), work,
                    depth + 1).strip("\n") if depth < _MAX_DEPTH else body.strip()
    if kind == "quote":  # a blank line after it, or markdown reads on into the quote
        return "\n".join(f"> {line}".rstrip() for line in text.split("\n")) + "\n"
    title = _panel_title(tag)
    return (f"**{title}**\n" if title else "") + text


def _fenced(code: str, label: str) -> str:
    """A fenced block longer than any backtick run inside, so the code cannot close it."""
    longest = max((len(run.group()) for run in _FENCE_RUN.finditer(code)), default=2)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{label}\n{code}\n{fence}"


def _panel_title(tag: str) -> str | None:
    """The title= parameter of {panel:title=...|borderStyle=...}, if any."""
    for parameter in tag[len("{panel:"):-1].split("|") if tag.startswith("{panel:") else []:
        name, _, value = parameter.partition("=")
        if name.strip().lower() == "title" and value.strip():
            return value.strip()
    return None


def _lines(text: str, starts_line: bool, work: Work, depth: int) -> str:
    """Line-level blocks of text between macros; a first line that continues a macro's
    line is plain inline text."""
    lines, out = text.split("\n"), []
    index = 0
    if not starts_line:
        out.append(convert_inline(lines[0], work))
        index = 1
    while index < len(lines):
        line = lines[index]
        work.add()
        if not _BLOCK_START.match(line):
            out.append(convert_inline(line, work))
            index += 1
        elif depth < _MAX_DEPTH and (row := _list_row(line)) is not None and row[2] == 1:
            index = _render_list(lines, index, out, work, depth)
        elif line.startswith("|"):
            index = _render_table(lines, index, out, work)
        else:
            out.append(_render_line(line, work))
            index += 1
            if _quote_ends(line, lines, index):
                out.append("")  # or markdown would read the next line as quoted too
    return "\n".join(out)


def _quote_ends(line: str, lines: list[str], index: int) -> bool:
    """A bq. line followed by a line of text that is not quoted."""
    return (index < len(lines) and bool(lines[index].strip())
            and _BLOCKQUOTE.fullmatch(line) is not None
            and _BLOCKQUOTE.fullmatch(lines[index]) is None)


def _render_line(line: str, work: Work) -> str:
    if heading := _HEADING.fullmatch(line):
        return "#" * int(heading.group(1)) + " " + convert_inline(heading.group(2), work)
    if quote := _BLOCKQUOTE.fullmatch(line):
        return "> " + convert_inline(quote.group(1), work)
    if _RULER.fullmatch(line):
        return "\n----\n"
    return convert_inline(line, work)


def _list_row(line: str, kind: str | None = None) -> tuple[str, int, int, str] | None:
    """(kind, nested markers, depth, item text) when ``line`` is a list row."""
    for row_kind, pattern in _LIST_ROWS:
        if kind in (None, row_kind) and (row := pattern.fullmatch(line)):
            return row_kind, len(row.group(1)), len(row.group(2)), row.group(3)
    return None


def _render_list(lines: list[str], index: int, out: list[str], work: Work, depth: int) -> int:
    """One list: rows that nest at most one level deeper (or step back) than the row before,
    each with its continuation lines, up to a blank line; returns the next line's index."""
    kind = _list_row(lines[index])[0]
    bullet, indent, nested_indent, stops = _LIST_STYLE[kind]
    level = 0
    while index < len(lines):
        row = _list_row(lines[index], kind)
        if row is None or not max(1, level - 1) <= row[2] <= level + 1:
            break
        _, nested, level, first = row
        index += 1
        item = [first]
        while index < len(lines) and lines[index].strip() and (
                lines[index].lstrip(" \t")[:1] not in stops):
            item.append(lines[index])
            index += 1
        width = nested * nested_indent + level * indent
        rendered = _lines("\n".join(item), True, work, depth + 1).split("\n")
        out.append(" " * (width - indent) + f"{bullet} " + rendered[0])
        out.extend(" " * width + text if text else "" for text in rendered[1:])
        work.add(len(item))
        if index < len(lines) and not lines[index].strip():
            break
    return index


def _render_table(lines: list[str], index: int, out: list[str], work: Work) -> int:
    """Rows starting with | (a row whose last cell is open takes the next lines), as a
    markdown table whose first row is the header; returns the next line's index."""
    texts = []
    while index < len(lines) and lines[index].startswith("|"):
        row = [lines[index].rstrip()]
        index += 1
        while (not row[-1].endswith("|") and index < len(lines) and lines[index].strip()
               and not lines[index].startswith("|")):
            row.append(lines[index].rstrip())
            index += 1
        texts.append("\n".join(row))
    rows = [_cells(text, work) for text in texts]
    filled = [row for row in rows if row]
    if not filled:  # only bare | lines: no table to make
        out.extend(texts)
        return index
    columns = max(len(row) for row in rows)
    rendered = ["|" + "|".join(_cell_markdown(cell, work) for cell in row) + "|"
                for row in filled]
    rendered[0] += "|" * (columns - len(filled[0]))
    out.extend(["", rendered[0], "|" + "---|" * columns, *rendered[1:], ""])
    return index


def _cells(row: str, work: Work) -> list[str]:
    """Cells of a row split at | and || (not inside [links] or !images!)."""
    line, cells = Line(row, work), []
    start = position = 2 if row.startswith("||") else 1
    while (found := _CELL_BREAK.search(row, position)) is not None:
        work.add(found.start() - position + 1)
        at = found.start()
        if row[at] == "[":
            close = line.find("]", at + 1)
            position = close + 1 if close >= 0 else at + 1
        elif row[at] == "!":
            end = image_end(line, at)
            position = end if end >= 0 else at + 1
        else:
            cells.append(row[start:at])
            start = position = at + (2 if row.startswith("||", at) else 1)
    if row[start:]:
        cells.append(row[start:])
    return cells


def _cell_markdown(cell: str, work: Work) -> str:
    """A cell on one line: its lines and line breaks joined with <br>."""
    return "<br>".join(convert_inline(text, work) for text in cell.split("\n")).replace(
        "\n", "<br>")


def adf_to_text(document: object) -> str:
    """Text of an Atlassian Document Format tree (Jira REST v3 rich text) as light markdown.

    Never raises: nodes that are not objects are skipped, bad attributes fall back to
    defaults, and the walk keeps its own stack, so any depth is fine; below
    ``_ADF_WRAP_DEPTH`` nodes add their text without markers, so the time stays linear."""
    leaf = _adf_leaf(document)
    if leaf is not None:
        return leaf
    top: list[str] = []
    # frames: node, its children, its text parts, its parent's parts (None: no wrapping)
    stack: list[tuple[object, Iterator[object], list[str], list[str] | None]] = [
        (document, _adf_children(document), [], top)]
    on_path = {id(document)}
    while stack:
        node, children, parts, parent_parts = stack[-1]
        child = next(children, None)
        if child is None:
            stack.pop()
            on_path.discard(id(node))
            if parent_parts is not None:
                parent_parts.append(_adf_wrap(node, "".join(parts)))
            continue
        leaf = _adf_leaf(child)
        if leaf is not None:
            parts.append(leaf)
        elif id(child) not in on_path:  # a node that contains itself is read once
            on_path.add(id(child))
            deep = len(stack) >= _ADF_WRAP_DEPTH
            stack.append((child, _adf_children(child), parts if deep else [],
                          None if deep else parts))
    return "".join(top)


def _adf_children(node: object) -> Iterator[object]:
    if isinstance(node, list):
        return (child for child in node if child is not None)
    content = node.get("content") if isinstance(node, dict) else None
    return (child for child in content if child is not None) if isinstance(
        content, list) else iter(())


def _adf_attrs(node: dict) -> dict:
    attrs = node.get("attrs")
    return attrs if isinstance(attrs, dict) else {}


def _adf_leaf(node: object) -> str | None:
    """Text of a node without children, None for a container."""
    if isinstance(node, list):
        return None
    if not isinstance(node, dict):
        return ""
    kind, attrs = node.get("type"), _adf_attrs(node)
    if kind == "text":
        text = node.get("text")
        return text if isinstance(text, str) else ""
    if kind == "hardBreak":
        return "\n"
    if kind in ("mention", "emoji", "status"):
        return str(attrs.get("text") or attrs.get("shortName") or "")
    if kind in ("inlineCard", "blockCard"):
        return str(attrs.get("url") or "")
    return None


def _adf_wrap(node: object, inner: str) -> str:
    """A container's text around its children's text."""
    if not isinstance(node, dict):
        return inner
    kind = node.get("type")
    if kind == "heading":
        return "#" * _heading_level(_adf_attrs(node).get("level")) + " " + inner + "\n\n"
    if kind == "listItem":
        return "- " + inner.strip() + "\n"
    if kind == "codeBlock":
        language = _adf_attrs(node).get("language")
        return _fenced(inner, language if isinstance(language, str) else "") + "\n\n"
    if kind in ("bulletList", "orderedList", "tableRow"):
        return inner + "\n"
    if kind in ("tableCell", "tableHeader"):
        return inner.strip() + " | "
    if kind in ("paragraph", "blockquote", "panel", "rule", "table"):
        return inner + "\n\n"
    return inner


def _heading_level(level: object) -> int:
    """1-6 from a level attribute however it is written; 2 when it is not a number."""
    try:
        return min(6, max(1, int(level)))  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        return 2

"""Parsing one source file into its symbols and references, or saying why not: a file that
is too large, minified, binary, generated or vendored is skipped; one with syntax errors, too
deep or over its time budget is partial (what was read is kept). Every case is bounded: the
size before parsing, the parse by tree-sitter's progress callback, the walk by an explicit
stack and the clock."""

from __future__ import annotations

import re
import time

from tree_sitter import Node, Parser, Tree

from jarvis_core.sources.repo.code.languages import grammar_for, language_name
from jarvis_core.sources.repo.code.model import PARSED, PARTIAL, SKIPPED, ParsedFile
from jarvis_core.sources.repo.code.syntax import FileReader
from jarvis_core.sources.repo.settings import CodeSettings
from jarvis_core.sources.repo.sync import matches

# A comment line in a file's first bytes that marks it generated: Go's convention (a tool
# named, then the capitals asking not to edit), the capitals alone, or Facebook's at-tag.
GENERATED = re.compile(rb"^[ \t]*(?://|#|/?\*+|<!--|--)[ \t]*(@generated\b|DO NOT EDIT\b|"
                       rb".*\b(?i:generated)\b.*\bDO NOT EDIT\b)", re.MULTILINE)
_HEAD_BYTES = 2048
_MIN_BYTES_FOR_MEAN = 4096  # a short file with one long line is not minified
_READ_BYTES = 1 << 16


DEFAULT_LIMITS = CodeSettings()
# Raised when the same file would give other rows (new kinds, fields or languages): every
# repository's code is parsed again.
PARSER_VERSION = 1


def parse_file(path: str, data: bytes, limits: CodeSettings = DEFAULT_LIMITS
               ) -> ParsedFile | None:
    """The symbols and references of the file at ``path`` (repository-relative) holding
    ``data``; None when it is in no language read here."""
    grammar = grammar_for(path)
    if grammar is None:
        return None
    language = language_name(grammar)
    reason = skip_reason(path, data, limits)
    if reason is not None:
        return ParsedFile(language, SKIPPED, reason)
    deadline = time.monotonic() + limits.time_budget_seconds
    tree = _parse(grammar.language, data, deadline)
    if tree is None:
        return ParsedFile(language, SKIPPED, f"parsing took over the time budget of "
                                              f"{limits.time_budget_seconds:g} s")
    reader = FileReader(grammar, data, limits.max_depth, deadline)
    symbols, references = reader.read(tree.root_node)
    problems = [problem for problem in (_first_error(tree.root_node), reader.truncated)
                if problem]
    return ParsedFile(language, PARTIAL if problems else PARSED, "; ".join(problems) or None,
                      symbols, references)


def skip_reason(path: str, data: bytes, limits: CodeSettings) -> str | None:
    """Why a file is not parsed at all, or None."""
    excluded = next((pattern for pattern in limits.exclude if matches(path, (pattern,))), None)
    if excluded is not None:
        return f"excluded as vendored or built (pattern {excluded!r})"
    if len(data) > limits.max_file_bytes:
        return f"{len(data)} bytes, over the limit of {limits.max_file_bytes}"
    if b"\0" in data:
        return "binary: it holds NUL bytes"
    marker = GENERATED.search(data[:_HEAD_BYTES])
    if marker is not None:
        return f"generated (marked {marker.group(1).decode('utf-8', 'replace')[:60]!r})"
    lines = data.split(b"\n")
    longest = max(len(line) for line in lines)
    if longest > limits.max_line_length:
        return (f"minified or data: a line of {longest} bytes, over the limit of "
                f"{limits.max_line_length}")
    mean = len(data) / len(lines)
    if len(data) >= _MIN_BYTES_FOR_MEAN and mean > limits.max_mean_line_length:
        return (f"minified: lines of {mean:.0f} bytes on average, over the limit of "
                f"{limits.max_mean_line_length}")
    return None


def _parse(language, data: bytes, deadline: float) -> Tree | None:
    """The syntax tree, or None when parsing outlasts the deadline (tree-sitter calls the
    progress callback only when it reads through a callback, not from a bytes object)."""
    parser = Parser(language)
    try:
        return parser.parse(lambda offset, _point: data[offset:offset + _READ_BYTES],
                            progress_callback=lambda _offset, _errors:
                            time.monotonic() > deadline)
    except ValueError:  # "Parsing failed": halted by the callback
        return None


def _first_error(root: Node) -> str | None:
    """Where the first syntax error is, if the tree has one."""
    if not root.has_error:
        return None
    node = root
    while True:
        bad = next((child for child in node.children
                    if child.is_error or child.is_missing or child.has_error), None)
        if bad is None or bad.is_error or bad.is_missing:
            at = bad or node
            return f"syntax errors (the first at line {at.start_point.row + 1})"
        node = bad

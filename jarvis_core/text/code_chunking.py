"""Chunks of one code symbol: its own code, headed by its qualified name, its file and its
signature, so every chunk of a long function still says what it is part of.

A symbol that fits the embedding model is one chunk. A longer one is cut at statement
boundaries: the lines at the body's own indentation start statements (a nested block goes
with the statement that opens it), packed greedily; only a statement too long on its own is
cut at its nested statements, then at lines. Chunks do not overlap: a statement is a
whole unit of meaning, and the repeated signature carries the context.
"""

from __future__ import annotations

import re

from jarvis_core.text.chunking import _CODE, Chunk, DocumentChunker
from jarvis_core.text.tokens import TokenCounter

_INDENT = re.compile(r"[ \t]*")
# A code document's path: the file's, then the symbol's id in it.
SYMBOL_SEPARATOR = "::"


def _indent(line: str) -> int:
    return len(_INDENT.match(line).group().expandtabs(4))


class CodeChunker(DocumentChunker):
    """Statements are the units, nested statements the places a big one is cut."""

    def __init__(self, body: str, counter: TokenCounter) -> None:
        super().__init__(body, counter, overlap_tokens=0)

    def _read_blocks(self) -> None:
        lines = self.body.splitlines(keepends=True)
        starts, at = [], 0
        for line in lines:
            starts.append(at)
            at += len(line)
        code_lines = [(start, _indent(line)) for start, line in zip(starts, lines, strict=True)
                      if line.strip()]
        body_indent = code_lines[1][1] if len(code_lines) > 1 else 0
        nested_indent = min((indent for _, indent in code_lines if indent > body_indent),
                            default=None)
        self.unit_starts = [0] + [start for start, indent in code_lines[1:]
                                  if indent <= body_indent]
        self.leaf_starts = [start for start, indent in code_lines
                            if nested_indent is None or indent <= nested_indent]
        self.leaf_kinds = [_CODE] * len(self.leaf_starts)


# The doc comment a code document's text starts with (jarvis_core/sources/repo/kind.py).
DOC_COMMENT = "// "


def signature_line(text: str) -> str:
    """The first line of a symbol's code after its doc comment: its declaration, as a
    heading."""
    return next((" ".join(line.split()) for line in text.splitlines()
                 if line.strip() and not line.startswith(DOC_COMMENT)), "")


def chunk_code(body: str, *, title: str, path: str, doc_key: str,
               counter: TokenCounter) -> list[Chunk]:
    """The chunks of one symbol's code ``body``; ``path`` is the code document's
    (``<file>::<symbol id>``), ``title`` its qualified name."""
    if not body.strip():
        return []
    chunker = CodeChunker(body, counter)
    units = [unit for _, section in chunker.sections() for unit in section]
    heading = (path.partition(SYMBOL_SEPARATOR)[0], signature_line(body))
    return chunker.chunks(title, doc_key, [(heading, units)])

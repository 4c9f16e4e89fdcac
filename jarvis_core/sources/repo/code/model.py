"""What reading a repository's source code yields, for every language: the symbols a file
defines and the references it makes (calls, imports, base types), as parsed from its syntax
tree. The raw tables (``code_files``, ``code_symbols``, ``code_references``) hold these rows;
the graph, the code chunks and the query side read them.

Lines are 1-based and inclusive. A symbol's ``symbol_id`` is its qualified name within the
file (``UserService.create_user``), with ``@<line>`` added when the file defines that
qualified name more than once (overloads, a property's getter and setter), so
``(source, path, symbol_id)`` names one symbol and ``symbol:<repo>/<path>::<symbol_id>`` is
its graph node: type ``symbol``, titled by its qualified name, with the properties ``kind``,
``name``, ``qualified_name``, ``symbol_id``, ``signature``, ``path``, ``start_line``,
``end_line`` and ``language``.
"""

from __future__ import annotations

from dataclasses import dataclass, field


def symbol_key(repo: str, path: str, symbol_id: str) -> str:
    """The graph node of a symbol (``repo_file_key`` is its file's)."""
    return f"symbol:{repo}/{path}::{symbol_id}"


def repo_file_key(repo: str, path: str) -> str:
    """The graph node of a file of a repository (a path of its history or at its head)."""
    return f"file:{repo}/{path}"


def code_doc_key(repo: str, path: str, symbol_id: str) -> str:
    """The document a symbol's code chunks belong to (one per symbol)."""
    return f"code:{repo}/{path}::{symbol_id}"

# Symbol kinds, the same words for every language.
MODULE, CLASS, INTERFACE, STRUCT, ENUM, TRAIT = "module", "class", "interface", "struct", \
    "enum", "trait"
FUNCTION, METHOD, CONSTANT = "function", "method", "constant"
TYPE = "type"  # a named type that is none of the above: Go `type X int`, a typedef, an alias
SYMBOL_KINDS = (MODULE, CLASS, INTERFACE, STRUCT, ENUM, TRAIT, FUNCTION, METHOD, CONSTANT, TYPE)

# Reference kinds.
CALL, IMPORT, EXTENDS, IMPLEMENTS = "call", "import", "extends", "implements"
REFERENCE_KINDS = (CALL, IMPORT, EXTENDS, IMPLEMENTS)

# A file's parse status: parsed cleanly; parsed with syntax errors (the symbols found are
# kept, with a warning); not parsed (too large, minified, binary, generated or vendored,
# over its time budget), with the reason.
PARSED, PARTIAL, SKIPPED = "parsed", "partial", "skipped"


@dataclass(frozen=True)
class Symbol:
    """One definition. ``signature`` is its declaration line(s) up to the body;
    ``doc`` its docstring or leading comment (comment markers removed); ``text`` its own
    code: the body with each nested symbol's body left out (its signature kept, then
    `...`), so a class's text is not its methods' text again. ``start_line`` is the line
    that names it (below its decorators or annotations, as ctags and editors point to it),
    ``end_line`` its last."""

    symbol_id: str
    kind: str
    name: str
    qualified_name: str
    signature: str
    doc: str
    start_line: int
    end_line: int
    parent: str | None            # the enclosing symbol's symbol_id; None at file level
    text: str


@dataclass(frozen=True)
class CodeReference:
    """A name a file uses: a call (``name`` is the called name, ``qualifier`` what it was
    called on as written: ``self``, ``UserService``, ``os.path``), an import (``name`` the
    module or path as written, ``qualifier`` the imported name or alias when one is), or a
    base type (extends / implements). ``scope`` is the symbol_id of the symbol it occurs
    in (None: file level)."""

    kind: str
    name: str
    qualifier: str | None
    scope: str | None
    line: int


@dataclass
class ParsedFile:
    """A file's symbols and references, its language and status (``reason`` says why it is
    partial or skipped)."""

    language: str
    status: str
    reason: str | None = None
    symbols: list[Symbol] = field(default_factory=list)
    references: list[CodeReference] = field(default_factory=list)

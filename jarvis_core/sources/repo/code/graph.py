"""The code graph of one repository, from its code tables' rows (a pure function): a node per
source file (``file:``) and per symbol (``symbol:``, model.py says its properties), and

- ``CONTAINS`` from a file to its top-level symbols and from a symbol to those nested in it;
- ``IMPORTS`` from a file to the files its imports lead to inside the repository
  (imports.py); an import from outside (the standard library, a package) is no edge and no
  node: a node per external module would join every file importing ``os`` or ``react``
  into one neighbourhood, and its name is as written, not canonical. The file node lists
  those modules instead (``external_imports``, as written, at most 100);
- ``CALLS`` from a symbol (or the file, for a call at file level) to the symbols it calls,
  and ``EXTENDS`` / ``IMPLEMENTS`` from a type to its bases, resolved by name (resolve.py):
  exact (same file, imported, ``self``) is confidence ``high`` (Edge ``EXPLICIT``,
  extractor ``code_name_high``); the one definition of that name elsewhere in the
  repository is ``medium`` (``INFERRED``, ``code_name_medium``). An ambiguous name is no
  edge but a broken link (reason ``ambiguous``) listing its candidates (at most 10), as a
  note's link to several notes is; a base that resolves to nothing is one too
  (``unresolved``); a call that resolves to nothing (a builtin, a library) is dropped.

Every edge's evidence text is ``path:line  construct`` (the symbol's signature, the call or
the import as written); its evidence is the chunks of the code document of the symbol it
starts from (``code_doc_key``) when the code is chunked.

Each source file is the origin of its subgraph: the edges and broken links that start in
it, and its symbols' nodes (``owned``), so re-parsing one file rewrites that file only. A
file's output includes how its names resolved, so when a definition elsewhere moves, is
renamed or becomes ambiguous, the fingerprint of every file whose calls it changes moves
too and exactly those files are rewritten.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from jarvis_core.sources.extraction import BrokenLink
from jarvis_core.sources.repo.code.imports import Import, ImportResolver
from jarvis_core.sources.repo.code.model import (
    CALL,
    EXTENDS,
    IMPLEMENTS,
    IMPORT,
    code_doc_key,
    repo_file_key,
    symbol_key,
)
from jarvis_core.sources.repo.code.resolve import AMBIGUOUS, HIGH, SymbolIndex
from jarvis_core.stores.graph.elements import EXPLICIT, INFERRED, Edge, Node

CONTAINS, IMPORTS, CALLS = "CONTAINS", "IMPORTS", "CALLS"
SYNTAX_EXTRACTOR, IMPORT_EXTRACTOR = "code_syntax", "code_import"
NAME_EXTRACTOR = "code_name_"  # + the confidence: code_name_high, code_name_medium
MAX_EXTERNAL_IMPORTS = 100
_RELATIONS = {CALL: CALLS, EXTENDS: "EXTENDS", IMPLEMENTS: "IMPLEMENTS"}


def file_node(repo: str, path: str, head: dict | None, **properties: object) -> Node:
    """A file of the repository's history or head (``head``: its repo_files row)."""
    key = repo_file_key(repo, path)
    return Node(key, "file", path, repo, {
        "path": path, "at_head": head is not None,
        **({"language": head["language"]} if head and head["language"] else {}),
        **properties})


def symbol_node(repo: str, row: dict) -> Node:
    return Node(symbol_key(repo, row["path"], row["symbol_id"]), "symbol",
                row["qualified_name"], repo, {
                    name: row[name] for name in (
                        "kind", "name", "qualified_name", "symbol_id", "signature", "path",
                        "start_line", "end_line", "language")})


@dataclass(frozen=True)
class CodeRows:
    """The code tables' rows of one repository (code_files, code_symbols, code_references:
    the columns the graph reads)."""

    files: Sequence[dict] = ()
    symbols: Sequence[dict] = ()
    references: Sequence[dict] = ()


NO_CODE = CodeRows()


@dataclass
class CodeGraph:
    """The code graph of one repository: ``origins`` are its files' nodes (one origin per
    file), ``owned`` maps each symbol node to its file's."""

    nodes: dict[str, Node]
    edges: list[Edge]
    broken: list[BrokenLink]
    owned: dict[str, str]
    origins: list[str]


def _shown(path: str, line: int, construct: str) -> str:
    return f"{path}:{line}  {construct.strip()}"[:300]


def _written_call(reference: dict) -> str:
    qualifier = reference["qualifier"]
    return f"{qualifier}.{reference['name']}()" if qualifier else f"{reference['name']}()"


class _Builder:
    """Collects the code graph's nodes, edges and broken links."""

    def __init__(self, repo: str, index: SymbolIndex,
                 chunk_ids: Callable[[str], tuple[str, ...]]) -> None:
        self.repo, self.index, self.chunk_ids = repo, index, chunk_ids
        self.nodes: dict[str, Node] = {}
        self.owned: dict[str, str] = {}
        self.edges: dict[tuple[str, str, str], Edge] = {}
        self.broken: dict[tuple, BrokenLink] = {}

    def evidence(self, key: str, first_only: bool) -> tuple[str, ...]:
        row = self.index.rows.get(key)
        if row is None:
            return ()
        chunks = self.chunk_ids(code_doc_key(self.repo, row["path"], row["symbol_id"]))
        return chunks[:1] if first_only else chunks

    def edge(self, src: str, relation: str, dst: str, confidence: str | None, origin: str,
             evidence: tuple[str, ...], text: str) -> None:
        """One edge per (src, relation, dst): the first met, unless a later one is surer."""
        extractor = (SYNTAX_EXTRACTOR if relation == CONTAINS else IMPORT_EXTRACTOR) \
            if confidence is None else NAME_EXTRACTOR + confidence
        edge = Edge(src, dst, relation, INFERRED if confidence not in (None, HIGH) else
                    EXPLICIT, extractor, origin, self.repo, evidence, text)
        known = self.edges.get((src, relation, dst))
        if known is None or (known.confidence == INFERRED and edge.confidence == EXPLICIT):
            self.edges[(src, relation, dst)] = edge

    def resolved(self, src: str, relation: str, found: tuple[tuple[str, ...], str | None],
                 origin: str, written: str, line: int, evidence: tuple[str, ...],
                 text: str) -> None:
        """Edges to what a name resolved to, or a broken link when it is ambiguous (or,
        for a base, resolves to nothing)."""
        keys, confidence = found
        if confidence == AMBIGUOUS or (not keys and relation != CALLS):
            link = BrokenLink(origin, self.repo, written,
                              "ambiguous" if keys else "unresolved",
                              keys, line, evidence)
            self.broken.setdefault((origin, line, written), link)
            return
        for key in keys:
            self.edge(src, relation, key, confidence, origin, evidence, text)


    def files(self, languages: Mapping[str, str], imports: dict[str, list[tuple[dict, Import]]],
              at_head: Mapping[str, dict]) -> None:
        """A node per file, listing its imports from outside; IMPORTS to the others."""
        repo = self.repo
        for path in sorted(languages):
            origin = repo_file_key(repo, path)
            external = sorted({ref["name"].strip() for ref, found in imports[path]
                               if not found.files})
            self.nodes[origin] = file_node(repo, path, at_head.get(path),
                                           external_imports=external[:MAX_EXTERNAL_IMPORTS])
            for ref, found in imports[path]:
                shown = f"import {ref['name']}" + (f" ({ref['qualifier']})"
                                                     if ref["qualifier"] else "")
                evidence = self.evidence(symbol_key(repo, path, ref["scope"]), False) \
                    if ref["scope"] else ()
                for target in found.files:
                    if target != path:
                        self.edge(origin, IMPORTS, repo_file_key(repo, target), None, origin,
                                  evidence, _shown(path, ref["line"], shown))

    def symbols(self, symbols: list[dict]) -> None:
        """A node per symbol, owned by its file; CONTAINS from its parent or its file (a Go
        method of a type declared in another file is its own file's)."""
        for row in symbols:
            node = symbol_node(self.repo, row)
            origin = repo_file_key(self.repo, row["path"])
            self.nodes[node.key], self.owned[node.key] = node, origin
            parent = self.index.owner[node.key]
            if parent not in self.index.rows or self.index.rows[parent]["path"] != row["path"]:
                parent = origin
            self.edge(parent, CONTAINS, node.key, None, origin, self.evidence(node.key, True),
                      _shown(row["path"], row["start_line"], row["signature"] or row["name"]))

    def bases(self, references: list[dict]) -> None:
        """EXTENDS and IMPLEMENTS, before the calls: a call on ``self`` looks in bases."""
        for ref in references:
            if ref["kind"] not in (EXTENDS, IMPLEMENTS) or "=" in ref["name"]:
                continue  # not a base, or a class statement's keyword (metaclass=ABCMeta)
            owner = self.index.owner_type(ref["path"], ref["scope"], ref["line"])
            if owner is None:
                continue
            found = self.index.base(ref["path"], ref["name"])
            if found[1] not in (None, AMBIGUOUS):
                self.index.bases[owner].extend(found[0])
            self.resolved(owner, _RELATIONS[ref["kind"]], found,
                          repo_file_key(self.repo, ref["path"]), ref["name"].strip(),
                          ref["line"], self.evidence(owner, True),
                          _shown(ref["path"], ref["line"],
                                 self.index.rows[owner]["signature"] or ref["name"]))

    def calls(self, references: list[dict]) -> None:
        for ref in references:
            if ref["kind"] != CALL:
                continue
            origin = repo_file_key(self.repo, ref["path"])
            caller = symbol_key(self.repo, ref["path"], ref["scope"]) if ref["scope"] \
                else origin
            if caller not in self.index.rows:
                caller = origin
            written = _written_call(ref)
            self.resolved(caller, CALLS, self.index.call(ref["path"], ref["scope"], ref["name"],
                                                         ref["qualifier"]),
                          origin, written, ref["line"], self.evidence(caller, False),
                          _shown(ref["path"], ref["line"], written))


def extract_code_graph(repo: str, rows: CodeRows, at_head: Mapping[str, dict],
                       chunk_ids: Callable[[str], tuple[str, ...]]) -> CodeGraph:
    """The code graph of one repository from its code tables' rows; ``at_head``: its
    repo_files rows by path; ``chunk_ids``: the chunk ids of a document key, in order."""
    languages = {row["path"]: row["language"] for row in rows.files}
    symbols = sorted((r for r in rows.symbols if r["path"] in languages),
                     key=lambda r: (r["path"], r["start_line"], r["symbol_id"]))
    references = sorted((r for r in rows.references if r["path"] in languages),
                        key=lambda r: (r["path"], r["line"], r["kind"], r["name"],
                                       r["qualifier"] or "", r["scope"] or ""))
    resolver = ImportResolver(languages)
    imports: dict[str, list[tuple[dict, Import]]] = {path: [] for path in languages}
    for ref in references:
        if ref["kind"] == IMPORT:
            imports[ref["path"]].append((ref, resolver.resolve(
                languages[ref["path"]], ref["path"], ref["name"], ref["qualifier"])))
    build = _Builder(repo, SymbolIndex(repo, languages, symbols, {
        path: [found for _, found in pairs] for path, pairs in imports.items()}), chunk_ids)
    build.files(languages, imports, at_head)
    build.symbols(symbols)
    build.bases(references)
    build.calls(references)
    return CodeGraph(build.nodes, list(build.edges.values()), list(build.broken.values()),
                     build.owned, [repo_file_key(repo, path) for path in sorted(languages)])

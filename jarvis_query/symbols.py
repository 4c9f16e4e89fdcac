"""Asking about code (get-symbol, `jarvis symbol`, search-code): which symbol a name means,
and of one symbol its definition and code, its callers and callees, its base and derived
types, and its story: the commits that changed it, the tickets those commits cite and the
documents that mention it, each an item `read` opens by its vault and path.

A symbol is three things under one name (jarvis_core/sources/repo/code/model.py): a row of
``code_symbols``, the graph node ``symbol:<repo>/<path>::<symbol_id>`` and the code document
``code:<repo>/<path>::<symbol_id>`` (path ``<path>::<symbol_id>``) whose chunks hold its
code. Everything here is read through the snapshot's cursor, so a profile's snapshot answers
over its own sources only (jarvis_query/scoped.py): a repository it cannot see has no
symbols, and an edge from a document of a source it cannot see (a note mentioning the
symbol, a ticket a commit cites) is not there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from jarvis_core.config import JarvisConfig
from jarvis_core.stores.graph.elements import EXPLICIT
from jarvis_core.stores.serving import NotPublished
from jarvis_query.documents import document_text
from jarvis_query.lookup import DocumentNotFound
from jarvis_query.results import Hit, sql_strings
from jarvis_query.snapshot import Snapshot
from jarvis_query.validation import QueryError, shown

CODE = "code"  # the code documents' source type
SYMBOL_PREFIX, CODE_PREFIX = "symbol:", "code:"
CALLS, EXTENDS, IMPLEMENTS, MODIFIES = "CALLS", "EXTENDS", "IMPLEMENTS", "MODIFIES"
# Edges that are the code's own structure, not something said about it.
_CODE_RELATIONS = (CALLS, EXTENDS, IMPLEMENTS, "CONTAINS", "IMPORTS", MODIFIES)
MAX_LISTED = 50  # items per list of an answer; ``counts`` says how many there are
_PATH_LINE = re.compile(r"(?P<file>[^\s:]+):(?P<line>[1-9][0-9]{0,6})")
_SEPARATORS = re.compile(r"::|#|->")
_CALL_SITE = re.compile(r"(?P<file>.+?):(?P<line>\d+)(?:\s|$)")  # an edge's "path:line  code"
_SYMBOL_COLUMNS = ("source", "path", "symbol_id", "kind", "name", "qualified_name",
                   "signature", "doc", "start_line", "end_line", "parent", "language")
# How a name matched, best first: the first kind of match that finds anything decides; a
# path:line means the innermost symbol whose lines hold it.
_MATCHES = f"""
    WITH named AS (
        SELECT {", ".join(_SYMBOL_COLUMNS)},
               CASE WHEN source || '/' || path || '::' || symbol_id IN (SELECT unnest($keys))
                         OR path || '::' || symbol_id = $raw THEN 0
                    WHEN $line IS NOT NULL AND (path = $file OR ends_with(path, '/' || $file))
                         AND $line BETWEEN start_line AND end_line THEN 1
                    WHEN qualified_name = $name OR name = $name THEN 2
                    WHEN ends_with(qualified_name, '.' || $name) THEN 3
                    WHEN lower(qualified_name) = lower($name) OR lower(name) = lower($name)
                        THEN 4 END AS how
        FROM code_symbols WHERE source IN (SELECT unnest($repos)))
    SELECT {", ".join(_SYMBOL_COLUMNS)} FROM named WHERE how IS NOT NULL
    QUALIFY how = min(how) OVER ()
        AND (how <> 1 OR end_line - start_line = min(CASE WHEN how = 1
                                                          THEN end_line - start_line END)
                                                  OVER (PARTITION BY source, path))
    ORDER BY source, path, start_line, symbol_id"""
# The edges touching a node, with the node at their other end and, when that node is a
# document (a symbol's: its code document), where to open it.
_EDGES = """
    WITH near AS (
        SELECT e.src = $key AS outgoing, e.relation, e.confidence, e.evidence_text,
               CASE WHEN e.src = $key THEN e.dst ELSE e.src END AS other
        FROM graph_edges e WHERE (e.src = $key OR e.dst = $key) AND e.src <> e.dst),
    nodes AS (SELECT node_key, any_value(type) AS type, any_value(title) AS title
              FROM graph_nodes WHERE node_key IN (SELECT other FROM near) GROUP BY node_key)
    SELECT near.outgoing, near.relation, near.confidence, near.evidence_text, near.other,
           n.type, n.title, d.source, d.path, d.source_type, d.modified_at
    FROM near JOIN nodes n ON n.node_key = near.other
    LEFT JOIN documents d ON d.doc_key = CASE WHEN starts_with(near.other, 'symbol:')
                                              THEN 'code:' || substr(near.other, 8)
                                              ELSE near.other END
    ORDER BY d.modified_at DESC NULLS LAST, near.evidence_text, near.other"""
_EDGE_COLUMNS = ("outgoing", "relation", "confidence", "evidence_text", "key", "type",
                 "title", "vault", "path", "source_type", "modified_at")


class SymbolNotFound(QueryError):
    """No symbol in the repositories asked for has the name."""


def symbol_node_key(doc_key: str) -> str:
    """The graph node of a document: a code document's is its symbol's, any other's its
    own key."""
    return SYMBOL_PREFIX + doc_key.removeprefix(CODE_PREFIX) \
        if doc_key.startswith(CODE_PREFIX) else doc_key


def document_key(node_key: str) -> str:
    """The document of a graph node: a symbol's is its code document (``symbol_node_key``
    the other way round)."""
    return CODE_PREFIX + node_key.removeprefix(SYMBOL_PREFIX) \
        if node_key.startswith(SYMBOL_PREFIX) else node_key


@dataclass(frozen=True)
class Symbol:
    """A ``code_symbols`` row: ``source`` is its repository, ``path`` its file."""

    source: str
    path: str
    symbol_id: str
    kind: str
    name: str
    qualified_name: str
    signature: str | None
    doc: str | None
    start_line: int
    end_line: int
    parent: str | None
    language: str | None

    @property
    def document(self) -> str:
        """Its code document's path in the repository (what `read` opens with the vault)."""
        return f"{self.path}::{self.symbol_id}"

    @property
    def key(self) -> str:
        return f"{SYMBOL_PREFIX}{self.source}/{self.document}"

    def match(self) -> dict:
        """The symbol as one of several a name matches: where it is and what it is."""
        return {"key": self.key, "vault": self.source, "path": self.document,
                "file": self.path, "start_line": self.start_line, "end_line": self.end_line,
                "kind": self.kind, "qualified_name": self.qualified_name,
                "signature": self.signature}


def check_repository(config: JarvisConfig, repo: str | None) -> None:
    """QueryError unless ``repo`` is None or a configured repository (a profile's
    configuration holds its own)."""
    if repo is not None and repo not in config.sources_of("repo"):
        raise QueryError(f"'{shown(repo)}' is not a repository (see list-vaults)", "repo")


def repositories(config: JarvisConfig, repo: str | None) -> list[str]:
    """The repositories a symbol is looked for in: ``repo`` (``check_repository`` has
    passed it), else every one configured."""
    configured = list(config.sources_of("repo"))
    if not configured:
        raise QueryError("no repository is configured: symbols come from the repositories "
                         "under repos: in jarvis.yaml")
    return [repo] if repo is not None else configured


def find_symbols(snapshot: Snapshot, name: str, repos: list[str]) -> list[Symbol]:
    """The symbols ``name`` names in ``repos``, by the first kind of match that finds any:
    a symbol key, code document key or document path; ``path:line`` (the innermost symbol
    holding the line, the path whole or its end); the qualified or the bare name (``seen``
    is a function ``seen`` and a method ``Store.seen`` alike); the end of a qualified name;
    the qualified or bare name ignoring case."""
    if "code_symbols" not in snapshot.table_names():
        raise NotPublished("the published version holds no source code: run `jarvis refresh`")
    raw = name.strip().strip("`").strip()
    written = _SEPARATORS.sub(".", raw.removesuffix("()"))
    place = _PATH_LINE.fullmatch(raw)
    rows = snapshot.cursor().execute(_MATCHES, {
        "raw": raw, "keys": [raw.removeprefix(prefix) for prefix in (SYMBOL_PREFIX, CODE_PREFIX)],
        "name": written,
        "file": place["file"] if place else None,
        "line": int(place["line"]) if place else None, "repos": repos}).fetchall()
    return [Symbol(*row) for row in rows]


def _found(snapshot: Snapshot, name: str, repos: list[str]) -> list[Symbol]:
    """``find_symbols``, or SymbolNotFound when it finds none."""
    found = find_symbols(snapshot, name, repos)
    if not found:
        where = f"'{repos[0]}'" if len(repos) == 1 else "the repositories you can read"
        raise SymbolNotFound(f"'{shown(name)}' names no symbol in {where}")
    return found


def only_symbol(snapshot: Snapshot, name: str, repos: list[str]) -> Symbol:
    """The one symbol ``name`` names; SymbolNotFound when none, QueryError listing them
    when several."""
    found = _found(snapshot, name, repos)
    if len(found) > 1:
        raise QueryError(f"'{shown(name)}' names {len(found)} symbols: " + ", ".join(
            f"{symbol.path}:{symbol.start_line} {symbol.qualified_name}"
            for symbol in found[:10]) + "; give its qualified name or path:line")
    return found[0]


def _edges(snapshot: Snapshot, key: str) -> list[dict]:
    return [dict(zip(_EDGE_COLUMNS, row, strict=True))
            for row in snapshot.cursor().execute(_EDGES, {"key": key}).fetchall()]


def _item(edge: dict) -> dict:
    """An edge's other end as the answer lists it: what it is, where `read` opens it (vault
    and path; None for a node that is no document), how it is linked and the line that
    says so."""
    return {"key": edge["key"], "type": edge["type"], "title": edge["title"],
            "vault": edge["vault"], "path": edge["path"], "relation": edge["relation"],
            "evidence_text": edge["evidence_text"]}


def _code_item(edge: dict) -> dict:
    """A caller, callee or base type: the item, the file and line of the call (or
    declaration) and how sure the link is (high: the name is defined in the same file, or
    imported; medium: the one definition of that name elsewhere)."""
    site = _CALL_SITE.match(edge["evidence_text"] or "")
    return {**_item(edge), "file": site["file"] if site else None,
            "line": int(site["line"]) if site else None,
            "confidence": "high" if edge["confidence"] == EXPLICIT else "medium"}


def _commit_item(edge: dict) -> dict:
    committed = edge["modified_at"]
    return {**_item(edge), "committed_at": committed.isoformat() if committed else None}


def _ambiguous_calls(snapshot: Snapshot, symbol: Symbol) -> list[dict]:
    """Names written in the code that may mean the symbol, among other symbols of that
    name: not linked (which one is meant is not known), listed with the count."""
    prefix = f"file:{symbol.source}/"
    return [{"file": origin.removeprefix(prefix), "line": line, "written": written,
             "candidates": candidates}
            for origin, line, written, candidates in snapshot.cursor().execute(
                "SELECT origin, line, target, len(candidates) FROM graph_broken_links "
                "WHERE reason = 'ambiguous' AND list_contains(candidates, ?) "
                "ORDER BY origin, line", [symbol.key]).fetchall()]


def _tickets(snapshot: Snapshot, commits: list[dict]) -> list[dict]:
    """The tickets the commits cite (fix, mention, reference), each once with the commits
    citing it and how."""
    if not commits:
        return []
    titles = {commit["key"]: commit["title"] for commit in commits}
    rows = snapshot.cursor().execute(f"""
        WITH tickets AS (SELECT node_key, any_value(title) AS title FROM graph_nodes
                         WHERE type = 'ticket' GROUP BY node_key)
        SELECT t.node_key, t.title, d.source, d.path,
               list(DISTINCT e.relation ORDER BY e.relation), list(DISTINCT e.src ORDER BY e.src),
               any_value(e.evidence_text)
        FROM graph_edges e JOIN tickets t ON t.node_key = e.dst
        LEFT JOIN documents d ON d.doc_key = t.node_key
        WHERE e.src IN ({sql_strings(list(titles))})
        GROUP BY t.node_key, t.title, d.source, d.path ORDER BY t.node_key""").fetchall()
    return [{"key": key, "type": "ticket", "title": title, "vault": source, "path": path,
             "relations": relations, "commits": [{"key": commit, "title": titles[commit]}
                                                 for commit in cited_by],
             "evidence_text": evidence}
            for key, title, source, path, relations, cited_by, evidence in rows]


def _story(snapshot: Snapshot, symbol: Symbol, edges: list[dict]) -> dict:
    """The commits that changed the symbol (its own MODIFIES edges; failing those, its
    file's, said by ``commits_by``), the tickets they cite and the documents that mention
    it."""
    commits = [_commit_item(e) for e in edges
               if e["relation"] == MODIFIES and not e["outgoing"] and e["type"] == "commit"]
    commits_by = "symbol" if commits else None
    if not commits:
        commits = [_commit_item(e) for e in _edges(snapshot, f"file:{symbol.source}/{symbol.path}")
                   if e["relation"] == MODIFIES and not e["outgoing"] and e["type"] == "commit"]
        commits_by = "file" if commits else None
    mentions = [_item(e) | {"source_type": e["source_type"]} for e in edges
                if not e["outgoing"] and e["relation"] not in _CODE_RELATIONS
                and e["vault"] is not None]
    return {"commits": commits, "commits_by": commits_by,
            "tickets": _tickets(snapshot, commits), "mentions": mentions}


def symbol_answer(config: JarvisConfig, snapshot: Snapshot, name: str,
                  repo: str | None) -> dict:
    """What get-symbol answers: the symbols ``name`` names (``matches``); when it names one,
    its definition with its code (``symbol``), callers, callees, the ambiguous calls that
    may mean it, base and derived types, and its story (commits, tickets, mentions), each
    list cut at MAX_LISTED with its full length in ``counts``."""
    found = _found(snapshot, name, repositories(config, repo))
    answer: dict = {"name": name, "matches": [symbol.match() for symbol in found],
                    "symbol": None, "counts": {}}
    if len(found) > 1:
        return answer
    symbol = found[0]
    edges = _edges(snapshot, symbol.key)

    def code_items(relations: tuple[str, ...], outgoing: bool) -> list[dict]:
        return [_code_item(e) for e in edges
                if e["relation"] in relations and e["outgoing"] == outgoing]

    lists = {"callers": code_items((CALLS,), False), "callees": code_items((CALLS,), True),
             "ambiguous_calls": _ambiguous_calls(snapshot, symbol),
             "bases": code_items((EXTENDS, IMPLEMENTS), True),
             "derived": code_items((EXTENDS, IMPLEMENTS), False)}
    story = _story(snapshot, symbol, edges)
    lists |= {name: story[name] for name in ("commits", "tickets", "mentions")}
    answer["symbol"] = {**symbol.match(), "name": symbol.name, "doc": symbol.doc,
                        "parent": symbol.parent, "language": symbol.language,
                        "code": document_text(snapshot, document_key(symbol.key))}
    answer["commits_by"] = story["commits_by"]
    answer["counts"] = {name: len(items) for name, items in lists.items()}
    return answer | {name: items[:MAX_LISTED] for name, items in lists.items()}


def symbol_start(config: JarvisConfig, snapshot: Snapshot, name: str,
                 missing: DocumentNotFound) -> Symbol:
    """The symbol a graph search starts from when ``name`` names no document (``missing``
    says so): the one symbol it names (a symbol key, ``path:line``) in the repositories
    configured; ``missing`` when it names none."""
    if not config.sources_of("repo") or "code_symbols" not in snapshot.table_names():
        raise missing
    try:
        return only_symbol(snapshot, name, repositories(config, None))
    except SymbolNotFound:
        raise missing from None


def located(snapshot: Snapshot, hits: list[Hit]) -> list[dict]:
    """Code hits with where their symbol is: file, line span, kind, qualified name and
    signature (what search-code shows of each)."""
    places = [f"{hit.vault}/{hit.path}" for hit in hits]
    rows = {} if not places else {row[0]: row[1:] for row in snapshot.cursor().execute(
        "SELECT source || '/' || path || '::' || symbol_id, path, start_line, end_line, kind, "
        "qualified_name, signature FROM code_symbols "
        f"WHERE source || '/' || path || '::' || symbol_id IN ({sql_strings(places)})"
    ).fetchall()}
    fields = ("file", "start_line", "end_line", "kind", "qualified_name", "signature")
    return [hit.as_dict() | dict(zip(fields, rows.get(place, (None,) * len(fields)),
                                     strict=True))
            for hit, place in zip(hits, places, strict=True)]

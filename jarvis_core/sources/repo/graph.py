"""The knowledge graph of one git repository, from its stored commits, docs and knowledge.

Commits are documents (``commit:<repo>/<sha>``): their author (a person folded across name
variants, AUTHORED), their parents (PARENT) and the files they changed (MODIFIES, with the
line counts as evidence text), all with the commit message's first chunk as evidence.
Repo docs (``repo_doc:<repo>/<path>``) are documents too. The source files at the head are
origins of their code graph (symbols, CONTAINS, IMPORTS, CALLS, EXTENDS: code/graph.py).
``.jarvis`` knowledge files declare components (``component:<repo>/<name>``) with typed
relations between them, owners (OWNS) and paths (CONTAINS the files under them). Ticket
keys, GitHub issues, commit hashes and repository paths cited in commit messages and docs
become references that ``cross_source_links`` resolves against every source.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from jarvis_core.settings import GraphSettings
from jarvis_core.sources.extraction import (
    OTHER_PEOPLE,
    BrokenLink,
    GraphExtractor,
    Mention,
    SourceGraph,
    other_people,
)
from jarvis_core.sources.people import Identity, Person, PersonDirectory
from jarvis_core.sources.references import (
    GraphReference,
    chunks_holding,
    find_references,
    line_text,
)
from jarvis_core.sources.repo.code.graph import NO_CODE, CodeRows, extract_code_graph, file_node
from jarvis_core.sources.repo.code.model import repo_file_key, symbol_key
from jarvis_core.sources.repo.knowledge import is_knowledge_file
from jarvis_core.stores.graph.elements import EXPLICIT, Edge, Node

__all__ = ["commit_key", "component_key", "extract_repo_graph", "repo_doc_key",
           "repo_file_key"]


def commit_key(repo: str, sha: str) -> str:
    return f"commit:{repo}/{sha}"


def repo_doc_key(repo: str, path: str) -> str:
    return f"repo_doc:{repo}/{path}"


def component_key(repo: str, name: str) -> str:
    return f"component:{repo}/{name}"


def _person_node(person: Person) -> Node:
    return Node(person.key, "person", person.name, None,
                {"emails": list(person.emails), "names": list(person.names),
                 "aliases": list(person.aliases)})


class _Graph:
    """Collects one repository's nodes, edges, mentions and references."""

    def __init__(self, repo: str, chunks: Iterable[dict]) -> None:
        self.repo = repo
        self.nodes: dict[str, Node] = {}
        self.edges: dict[str, Edge] = {}
        self.mentions: set[Mention] = set()
        self.references: set[GraphReference] = set()
        self.broken: list[BrokenLink] = []
        self.chunks: dict[str, list[tuple[int, int, str]]] = {}
        for chunk in chunks:
            self.chunks.setdefault(chunk["doc_key"], []).append(
                (chunk["char_start"], chunk["char_end"], chunk["chunk_id"]))
        for spans in self.chunks.values():
            spans.sort()

    def first_chunk(self, doc: str) -> tuple[str, ...]:
        spans = self.chunks.get(doc)
        return (spans[0][2],) if spans else ()

    def chunk_ids(self, doc: str) -> tuple[str, ...]:
        return tuple(span[2] for span in self.chunks.get(doc, ()))

    def evidence(self, doc: str, start: int, end: int) -> tuple[str, ...]:
        return chunks_holding(self.chunks.get(doc, ()), start, end)

    def edge(self, src: str, relation: str, dst: str, extractor: str, origin: str,
             evidence: tuple[str, ...], text: str) -> None:
        self.add(Edge(src, dst, relation, EXPLICIT, extractor, origin, self.repo, evidence,
                      text[:300]))

    def add(self, edge: Edge) -> None:
        """An edge, and the chunks of its evidence mentioning its ends."""
        self.edges[edge.key] = edge
        for chunk_id in edge.evidence:
            for key in (edge.src, edge.dst):
                if key != edge.origin:
                    self.mentions.add(Mention(chunk_id, key, edge.origin, self.repo))

    def cite(self, origin: str, text: str) -> None:
        """References to tickets, commits and files in a document's text."""
        for ref in find_references(text, default_repo=self.repo):
            self.references.add(GraphReference(
                source=self.repo, origin=origin, src=origin, relation=ref.relation,
                kind=ref.kind, target=ref.target, written=ref.written, line=ref.line,
                evidence=self.evidence(origin, ref.start, ref.end),
                evidence_text=line_text(text, ref.start)))


def _commits(graph: _Graph, commits: list[dict], files: list[dict],
             people: PersonDirectory, at_head: dict[str, dict]) -> None:
    repo = graph.repo
    known = {row["sha"] for row in commits}
    changed: dict[str, list[dict]] = {}
    for row in files:
        changed.setdefault(row["sha"], []).append(row)
    for row in commits:
        key = commit_key(repo, row["sha"])
        graph.nodes[key] = Node(key, "commit", row["subject"], repo, {
            "sha": row["sha"], "short_sha": row["sha"][:7], "author": row["author_name"],
            "author_email": row["author_email"], "date": row["authored_at"].isoformat(),
            "committed": row["committed_at"].isoformat(), "additions": row["additions"],
            "deletions": row["deletions"], "files_changed": row["files_changed"],
            "path": f"commits/{row['sha']}"})
        evidence = graph.first_chunk(key)
        person = people.person(Identity(row["author_name"], row["author_email"]))
        if person is not None:
            graph.nodes[person.key] = _person_node(person)
            graph.edge(person.key, "AUTHORED", key, "git_author", key, evidence,
                       f"Author: {row['author_name']} <{row['author_email']}>")
        for parent in row["parents"]:
            if parent in known:  # a shallow clone's boundary has parents it does not hold
                graph.edge(key, "PARENT", commit_key(repo, parent), "git_parent", key,
                           evidence, f"parent {parent[:12]}")
        for change in sorted(changed.get(row["sha"], []), key=lambda f: f["path"]):
            path = change["path"]
            file_key = repo_file_key(repo, path)
            graph.nodes[file_key] = file_node(repo, path, at_head.get(path))
            counts = "binary" if change["binary"] else \
                f"+{change['additions']} -{change['deletions']}"
            renamed = f" (renamed from {change['old_path']})" if change["old_path"] else ""
            graph.edge(key, "MODIFIES", file_key, "git_numstat", key, evidence,
                       f"{path} {counts}{renamed}")
        graph.cite(key, row["message"])


def _modified_symbols(graph: _Graph, rows: list[dict]) -> None:
    """MODIFIES from a commit to each symbol at the head its hunks touched
    (code/modifies.py), the lines it touched there as evidence text."""
    for row in rows:
        key = commit_key(graph.repo, row["sha"])
        first, last = row["start_line"], row["end_line"]
        graph.edge(key, "MODIFIES", symbol_key(graph.repo, row["path"], row["symbol_id"]),
                   "git_hunks", key, graph.first_chunk(key),
                   f"{row['path']}:{first}{f'-{last}' if last != first else ''} "
                   f"+{row['additions']} -{row['deletions']}")


def _line_of(text: str, needle: str) -> int:
    at = text.find(needle)
    return text.count("\n", 0, at) + 1 if at >= 0 else 0


def _components(graph: _Graph, knowledge: list[dict], docs: dict[str, dict],
                people: PersonDirectory, at_head: dict[str, dict]) -> None:
    repo = graph.repo
    declared: dict[str, str] = {}  # name -> origin
    parsed = []
    for row in sorted(knowledge, key=lambda r: r["path"]):
        if row["components"] is None or row["path"] not in docs:
            continue  # a file that failed to parse is an ingest failure, not a graph
        origin = repo_doc_key(repo, row["path"])
        for component in json.loads(row["components"])["components"]:
            declared.setdefault(component["name"], origin)
            parsed.append((origin, docs[row["path"]]["text"], component))
    for origin, text, component in parsed:
        key = component_key(repo, component["name"])
        at = text.find(component["name"])
        evidence = graph.evidence(origin, max(at, 0), max(at, 0) + len(component["name"]))
        shown = line_text(text, max(at, 0))
        graph.nodes[key] = Node(key, "component", component["name"], repo, {
            "description": component["description"], "paths": component["paths"],
            "owners": component["owners"], "declared_in": origin.partition("/")[2]})
        graph.edge(origin, "DECLARES", key, "jarvis_knowledge", origin, evidence, shown)
        for relation, target in component["relations"]:
            if target not in declared:
                graph.broken.append(BrokenLink(origin, repo, target, "unresolved", (),
                                               _line_of(text, target), evidence))
                continue
            graph.edge(key, relation, component_key(repo, target), "jarvis_knowledge", origin,
                       evidence, f"{component['name']} {relation} {target}")
        for owner in component["owners"]:
            identity = Identity(None, owner) if "@" in owner else Identity(owner, None)
            person = people.person(identity)
            if person is not None:
                graph.nodes[person.key] = _person_node(person)
                graph.edge(person.key, "OWNS", key, "jarvis_knowledge", origin, evidence,
                           f"{component['name']} owners: {owner}")
        for prefix in component["paths"]:
            folder = prefix.rstrip("/") + "/"
            for path in sorted(p for p in at_head if p == prefix or p.startswith(folder)):
                file_key = repo_file_key(repo, path)
                if file_key in graph.nodes:  # files neither committed nor parsed stay out
                    graph.edge(key, "CONTAINS", file_key, "jarvis_knowledge", origin,
                               evidence, f"{component['name']} paths: {prefix}")


def extract_repo_graph(repo: str, commits: list[dict], files: list[dict],
                       repo_files: list[dict], docs: list[dict], knowledge: list[dict],
                       chunks: list[dict], knowledge_dir: str = ".jarvis",
                       known_people: Iterable[Identity] = (), code: CodeRows = NO_CODE,
                       commit_symbols: list[dict] = ()) -> SourceGraph:
    """The graph of one repository from its table rows, in a deterministic order;
    ``known_people`` (identities other sources recorded) fold authors across sources;
    ``commit_symbols`` the symbols at the head commits modified."""
    graph = _Graph(repo, chunks)
    people = PersonDirectory([*known_people, *(Identity(row["author_name"], row["author_email"])
                                               for row in commits)])
    at_head = {row["path"]: row for row in repo_files}
    commits = sorted(commits, key=lambda row: row["sha"])
    _commits(graph, commits, files, people, at_head)
    _modified_symbols(graph, commit_symbols)
    by_path = {row["path"]: row for row in docs}
    for row in sorted(docs, key=lambda r: r["path"]):
        key = repo_doc_key(repo, row["path"])
        graph.nodes[key] = Node(key, "repo_doc", row["title"], repo, {"path": row["path"]})
        if not is_knowledge_file(row["path"], knowledge_dir):
            graph.cite(key, row["text"])
    code_graph = extract_code_graph(repo, code, at_head, graph.chunk_ids)
    graph.nodes.update(code_graph.nodes)
    for edge in code_graph.edges:
        graph.add(edge)
    graph.broken += code_graph.broken
    _components(graph, knowledge, by_path, people, at_head)
    documents = [commit_key(repo, row["sha"]) for row in commits] + \
        [repo_doc_key(repo, row["path"]) for row in docs] + code_graph.origins
    return SourceGraph.assemble(
        graph.nodes, documents,
        sorted(graph.edges.values(), key=lambda e: (e.src, e.relation, e.dst, e.origin)),
        sorted(graph.broken, key=lambda b: (b.origin, b.line, b.target)),
        sorted(graph.mentions, key=lambda m: (m.chunk_id, m.node_key)),
        references=sorted(graph.references,
                          key=lambda r: (r.origin, r.line, r.kind, r.target)),
        owned=code_graph.owned)


def _extract(source: str, settings, graph: GraphSettings, rows: dict[str, list[dict]],
             chunk_rows: list[dict]) -> SourceGraph:
    return extract_repo_graph(source, rows["commits"], rows["commit_files"], rows["repo_files"],
                              rows["repo_docs"], rows["repo_knowledge"], chunk_rows,
                              knowledge_dir=settings.knowledge_dir,
                              known_people=other_people(rows),
                              code=CodeRows(rows["code_files"], rows["code_symbols"],
                                            rows["code_references"]),
                              commit_symbols=rows["commit_symbols"])


EXTRACTOR = GraphExtractor(
    {"commits": "SELECT * EXCLUDE (source, ingested_at) FROM commits WHERE source = ?",
     "commit_files": "SELECT * EXCLUDE (source) FROM commit_files WHERE source = ?",
     "repo_files": "SELECT path, language FROM repo_files WHERE source = ?",
     # the symbols still at the head: an edge to one gone would have no node
     "commit_symbols": "SELECT c.* EXCLUDE (source) FROM commit_symbols c "
                       "JOIN code_symbols s USING (source, path, symbol_id) WHERE c.source = ?",
     "repo_docs": "SELECT path, title, text FROM repo_docs WHERE source = ?",
     "repo_knowledge": "SELECT path, components FROM repo_knowledge WHERE source = ?",
     "code_files": "SELECT path, language FROM code_files WHERE source = ?",
     "code_symbols": "SELECT path, symbol_id, kind, name, qualified_name, signature, "
                     "start_line, end_line, parent, language FROM code_symbols WHERE source = ?",
     "code_references": "SELECT path, kind, name, qualifier, scope, line FROM code_references "
                        "WHERE source = ?",
     "people": OTHER_PEOPLE},
    _extract)

"""References to tickets, commits, repository files, notes, wiki pages and mail messages in free
text, and their resolution.

One module holds every pattern, so notes, commit messages and ticket text cite things the
same way:

- Jira keys ``LUM-4``, ``[LUM-4]``, ``[LUM-4b]`` (a letter suffix, in brackets only), and
  keys inside branch names of merge messages
  (``Merge branch 'feature/lum-6-alert-rules'``).
- GitHub issues ``owner/repo#12``, ``repo#12`` (the vault writes ``lumen#7``), issue and
  pull-request URLs, and — when the citing source knows its repository — ``fixes #12`` /
  ``closes #12`` / ``resolves #12`` and ``Merge pull request #12``. A bare ``#12`` in prose
  is not a reference ("CI build #123").
- Commit hashes: 7–40 hex digits between word boundaries with at least one letter and one
  digit; they count only when they resolve to exactly one known commit, so hex ids inside
  JSON or UUIDs never link by accident.
- Repository paths with a folder and an extension (``ingest/handlers.py``), outside URLs
  (with a line, ``ingest/handlers.py:42``, they are a symbol's place, below).
- Notes: ``[[Note title]]`` wikilinks and ``obsidian://open?...&file=<path>`` URLs (what a mail
  or a wiki page pastes); Confluence pages: ``/spaces/KEY/pages/<id>`` and
  ``viewpage.action?pageId=<id>`` URLs by id, ``/display/KEY/<Title>`` URLs by title; mail
  messages: ``mid:<id>`` URLs (RFC 2392) and ``Message-ID: <id>``. Each counts only when it
  resolves to a document some source holds (a note, a page, the thread holding the message);
  notes' unresolved wikilinks are tried as page titles by ``cross_source``.
- Source-code symbols: ``UserService.createUser``, ``createUser()``, a backticked name,
  ``path:line`` (``code_references``), each resolving to the symbol it names in any
  repository when it names one.

Finding is pure text work with spans; ``ReferenceIndex`` resolves what was found against the
graph's nodes of every source.
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from urllib.parse import parse_qs, unquote, unquote_plus

from jarvis_core.sources.code_references import (
    LINE,
    SYMBOL,
    SymbolIndex,
    find_symbol_mentions,
    inside,
    url_spans,
)

JIRA, GITHUB, COMMIT, PATH = "jira", "github", "commit", "path"
NOTE, PAGE, PAGE_TITLE, MESSAGE = "note", "page", "page_title", "message"
# Several documents (notes, pages, threads) answer to one title or id: listed, no warning.
AMBIGUOUS_DOCUMENT = "ambiguous_document"
MENTIONS, FIXES = "MENTIONS", "FIXES"
# Edges made from resolved references have origins of their own ("xref:" + the citing
# document), so only the resolution step and the citing document's rewrite replace them.
CROSS_ORIGIN_PREFIX = "xref:"
CROSS_EXTRACTOR = "cross_reference"

_JIRA_KEY = re.compile(r"(?<![A-Za-z0-9_-])([A-Z][A-Z0-9_]{1,9}-[1-9][0-9]{0,6})(?![A-Za-z0-9_])")
# "[ABC-784d] fix ...": one letter after a bracketed key marks another commit for the ticket
_SUFFIXED_KEY = re.compile(r"(?<=\[)([A-Z][A-Z0-9_]{1,9}-[1-9][0-9]{0,6})[A-Za-z](?=\])")
_MERGE_BRANCH = re.compile(
    r"Merge (?:remote-tracking )?branch '([^']+)'|Merge pull request #\d+ from (\S+)")
_BRANCH_KEY = re.compile(r"(?<![A-Za-z0-9])([A-Za-z][A-Za-z0-9_]{1,9}-[1-9][0-9]{0,6})(?![0-9])")
_GITHUB_URL = re.compile(
    r"https?://github\.com/([\w.-]+/[\w.-]+)/(?:issues|pull)/([1-9][0-9]*)\b")
_GITHUB_REF = re.compile(
    r"(?<![\w/.#-])((?:[A-Za-z0-9_.-]+/)?[A-Za-z0-9_.-]*[A-Za-z][A-Za-z0-9_.-]*)#([1-9][0-9]*)"
    r"(?![\w-])")
_CLOSING = re.compile(
    r"\b(close[sd]?|fix(?:e[sd])?|resolve[sd]?)\b:?\s+#([1-9][0-9]*)(?![\w-])", re.IGNORECASE)
_CLOSING_JIRA = re.compile(
    r"\b(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?)\b:?\s+\[?([A-Z][A-Z0-9_]{1,9}-[1-9][0-9]*)",
    re.IGNORECASE)
_MERGE_PULL = re.compile(r"\bMerge pull request #([1-9][0-9]*)(?![\w-])")
_HASH = re.compile(r"(?<![\w@#/-])([0-9a-f]{7,40})(?![\w-])")
_PATH = re.compile(
    r"(?<![\w/.:@-])((?:[\w.-]+/)+[\w.-]*[A-Za-z0-9_]\.[A-Za-z0-9]{1,8})(?![\w/]|:\d|#L\d)")
_WIKILINK = re.compile(r"\[\[([^\[\]|#^\n]+?)\s*(?:[|#^][^\[\]\n]*)?\]\]")
_OBSIDIAN_URL = re.compile(r"obsidian://open\?([^\s<>\"'()\[\]]+)")
_PAGE_URL = re.compile(
    r"https?://[^\s<>\"'()\[\]]*?(?:/spaces/[^/\s]+/pages/(\d+)"
    r"|/viewpage\.action\?(?:[^\s<>\"'()\[\]]*&)?pageId=(\d+))")
_DISPLAY_URL = re.compile(r"https?://[^\s<>\"'()\[\]]*?/display/[^/\s]+/([^\s?#<>\"'()\[\]]+)")
_MID_URL = re.compile(r"(?<![\w-])mid:([^\s<>\"'()\[\]/]+@[^\s<>\"'()\[\]/]+)", re.IGNORECASE)
_MESSAGE_ID = re.compile(r"\bMessage-?ID\b:?\s*<([^\s<>@]+@[^\s<>]+)>", re.IGNORECASE)
_LINE_BREAK = re.compile(r"\r\n?|\n")
_NUMBER_SIGN = re.compile(r"#[1-9]")  # what every '#12' reference holds
_HAS_LETTER, _HAS_DIGIT = re.compile(r"[a-f]"), re.compile(r"[0-9]")
# The property naming a page or thread the same in every source that holds it.
_DOCUMENT_IDS = {"page": "page_id", "thread": "thread_id"}


@dataclass(frozen=True)
class Reference:
    """One place a text cites something: what kind, the normalised target, how."""

    kind: str       # JIRA, GITHUB, COMMIT, PATH, NOTE, PAGE, PAGE_TITLE, MESSAGE, SYMBOL
                    # or LINE
    target: str     # 'LUM-4', 'lumen#7' / 'owner/repo#7', a hex prefix, a repo path, a note
                    # title or path, a page id or title, a Message-ID, a (dotted) symbol
                    # name, 'path:line'
    relation: str   # MENTIONS, or FIXES after a closing keyword
    written: str    # the text as written
    start: int      # character span in the text
    end: int
    line: int       # 1-based line of the span


def _line_of(line_starts: list[int], offset: int) -> int:
    return bisect.bisect_right(line_starts, offset)


def find_references(text: str, *, default_repo: str | None = None,
                    skip_lines: Iterable[int] = ()) -> list[Reference]:
    """Every reference in ``text`` in order of position, one per (kind, target, span).

    ``default_repo`` is the GitHub repository ``#12`` means in ``fixes #12``; lines in
    ``skip_lines`` (1-based, e.g. a note's code blocks) are ignored."""
    line_starts = [0] + [m.end() for m in _LINE_BREAK.finditer(text)]
    skipped = set(skip_lines)
    found: dict[tuple[str, str, int], Reference] = {}

    def add(kind: str, target: str, relation: str, start: int, end: int) -> None:
        line = _line_of(line_starts, start)
        if line in skipped:
            return
        key = (kind, target, start)
        if key not in found or relation == FIXES:
            found[key] = Reference(kind, target, relation, text[start:end], start, end, line)

    # Each search runs only where what it needs is in the text (a number after '#', a '/',
    # an '@'...): most texts have few of them, and the searches were most of a vault's graph.
    keys = [*_JIRA_KEY.finditer(text), *_SUFFIXED_KEY.finditer(text)]
    fixes = {match.start(1) for match in _CLOSING_JIRA.finditer(text)} if keys else set()
    for match in keys:
        add(JIRA, match.group(1), FIXES if match.start(1) in fixes else MENTIONS,
            match.start(1), match.end(1))
    if "Merge " in text:
        for match in _MERGE_BRANCH.finditer(text):
            group = 1 if match.group(1) is not None else 2
            for key in _BRANCH_KEY.finditer(match.group(group)):
                start = match.start(group) + key.start(1)
                add(JIRA, key.group(1).upper(), MENTIONS, start, start + len(key.group(1)))
    if "github.com" in text:
        for match in _GITHUB_URL.finditer(text):
            add(GITHUB, f"{match.group(1)}#{match.group(2)}", MENTIONS, match.start(),
                match.end())
    numbered = _NUMBER_SIGN.search(text) is not None
    if numbered:
        for match in _GITHUB_REF.finditer(text):
            add(GITHUB, f"{match.group(1)}#{match.group(2)}", MENTIONS, match.start(),
                match.end())
    if default_repo and numbered:
        for match in _CLOSING.finditer(text):
            add(GITHUB, f"{default_repo}#{match.group(2)}", FIXES, match.start(2) - 1,
                match.end(2))
        for match in _MERGE_PULL.finditer(text):
            add(GITHUB, f"{default_repo}#{match.group(1)}", MENTIONS, match.start(1) - 1,
                match.end(1))
    for match in _HASH.finditer(text):
        written = match.group(1)
        if _HAS_LETTER.search(written) and _HAS_DIGIT.search(written):
            add(COMMIT, written, MENTIONS, match.start(1), match.end(1))
    urls = url_spans(text)
    for match in _PATH.finditer(text) if "/" in text else ():
        if not inside(urls, match.start(1)):
            add(PATH, match.group(1), MENTIONS, match.start(1), match.end(1))
    for kind, target, start, end in (*_document_citations(text),
                                     *find_symbol_mentions(text, urls)):
        add(kind, target, MENTIONS, start, end)
    return sorted(found.values(), key=lambda ref: (ref.start, ref.kind, ref.target))


def _document_citations(text: str) -> list[tuple[str, str, int, int]]:
    """(kind, target, start, end) of every note, page and message cited in ``text``."""
    found = [(NOTE, match.group(1).strip(), match.start(), match.end())
             for match in _WIKILINK.finditer(text) if match.group(1).strip()]
    for match in _OBSIDIAN_URL.finditer(text):
        query = parse_qs(match.group(1).rstrip(".,;:!?"))
        if path := (query.get("file") or [""])[0].strip("/"):
            found.append((NOTE, path, match.start(), match.end()))
    found += [(PAGE, match.group(1) or match.group(2), match.start(), match.end())
              for match in _PAGE_URL.finditer(text)]
    for match in _DISPLAY_URL.finditer(text):
        if title := unquote_plus(match.group(1)).strip():
            found.append((PAGE_TITLE, title, match.start(), match.end()))
    for pattern in (_MID_URL, _MESSAGE_ID) if "@" in text else ():
        for match in pattern.finditer(text):
            message_id = unquote(match.group(1)).strip("<>").rstrip(".,;:!?")
            found.append((MESSAGE, message_id, match.start(), match.end()))
    return found


def document_name(text: str | None) -> str:
    """How titles, note paths and ids are compared: case and spacing folded."""
    return " ".join((text or "").split()).casefold()


def line_text(text: str, offset: int, limit: int = 300) -> str:
    """The stripped line holding ``offset``, cut to ``limit`` characters around it."""
    start = max(text.rfind("\n", 0, offset) + 1, 0)
    end = text.find("\n", offset)
    line = text[start:end if end >= 0 else len(text)]
    if len(line) <= limit:
        return line.strip()
    at = max(0, min(offset - start - limit // 3, len(line) - limit))
    return line[at:at + limit].strip()


def chunks_holding(chunks: Iterable[tuple[int, int, str]], start: int, end: int
                   ) -> tuple[str, ...]:
    """Ids of the chunks (char_start, char_end, chunk_id) holding the span whole, else
    of those overlapping it (a span cut by a chunk border)."""
    chunks = list(chunks)
    whole = [chunk_id for chunk_start, chunk_end, chunk_id in chunks
             if chunk_start <= start and end <= chunk_end]
    return tuple(sorted(set(whole or [chunk_id for chunk_start, chunk_end, chunk_id in chunks
                                      if chunk_start < end and start < chunk_end])))


def github_aliases(repo: str | None, full_repo: str | None, number: int) -> set[str]:
    """The forms a GitHub issue is cited by: configured name, owner/name, bare name."""
    names = {name for name in (repo, full_repo) if name}
    names |= {name.rpartition("/")[2] for name in names}
    return {f"{name}#{number}".lower() for name in names}


class ReferenceIndex:
    """Resolves references against graph nodes (key, type, properties) of every source.

    An item several sources hold (a ticket set exported twice, a repository, mailbox or
    Confluence export configured twice) is one node per source, all copies of one item: a
    ticket's key (a GitHub issue's owner/repo and number), a commit's sha, a page's id, a
    thread's id. A reference to it resolves to every copy; ``copies`` lists them."""

    def __init__(self, nodes: Iterable[Mapping]) -> None:
        self.known: set[str] = set()
        self.tickets: dict[str, set[str]] = {}
        self.projects: set[str] = set()
        self.repos: set[str] = set()
        self.commits: list[tuple[str, str]] = []  # (sha, key), sorted
        self.files: dict[str, set[str]] = {}
        self.documents: dict[tuple[str, str], set[str]] = {}  # (kind, name) -> note/page/thread
        self.item: dict[str, str] = {}  # node key -> the item it is a copy of
        self.symbols = SymbolIndex(self.files)
        for node in nodes:
            properties = node.get("properties") or {}
            if isinstance(properties, str):
                properties = json.loads(properties or "{}")
            key, kind = node["node_key"], node["type"]
            self.known.add(key)
            if kind == "ticket" and properties.get("system") == "github":
                number = int(properties.get("number") or 0)
                aliases = github_aliases(properties.get("repo"), properties.get("repo_full"),
                                         number)
                self.repos |= {alias.rpartition("#")[0] for alias in aliases}
                repo = properties.get("repo_full") or properties.get("repo") or ""
                self.item[key] = f"github:{repo.lower()}#{number}"
            elif kind == "ticket":
                # a node stored before keys carried their source lacks the property (until
                # its ticket set runs again after the upgrade): its key is 'ticket:<KEY>'
                ticket = properties.get("key") or key.removeprefix("ticket:")
                aliases = {ticket}
                self.projects.add(ticket.rpartition("-")[0])
                self.item[key] = f"jira:{ticket}"
            elif kind == "commit" and properties.get("sha"):
                self.commits.append((str(properties["sha"]).lower(), key))
                self.item[key] = f"commit:{str(properties['sha']).lower()}"
                continue
            elif kind == "file" and properties.get("path"):
                self.files.setdefault(str(properties["path"]), set()).add(key)
                self.symbols.add_path(str(properties["path"]))
                continue
            elif kind == "symbol":
                self.symbols.add(key, properties)
                continue
            else:
                for name in _document_names(kind, node.get("title"), properties):
                    self.documents.setdefault(name, set()).add(key)
                item_id = properties.get(_DOCUMENT_IDS[kind]) if kind in _DOCUMENT_IDS else None
                if item_id:
                    self.item[key] = f"{kind}:{item_id}"
                continue
            for alias in aliases:
                self.tickets.setdefault(alias, set()).add(key)
        self.commits.sort()

    def resolve(self, kind: str, target: str) -> tuple[tuple[str, ...], str]:
        """(node keys, reason): the copies of one item (one key per source holding it) and
        'resolved', or keys of several items and 'ambiguous', or none and 'unresolved' (a
        ticket of a project or repository some ticket set has), 'unknown_project' (a
        key-like word no ticket set knows, e.g. UTF-8), 'no_such_commit' or 'no_such_file';
        symbols as ``SymbolIndex.resolve`` says."""
        if kind in (SYMBOL, LINE):
            return self.symbols.resolve(kind, target)
        if kind == COMMIT:
            prefix = target.lower()
            at = bisect.bisect_left(self.commits, (prefix, ""))
            keys = set()
            while at < len(self.commits) and self.commits[at][0].startswith(prefix):
                keys.add(self.commits[at][1])
                at += 1
            return self._one(keys, "no_such_commit")
        if kind == PATH:
            return self._one(self.files.get(target, set()), "no_such_file")
        if kind in (NOTE, PAGE, PAGE_TITLE, MESSAGE):
            keys = self.documents.get((kind, document_name(target)), set())
            if kind == NOTE and not keys:  # a path written without its .md
                keys = self.documents.get((kind, document_name(target + ".md")), set())
            return self._one(keys, f"no_such_{'page' if kind == PAGE_TITLE else kind}",
                             AMBIGUOUS_DOCUMENT)
        if kind == JIRA:
            known = target.rpartition("-")[0] in self.projects
            return self._one(self.tickets.get(target, set()),
                             "unresolved" if known else "unknown_project")
        known = target.lower().rpartition("#")[0] in self.repos
        return self._one(self.tickets.get(target.lower(), set()),
                         "unresolved" if known else "unknown_project")

    def copies(self) -> list[list[str]]:
        """The node keys of each item that several sources hold, each list sorted."""
        by_item: dict[str, list[str]] = {}
        for key, item in self.item.items():
            by_item.setdefault(item, []).append(key)
        return sorted(sorted(keys) for keys in by_item.values() if len(keys) > 1)

    def _one(self, keys: set[str], missing: str, several: str = "ambiguous"
             ) -> tuple[tuple[str, ...], str]:
        if keys and len({self.item.get(key, key) for key in keys}) == 1:
            return tuple(sorted(keys)), "resolved"
        return tuple(sorted(keys)), several if keys else missing


def _document_names(kind: str, title: str | None, properties: Mapping
                    ) -> list[tuple[str, str]]:
    """The (reference kind, name) pairs a note, page or thread node answers to: a note to
    its title, path (with and without .md, and its file name) and aliases; a page to its id
    and title; a thread to the Message-ID of each of its messages."""
    if kind == "note":
        path = str(properties.get("path") or "")
        names = [title, path, path.rpartition("/")[2].removesuffix(".md"),
                 *(properties.get("aliases") or ())]
        return [(NOTE, document_name(name)) for name in names if name]
    if kind == "page":
        return [(PAGE, str(properties.get("page_id") or "")), (PAGE_TITLE, document_name(title))]
    if kind == "thread":
        return [(MESSAGE, document_name(mid)) for mid in properties.get("message_ids") or ()]
    return []


@dataclass(frozen=True)
class GraphReference:
    """A reference a source's graph extraction could not resolve inside the source: it
    becomes an edge once its target exists in any source (``cross_source_links``)."""

    source: str
    origin: str                   # the citing document's key
    src: str                      # the node the edge starts from
    relation: str                 # MENTIONS, FIXES, BLOCKS, ...
    kind: str                     # a reference kind (JIRA ... MESSAGE)
    target: str
    written: str
    line: int
    evidence: tuple[str, ...]     # chunk ids holding it
    evidence_text: str
    inverse: bool = False         # the edge runs target -> src (an inward Jira link)

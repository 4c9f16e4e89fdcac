"""References to tickets, commits and repository files in free text, and their resolution.

One module holds every pattern, so notes, commit messages and ticket text cite things the
same way:

- Jira keys ``LUM-4``, ``[LUM-4]``, and keys inside branch names of merge messages
  (``Merge branch 'feature/lum-6-alert-rules'``).
- GitHub issues ``owner/repo#12``, ``repo#12`` (the vault writes ``lumen#7``), issue and
  pull-request URLs, and — when the citing source knows its repository — ``fixes #12`` /
  ``closes #12`` / ``resolves #12`` and ``Merge pull request #12``. A bare ``#12`` in prose
  is not a reference ("CI build #123").
- Commit hashes: 7–40 hex digits between word boundaries with at least one letter and one
  digit; they count only when they resolve to exactly one known commit, so hex ids inside
  JSON or UUIDs never link by accident.
- Repository paths with a folder and an extension (``ingest/handlers.py``), outside URLs.

Finding is pure text work with spans; ``ReferenceIndex`` resolves what was found against the
graph's nodes of every source.
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

JIRA, GITHUB, COMMIT, PATH = "jira", "github", "commit", "path"
MENTIONS, FIXES = "MENTIONS", "FIXES"
# Edges made from resolved references have origins of their own ("xref:" + the citing
# document), so only the resolution step and the citing document's rewrite replace them.
CROSS_ORIGIN_PREFIX = "xref:"
CROSS_EXTRACTOR = "cross_reference"

_JIRA_KEY = re.compile(r"(?<![A-Za-z0-9_-])([A-Z][A-Z0-9_]{1,9}-[1-9][0-9]{0,6})(?![A-Za-z0-9_])")
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
    r"(?<![\w/.:@-])((?:[\w.-]+/)+[\w.-]*[A-Za-z0-9_]\.[A-Za-z0-9]{1,8})(?![\w/])")
_LINE_BREAK = re.compile(r"\r\n?|\n")
_HAS_LETTER, _HAS_DIGIT = re.compile(r"[a-f]"), re.compile(r"[0-9]")


@dataclass(frozen=True)
class Reference:
    """One place a text cites something: what kind, the normalised target, how."""

    kind: str       # JIRA, GITHUB, COMMIT or PATH
    target: str     # 'LUM-4', 'lumen#7' / 'owner/repo#7', a hex prefix, a repo path
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

    fixes = {match.start(1) for match in _CLOSING_JIRA.finditer(text)}
    for match in _JIRA_KEY.finditer(text):
        add(JIRA, match.group(1), FIXES if match.start(1) in fixes else MENTIONS,
            match.start(1), match.end(1))
    for match in _MERGE_BRANCH.finditer(text):
        group = 1 if match.group(1) is not None else 2
        for key in _BRANCH_KEY.finditer(match.group(group)):
            start = match.start(group) + key.start(1)
            add(JIRA, key.group(1).upper(), MENTIONS, start, start + len(key.group(1)))
    for match in _GITHUB_URL.finditer(text):
        add(GITHUB, f"{match.group(1)}#{match.group(2)}", MENTIONS, match.start(), match.end())
    for match in _GITHUB_REF.finditer(text):
        add(GITHUB, f"{match.group(1)}#{match.group(2)}", MENTIONS, match.start(), match.end())
    if default_repo:
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
    urls = [(m.start(), m.end()) for m in re.finditer(r"\w+://\S+", text)]
    for match in _PATH.finditer(text):
        if not any(start <= match.start(1) < end for start, end in urls):
            add(PATH, match.group(1), MENTIONS, match.start(1), match.end(1))
    return sorted(found.values(), key=lambda ref: (ref.start, ref.kind, ref.target))


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
    """Resolves references against graph nodes (key, type, properties) of every source."""

    def __init__(self, nodes: Iterable[Mapping]) -> None:
        self.tickets: dict[str, set[str]] = {}
        self.projects: set[str] = set()
        self.repos: set[str] = set()
        self.commits: list[tuple[str, str]] = []  # (sha, key), sorted
        self.files: dict[str, set[str]] = {}
        for node in nodes:
            properties = node.get("properties") or {}
            if isinstance(properties, str):
                properties = json.loads(properties or "{}")
            key, kind = node["node_key"], node["type"]
            if kind == "ticket" and properties.get("system") == "github":
                aliases = github_aliases(properties.get("repo"), properties.get("repo_full"),
                                         int(properties.get("number") or 0))
                self.repos |= {alias.rpartition("#")[0] for alias in aliases}
            elif kind == "ticket":
                aliases = {key.removeprefix("ticket:")}
                self.projects.add(key.removeprefix("ticket:").rpartition("-")[0])
            elif kind == "commit" and properties.get("sha"):
                self.commits.append((str(properties["sha"]).lower(), key))
                continue
            elif kind == "file" and properties.get("path"):
                self.files.setdefault(str(properties["path"]), set()).add(key)
                continue
            else:
                continue
            for alias in aliases:
                self.tickets.setdefault(alias, set()).add(key)
        self.commits.sort()

    def resolve(self, kind: str, target: str) -> tuple[tuple[str, ...], str]:
        """(node keys, reason): one key and 'resolved', or several and 'ambiguous', or none
        and 'unresolved' (a ticket of a project or repository some ticket set has),
        'unknown_project' (a key-like word no ticket set knows, e.g. UTF-8),
        'no_such_commit' or 'no_such_file'."""
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
        if kind == JIRA:
            known = target.rpartition("-")[0] in self.projects
            return self._one(self.tickets.get(target, set()),
                             "unresolved" if known else "unknown_project")
        known = target.lower().rpartition("#")[0] in self.repos
        return self._one(self.tickets.get(target.lower(), set()),
                         "unresolved" if known else "unknown_project")

    @staticmethod
    def _one(keys: set[str], missing: str) -> tuple[tuple[str, ...], str]:
        if len(keys) == 1:
            return tuple(keys), "resolved"
        return tuple(sorted(keys)), "ambiguous" if keys else missing


@dataclass(frozen=True)
class GraphReference:
    """A reference a source's graph extraction could not resolve inside the source: it
    becomes an edge once its target exists in any source (``cross_source_links``)."""

    source: str
    origin: str                   # the citing document's key
    src: str                      # the node the edge starts from
    relation: str                 # MENTIONS, FIXES, BLOCKS, ...
    kind: str                     # JIRA, GITHUB, COMMIT or PATH
    target: str
    written: str
    line: int
    evidence: tuple[str, ...]     # chunk ids holding it
    evidence_text: str
    inverse: bool = False         # the edge runs target -> src (an inward Jira link)

"""``jarvis bench code``: whether the symbols Jarvis reads from a repository's source agree
with Universal Ctags, a reference no one here wrote, and how fast the files parse.

What counts as a definition, on both sides: functions, methods and the types that hold
methods (classes, interfaces, structs, enums, traits). Left out on both sides: variables,
fields, constants, enum members, modules and namespaces, type aliases, imports; ctags reports
them under kinds of its own (``variable``, ``member`` of a Go struct, ``const``,
``enumerator``, ``namespace``, ``typedef``, ``alias``…), and Jarvis either does not
make them symbols or makes them ``module``/``constant``/``type``, which these kinds exclude.
Two definitions agree when they are in the same file with the same name, their lines at
most one apart (a decorator, an annotation or a return type on its own line).

Both sides read the same files: those at the repository's HEAD, in a language both know,
that Jarvis did not skip (too large, minified, generated, vendored: counted apart).
"""

from __future__ import annotations

import json
import re
import subprocess
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from jarvis_core.sources.repo.code.languages import grammar_for
from jarvis_core.sources.repo.code.model import (
    CLASS,
    ENUM,
    FUNCTION,
    INTERFACE,
    METHOD,
    PARTIAL,
    SKIPPED,
    STRUCT,
    TRAIT,
    ParsedFile,
)
from jarvis_core.sources.repo.code.parse import parse_file
from jarvis_core.sources.repo.git import list_tree, read_blobs, resolve_head

DEFINITION_KINDS = frozenset({FUNCTION, METHOD, CLASS, INTERFACE, STRUCT, ENUM, TRAIT})
# ctags's kinds (long names) that are definitions as above, by ctags's language name.
CTAGS_KINDS = {
    "Python": {"class", "function", "member"},
    "JavaScript": {"class", "function", "method", "generator", "getter", "setter"},
    "TypeScript": {"class", "function", "method", "interface", "enum", "generator"},
    "Go": {"func", "struct", "interface"},
    "Java": {"class", "interface", "enum", "method", "annotation"},
    "Rust": {"function", "method", "struct", "enum", "interface", "macro"},
    "C": {"function", "struct", "union", "enum"},
    "C++": {"function", "class", "struct", "union", "enum"},
    "C#": {"class", "interface", "struct", "enum", "method"},
    "Kotlin": {"class", "interface", "object", "method"},
    "Ruby": {"class", "method", "singletonMethod"},
    "PHP": {"class", "interface", "trait", "function"},
}
# ctags's invented names for anonymous functions (callbacks), which are no definitions.
ANONYMOUS = ("AnonymousFunction", "AnonymousClass", "anonFunc", "__anon", "<lambda>")
CTAGS_TIMEOUT_SECONDS = 600
SAMPLE = 15  # disagreements listed per side


def run_code_benchmark(repo: Path) -> dict:
    """Agreement with ctags by language and overall, and the parse's files/s and symbols/s,
    on the files at ``repo``'s HEAD."""
    head, files = head_files(repo)
    parsed, seconds = parse_all(files)
    read = {path: result for path, result in parsed.items() if result.status != SKIPPED}
    with tempfile.TemporaryDirectory(prefix="jarvis-bench-code-") as tmp:
        for path in read:
            (Path(tmp) / path).parent.mkdir(parents=True, exist_ok=True)
            (Path(tmp) / path).write_bytes(files[path])
        tags = ctags_definitions(Path(tmp), list(read))
    ours = {(path, symbol.name, symbol.start_line) for path, result in read.items()
            for symbol in result.symbols if symbol.kind in DEFINITION_KINDS}
    symbols = sum(len(result.symbols) for result in parsed.values())
    skipped: dict[str, int] = defaultdict(int)
    for result in parsed.values():
        if result.status == SKIPPED:
            skipped[re.sub(r"\d+", "N", (result.reason or "").split(" (")[0].split(":")[0])] += 1
    return {
        "repository": str(repo), "head": head,
        "ctags": {**agreement(ours, {tag for tag in tags if tag[0] in read}, {
            path: result.language for path, result in read.items()}),
            "version": _ctags_version()},
        "parse": {"files": len(parsed), "symbols": symbols,
                  "references": sum(len(result.references) for result in parsed.values()),
                  "partial": sum(result.status == PARTIAL for result in parsed.values()),
                  "skipped": dict(skipped), "seconds": round(seconds, 3),
                  "files_per_s": round(len(parsed) / seconds, 1) if seconds else None,
                  "symbols_per_s": round(symbols / seconds, 1) if seconds else None},
    }


def head_files(repo: Path) -> tuple[str, dict[str, bytes]]:
    """``repo``'s HEAD commit and its files in a language the parser reads, by path."""
    head = resolve_head(repo, "HEAD")
    entries = [entry for entry in list_tree(repo, head) if grammar_for(entry.path)]
    blobs = read_blobs(repo, [entry.blob_sha for entry in entries])
    return head, {entry.path: blobs[entry.blob_sha] for entry in entries
                  if isinstance(blobs[entry.blob_sha], bytes)}


def parse_all(files: dict[str, bytes]) -> tuple[dict[str, ParsedFile], float]:
    """Each file parsed (those in no language read left out), and the seconds it took."""
    started = time.perf_counter()
    parsed = {path: parse_file(path, data) for path, data in files.items()}
    return ({path: result for path, result in parsed.items() if result is not None},
            time.perf_counter() - started)


def ctags_definitions(root: Path, paths: list[str]) -> set[tuple[str, str, int]]:
    """(path, name, line) of every definition Universal Ctags finds in ``paths`` (relative
    to ``root``), by the kinds CTAGS_KINDS counts for the language ctags read it as."""
    done = subprocess.run(
        ["ctags", "--output-format=json", "--fields=+nKl", "-f", "-", "-L", "-"],
        cwd=root, input="\n".join(paths).encode(), capture_output=True,
        timeout=CTAGS_TIMEOUT_SECONDS, check=True)
    found = set()
    for line in done.stdout.splitlines():
        tag = json.loads(line)
        if tag.get("_type") == "tag" and _is_definition(tag):
            found.add((tag["path"], tag["name"], int(tag["line"])))
    return found


def _is_definition(tag: dict) -> bool:
    """A tag of a definition kind, not named by ctags itself (an anonymous function or
    class), on a line that declares it where ctags is known to tag more: in JavaScript and
    TypeScript a ``class`` only where the line defines that name (``class X``, ``function
    X``, ``x.X = function``), as ctags also calls a variable holding an object literal (``var
    users = {…}``) and the object a prototype method is put on a class; in Kotlin a
    ``method`` only on a line with ``fun``, as ctags also tags a lambda's parameters
    (``forEach { arg -> … }``) as methods."""
    language, name = tag.get("language", ""), tag["name"]
    if tag.get("kind") not in CTAGS_KINDS.get(language, ()) or name.startswith(ANONYMOUS):
        return False
    word, pattern = re.escape(name), tag.get("pattern", "")
    if language in ("JavaScript", "TypeScript") and tag["kind"] == "class":
        return re.search(rf"\b(class|function)\s+{word}\b|\b{word}\s*[=:]\s*(async\s+)?"
                         r"function\b", pattern) is not None
    if language == "Kotlin" and tag["kind"] == "method":
        return re.search(r"\bfun\b", pattern) is not None
    return True


def agreement(ours: set[tuple[str, str, int]], theirs: set[tuple[str, str, int]],
              languages: dict[str, str]) -> dict:
    """Recall and precision of ``ours`` against ``theirs`` matched one to one by file and
    name with lines at most one apart, overall and by each file's language."""
    matched, missed, extra = _match(ours, theirs)
    by_language: dict[str, dict] = {}
    for language in sorted(set(languages.values())):
        def mine(items, language=language):
            return [item for item in items if languages.get(item[0]) == language]
        by_language[language] = _figures(len(mine(matched)), len(mine(missed)),
                                         len(mine(extra)))
    return {**_figures(len(matched), len(missed), len(extra)), "languages": by_language,
            "missed": sorted(missed)[:SAMPLE], "extra": sorted(extra)[:SAMPLE]}


def _match(ours: set, theirs: set) -> tuple[list, list, list]:
    """Pairs (file, name) and greedily matches lines nearest first, within one line."""
    lines_of: dict[tuple[str, str], list[int]] = defaultdict(list)
    for path, name, line in sorted(ours):
        lines_of[path, name].append(line)
    matched, missed = [], []
    for path, name, line in sorted(theirs):
        candidates = lines_of.get((path, name), [])
        near = min((abs(mine - line), mine) for mine in candidates) if candidates else None
        if near is not None and near[0] <= 1:
            candidates.remove(near[1])
            matched.append((path, name, line))
        else:
            missed.append((path, name, line))
    extra = [(path, name, line) for (path, name), lines in lines_of.items() for line in lines]
    return matched, missed, extra


def _figures(matched: int, missed: int, extra: int) -> dict:
    return {"ctags_definitions": matched + missed, "jarvis_definitions": matched + extra,
            "matched": matched,
            "recall": round(matched / (matched + missed), 4) if matched + missed else None,
            "precision": round(matched / (matched + extra), 4) if matched + extra else None}


def _ctags_version() -> str:
    done = subprocess.run(["ctags", "--version"], capture_output=True, text=True, check=True)
    return done.stdout.splitlines()[0]

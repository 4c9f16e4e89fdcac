"""Which symbols of a repository a name used in its code means, by name alone (no types):

1. the scope the name is used in and those around it (a nested function; a class's own
   members where the language lets a bare name mean one: Java, Kotlin, C#, C++, Ruby);
   ``self`` / ``this`` / ``cls`` (and a Go method's receiver) mean the enclosing type, its
   members first, then its resolved bases';
2. the file's own top-level definitions;
3. the file's imports (``imports.py`` says where each leads; an import that leads outside
   the repository ends the search: ``os.path.join`` is not some ``join`` of ours); a
   ``*`` import's files; the other files of the package where a package spans a folder
   (Go, Java, Kotlin);
4. a definition elsewhere in the repository: one (or overloads of one) is a guess, several
   are ambiguous.

Steps 1-3 are exact (``HIGH``), step 4 is ``MEDIUM``; ``AMBIGUOUS`` lists the candidates.
Every lookup is a dictionary access, so resolving is linear in the references.
"""

from __future__ import annotations

import posixpath
import re
from collections import defaultdict
from collections.abc import Iterable

from jarvis_core.sources.repo.code.imports import Import
from jarvis_core.sources.repo.code.model import (
    CLASS,
    CONSTANT,
    ENUM,
    FUNCTION,
    INTERFACE,
    METHOD,
    STRUCT,
    TRAIT,
    repo_file_key,
    symbol_key,
)

HIGH, MEDIUM, AMBIGUOUS = "high", "medium", "ambiguous"
MAX_CANDIDATES = 10  # an ambiguous name lists at most this many candidates (the first by key)
Resolution = tuple[tuple[str, ...], str | None]  # symbol keys, HIGH / MEDIUM / AMBIGUOUS
NOTHING: Resolution = ((), None)

# "type": the parser's kind for a named type that is none of the others (Go `type X int`).
TYPE_KINDS = frozenset({CLASS, INTERFACE, STRUCT, ENUM, TRAIT, "type"})
# What a bare name may call elsewhere: a function, or a type it constructs or converts to.
_BARE_CALLABLE = frozenset({FUNCTION, CLASS, STRUCT, "type"})
_METHODS = frozenset({METHOD})
_SELF = frozenset({"self", "this", "cls", "$this", "Self", "static"})
_SUPER = frozenset({"super", "super()", "parent"})
_IMPLICIT_THIS = frozenset({"java", "kotlin", "csharp", "cpp", "ruby"})
_PACKAGE_FOLDERS = frozenset({"go", "java", "kotlin"})
_SCRIPTS = frozenset({"javascript", "typescript"})
_RECEIVER = re.compile(r"^\s*func\s*\(\s*([A-Za-z_]\w*)\s")
_SEPARATORS = re.compile(r"::|->|\\")
_REEXPORT_DEPTH = 3
# JavaScript's standard global objects (ECMAScript, browsers, Node): `console.log` is never a
# `log` method of ours.
_SCRIPT_GLOBALS = frozenset({"console", "Math", "JSON", "Object", "Array", "Promise", "Number",
                             "String", "Date", "Reflect", "Symbol", "window", "document",
                             "process", "globalThis"})


def written_parts(qualifier: str | None) -> list[str]:
    """A qualifier as dotted parts: ``Foo::Bar`` and ``$obj->x`` read like ``Foo.Bar``."""
    return [p for p in _SEPARATORS.sub(".", qualifier).split(".") if p] if qualifier else []


class SymbolIndex:
    """A repository's symbols by scope, file, folder and name, and each file's imports."""

    def __init__(self, repo: str, files: dict[str, str], symbols: list[dict],
                 imports: dict[str, list[Import]]) -> None:
        """``files``: path -> language; ``symbols``: code_symbols rows; ``imports``: each
        file's resolved imports in order."""
        self.repo, self.languages = repo, files
        self.rows: dict[str, dict] = {}
        self.members: dict[tuple[str, str], list[str]] = defaultdict(list)
        self.owner: dict[str, str] = {}
        self.by_name: dict[str, list[str]] = defaultdict(list)
        self.package: dict[tuple[str, str], list[str]] = defaultdict(list)
        self.file_types: dict[tuple[str, str], list[str]] = defaultdict(list)
        self.types_in_file: dict[str, list[str]] = defaultdict(list)
        self.bases: dict[str, list[str]] = defaultdict(list)
        self.guesses: dict[tuple[str, frozenset[str]], Resolution] = {}
        types_in_folder: dict[tuple[str, str], list[str]] = defaultdict(list)
        for row in symbols:
            key = symbol_key(repo, row["path"], row["symbol_id"])
            self.rows[key] = row
            self.by_name[row["name"]].append(key)
            if row["kind"] in TYPE_KINDS:
                self.file_types[(row["path"], row["name"])].append(key)
                self.types_in_file[row["path"]].append(key)
                types_in_folder[(posixpath.dirname(row["path"]), row["name"])].append(key)
        for key, row in self.rows.items():
            path, parent = row["path"], row["parent"]
            owner = symbol_key(repo, path, parent) if parent else repo_file_key(self.repo, path)
            if parent and owner not in self.rows:  # a Go method of a type in another file
                named = re.split(r"[\[<]", parent.split(".")[-1])[0].lstrip("*&")
                types = types_in_folder.get((posixpath.dirname(path), named))
                owner = types[0] if types and len(types) == 1 else repo_file_key(self.repo, path)
            self.owner[key] = owner
            self.members[(owner, row["name"])].append(key)
            if owner == repo_file_key(self.repo, path):
                self.package[(posixpath.dirname(path), row["name"])].append(key)
        self.bindings: dict[str, dict[str, Import]] = {}
        self.stars: dict[str, list[str]] = {}
        for path, found in imports.items():
            self.bindings[path] = {i.local: i for i in found if i.local}
            self.stars[path] = [f for i in found if i.star for f in i.files]

    # -- lookups -----------------------------------------------------------------------

    def decide(self, keys: Iterable[str], confidence: str) -> Resolution:
        """``keys`` at one confidence; several definitions are ambiguous unless they are
        overloads of one (the same qualified name in the same file)."""
        keys = tuple(dict.fromkeys(keys))
        if not keys:
            return NOTHING
        first = self.rows[keys[0]]
        if all(self.rows[k]["qualified_name"] == first["qualified_name"]
               and self.rows[k]["path"] == first["path"] for k in keys):
            return keys, confidence
        return tuple(sorted(keys)[:MAX_CANDIDATES]), AMBIGUOUS

    def top(self, files: Iterable[str], name: str, depth: int = 0) -> list[str]:
        """Top-level definitions of ``name`` in ``files``, or what those files import under
        that name (a package's ``__init__.py``, an ``index.ts`` re-exporting)."""
        found: list[str] = []
        for path in files:
            keys = self.members.get((repo_file_key(self.repo, path), name))
            if keys:
                found += keys
            elif depth < _REEXPORT_DEPTH:
                again = self.bindings.get(path, {}).get(name)
                if again is not None and again.files:
                    found += self.top(again.files, again.imported or name, depth + 1)
        return found

    def member(self, type_key: str, name: str, bases_only: bool = False) -> list[str]:
        """The members named ``name`` of a type, else of its bases (nearest first)."""
        seen, level = {type_key}, list(self.bases.get(type_key, ())) if bases_only \
            else [type_key]
        while level:
            found = [k for t in level for k in self.members.get((t, name), ())]
            if found:
                return found
            level = [b for t in level for b in self.bases.get(t, ()) if b not in seen]
            seen.update(level)
        return []

    def chain(self, scope: str | None, path: str) -> list[str]:
        """The symbol a reference occurs in and every symbol around it, innermost first."""
        keys, key = [], symbol_key(self.repo, path, scope) if scope else None
        while key is not None and key in self.rows:
            keys.append(key)
            key = self.owner[key]
        return keys

    def enclosing_type(self, chain: list[str]) -> str | None:
        return next((k for k in chain if self.rows[k]["kind"] in TYPE_KINDS), None)

    def elsewhere(self, name: str, kinds: frozenset[str]) -> Resolution:
        """Step 4, once per name and kinds (a common method name is met thousands of
        times)."""
        found = self.guesses.get((name, kinds))
        if found is None:
            found = self.guesses[(name, kinds)] = self.decide(
                [k for k in self.by_name.get(name, ()) if self.rows[k]["kind"] in kinds], MEDIUM)
        return found

    # -- names in files ------------------------------------------------------------------

    def _in_file(self, path: str, name: str, types_only: bool) -> Resolution | None:
        """Steps 2-3 for a bare name: a Resolution, NOTHING when an import from outside the
        repository binds it, None when the file knows nothing of it."""
        if types_only:
            own = self.file_types.get((path, name))
        else:
            own = [k for k in self.members.get((repo_file_key(self.repo, path), name), ())
                   if self.rows[k]["kind"] != CONSTANT]
        if own:
            return self.decide(own, HIGH)
        binding = self.bindings.get(path, {}).get(name)
        if binding is not None:
            if not binding.files:
                return NOTHING
            return self.decide(self.top(binding.files, binding.imported or name), HIGH)
        starred = self.top(self.stars.get(path, ()), name)
        if not starred and self.languages.get(path) in _PACKAGE_FOLDERS:
            starred = self.package.get((posixpath.dirname(path), name), [])
        if starred:
            return self.decide(starred, HIGH)
        return None

    def _qualified(self, path: str, parts: list[str], name: str) -> Resolution | None:
        """``a.b.name`` where ``a`` (or ``a.b``) is imported or a type the file sees:
        a Resolution, or None when its head is nothing the file knows."""
        bindings = self.bindings.get(path, {})
        for cut in range(len(parts), 0, -1):
            binding = bindings.get(".".join(parts[:cut]))
            if binding is None:
                continue
            if not binding.files:
                return NOTHING
            rest = parts[cut:]
            heads = self.top(binding.files, binding.imported) if binding.imported else []
            if not heads:  # a module (`import a.b as x` reads like `from a import b`)
                if not rest:
                    return self.decide(self.top(binding.files, name), HIGH)
                heads, rest = self.top(binding.files, rest[0]), rest[1:]
            return self._members_of(heads, rest, name)
        heads = self._in_file(path, parts[0], types_only=True)
        if heads is None or not heads[0] or heads[1] != HIGH:
            return None
        return self._members_of(list(heads[0]), parts[1:], name)

    def _members_of(self, heads: list[str], rest: list[str], name: str) -> Resolution:
        for part in [*rest, name]:
            heads = [k for head in heads for k in self.member(head, part)]
        return self.decide(heads, HIGH)

    # -- references ----------------------------------------------------------------------

    def call(self, path: str, scope: str | None, name: str,
             qualifier: str | None) -> Resolution:
        """What the call ``qualifier.name(…)`` made in ``scope`` of ``path`` calls."""
        chain = self.chain(scope, path)
        parts = written_parts(qualifier)
        if not parts:
            implicit_this = self.languages.get(path) in _IMPLICIT_THIS
            for key in chain:
                if self.rows[key]["kind"] in TYPE_KINDS:
                    found = self.member(key, name) if implicit_this else []
                else:
                    found = self.members.get((key, name), [])
                if found:
                    return self.decide(found, HIGH)
            found = self._in_file(path, name, types_only=False)
            return found if found is not None else self.elsewhere(name, _BARE_CALLABLE)
        if len(parts) == 1 and (parts[0] in _SELF or parts[0] in _SUPER
                                or parts[0] == self._receiver(chain)):
            owner = self.enclosing_type(chain)
            found = self.member(owner, name, bases_only=parts[0] in _SUPER) if owner else []
            return self.decide(found, HIGH) if found else self.elsewhere(name, _METHODS)
        if parts[0] in _SCRIPT_GLOBALS and self.languages.get(path) in _SCRIPTS:
            return NOTHING
        found = self._qualified(path, parts, name)
        return found if found is not None else self.elsewhere(name, _METHODS)

    def _receiver(self, chain: list[str]) -> str | None:
        """A Go method's receiver variable (``s`` in ``func (s *Server) Start()``)."""
        method = next((k for k in chain if self.rows[k]["kind"] == METHOD), None)
        if method is None or self.languages.get(self.rows[method]["path"]) != "go":
            return None
        match = _RECEIVER.match(self.rows[method]["signature"] or "")
        return match.group(1) if match else None

    def base(self, path: str, written: str) -> Resolution:
        """The type a base written as ``written`` (``Base``, ``pkg.Base[T]``) in ``path``
        names."""
        parts = written_parts(re.split(r"[<\[(]", written, maxsplit=1)[0].split()[-1]
                              if written.strip() else "")
        if not parts:
            return NOTHING
        *head, name = parts
        found = self._qualified(path, head, name) if head else \
            self._in_file(path, name, types_only=True)
        return found if found is not None else self.elsewhere(name, TYPE_KINDS)

    def owner_type(self, path: str, scope: str | None, line: int) -> str | None:
        """The type a base reference belongs to: its scope when that is a type, else the
        innermost type of the file whose span holds the line."""
        if scope:
            key = symbol_key(self.repo, path, scope)
            if key in self.rows and self.rows[key]["kind"] in TYPE_KINDS:
                return key
        holding = [k for k in self.types_in_file.get(path, ())
                   if self.rows[k]["start_line"] <= line <= self.rows[k]["end_line"]]
        return max(holding, key=lambda k: self.rows[k]["start_line"], default=None)

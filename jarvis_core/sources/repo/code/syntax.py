"""Reading one syntax tree into symbols and references, as a language's table
(languages.py) describes it. The tree is walked with an explicit stack, never Python
recursion, to a bounded depth and within the file's time budget."""

from __future__ import annotations

import re
import textwrap
import time
from dataclasses import dataclass, replace

from tree_sitter import Node

from jarvis_core.sources.repo.code import references
from jarvis_core.sources.repo.code.languages import FUNCTION_VALUES, Definition, Grammar
from jarvis_core.sources.repo.code.model import (
    CALL,
    CLASS,
    ENUM,
    FUNCTION,
    IMPORT,
    INTERFACE,
    METHOD,
    STRUCT,
    TRAIT,
    CodeReference,
    Symbol,
)

TYPE_KINDS = frozenset({CLASS, INTERFACE, STRUCT, ENUM, TRAIT})
_UPPER = re.compile(r"^[A-Z][A-Z0-9_]*$")
_MAX_SIGNATURE = 2000
_TIME_CHECK_EVERY = 1024  # nodes between two looks at the clock


@dataclass(frozen=True)
class _Scope:
    """Where the walk is: the enclosing symbol (its index), the prefix qualifying names
    inside it, whether a function here is a method, and whether definitions here have no
    name to be reached by."""

    symbol: int | None = None
    prefix: str = ""
    typed: bool = False
    anonymous: bool = False  # inside an anonymous class: no symbols


@dataclass
class _Found:
    node: Node
    outer: Node               # the definition with its wrappers (decorators, export)
    body: Node | None
    kind: str
    name: str
    qualified_name: str
    name_line: int
    parent: int | None


class FileReader:
    """The symbols and references of one file; ``truncated`` names what the walk left out
    (nesting over ``max_depth``, the time budget)."""

    def __init__(self, grammar: Grammar, data: bytes, max_depth: int, deadline: float) -> None:
        self.grammar, self.data = grammar, data
        self.max_depth, self.deadline = max_depth, deadline
        self.found: list[_Found] = []
        self.values: set[int] = set()  # function nodes read as a definition's value
        self.references: list[tuple[str, str, str | None, int | None | str, int]] = []
        self.truncated: str | None = None

    def text(self, node: Node) -> str:
        return self.data[node.start_byte:node.end_byte].decode("utf-8", "replace")

    def read(self, root: Node) -> tuple[list[Symbol], list[CodeReference]]:
        stack: list[tuple[Node, _Scope, int]] = [(root, _Scope(), 0)]
        seen = 0
        while stack:
            node, scope, depth = stack.pop()
            if depth > self.max_depth:
                self.truncated = f"nesting deeper than {self.max_depth} levels was not read"
                continue
            seen += 1
            if seen % _TIME_CHECK_EVERY == 0 and time.monotonic() > self.deadline:
                self.truncated = "the time budget ran out before the end of the file"
                break
            inner = self._visit(node, scope) if node.type in self.grammar.read else scope
            if node.named_child_count:
                stack.extend((child, inner, depth + 1) for child in reversed(node.named_children))
        ids = _symbol_ids(self.found)
        return self._symbols(ids), self._references(ids)

    def _visit(self, node: Node, scope: _Scope) -> _Scope:
        """Record what ``node`` defines or references; the scope its children are in."""
        grammar, kind = self.grammar, node.type
        inner = scope
        if kind in grammar.anonymous:
            inner = replace(scope, anonymous=True)
        elif kind in grammar.definitions and not scope.anonymous:
            inner = self._define(node, grammar.definitions[kind], scope) or scope
        elif kind in grammar.scopes:
            owner = _type_name(node.child_by_field_name(grammar.scopes[kind]))
            if owner:
                inner = _Scope(scope.symbol, f"{scope.prefix}{self.text(owner)}.", True)
        if kind in grammar.definitions or kind in grammar.scopes:
            for field, base_kind in grammar.base_fields.items():
                clause = node.child_by_field_name(field)
                if clause is not None:
                    self._bases(clause, base_kind, inner)
        if kind in grammar.bases:
            self._bases(node, grammar.bases[kind], scope)
        if kind in grammar.calls:
            self._call(node, grammar.calls[kind], scope)
        if kind in grammar.imports:
            for name, qualifier in references.imports(grammar.imports[kind], node, self.text):
                self._refer(IMPORT, name, qualifier, scope, node)
        return inner

    def _define(self, node: Node, specs: Definition | tuple[Definition, ...],
                scope: _Scope) -> _Scope | None:
        for spec in specs if isinstance(specs, tuple) else (specs,):
            found = self._definition(node, spec, scope)
            if found is not None:
                self.found.append(found)
                return _Scope(len(self.found) - 1, found.qualified_name + ".",
                              found.kind in TYPE_KINDS)
        return None

    def _definition(self, node: Node, spec: Definition, scope: _Scope) -> _Found | None:
        if node.id in self.values:  # the function value of a definition already made
            return None
        value = node.child_by_field_name(spec.value) if spec.value else None
        if spec.value and (value is None or value.type not in FUNCTION_VALUES):
            return None
        if spec.inside is not None and (node.parent is None or node.parent.parent is None
                                        or node.parent.parent.type not in spec.inside):
            return None
        body = (value or node).child_by_field_name(spec.body)
        if body is None and self.grammar.bodies:
            body = next((child for child in node.named_children
                         if child.type in self.grammar.bodies), None)
        if spec.needs_body and body is None:
            return None
        named = node.child_by_field_name(spec.name)
        if spec.upper and (named is None or named.type != "identifier"
                           or (scope.symbol is not None and not scope.typed)):
            return None
        resolved = references.name_node(named)
        if resolved is None and spec.unnamed and named is None:
            resolved = node, []
        if resolved is None:
            return None
        name_node, owner_nodes = resolved
        name = self.text(name_node) if resolved[0] != node else spec.unnamed
        if not name or (spec.upper and not _UPPER.match(name)):
            return None
        owner = _type_name(node.child_by_field_name(spec.owner)) if spec.owner else None
        written = [self.text(part) for part in ([owner] if owner else owner_nodes)]
        owners = [part for text in written for part in re.split(r"\.|::|->", text)
                  if part and part not in ("prototype", "this", "self")]
        kind = spec.kind
        if spec.kinds:
            kind = spec.kinds.get(getattr(node.child_by_field_name("type"), "type", ""), kind)
        if kind == FUNCTION and scope.typed and not owners:
            kind = METHOD
        if value is not None:
            self.values.add(value.id)
        return _Found(node, self._outer(node), body, kind, name,
                      scope.prefix + "".join(f"{part}." for part in owners) + name,
                      name_node.start_point.row + 1, scope.symbol)

    def _outer(self, node: Node) -> Node:
        outer = node
        while outer.parent is not None and outer.parent.type in self.grammar.wrappers:
            outer = outer.parent
        return outer

    def _bases(self, clause: Node, kind: str, scope: _Scope) -> None:
        for name in references.type_names(clause):
            self._refer(kind, self.text(name), None, scope, name)

    def _call(self, node: Node, field: str, scope: _Scope) -> None:
        called = references.callee(node, field)
        if called is None:
            return
        name_node, callee_node = called
        name = self.text(name_node)
        qualifier = references.qualifier(self.data[callee_node.start_byte:name_node.start_byte])
        if name in self.grammar.import_calls and qualifier is None:
            module = references.string_argument(node, self.text)
            if module:
                self._refer(IMPORT, module, None, scope, node)
                return
        self._refer(CALL, name, qualifier, scope, node)

    def _refer(self, kind: str, name: str, qualifier: str | None, scope: _Scope,
               node: Node) -> None:
        where = scope.symbol if scope.symbol is not None else scope.prefix.rstrip(".") or None
        self.references.append((kind, name, qualifier, where, node.start_point.row + 1))

    def _symbols(self, ids: list[str]) -> list[Symbol]:
        children: dict[int, list[_Found]] = {}
        for found in self.found:
            if found.parent is not None:
                children.setdefault(found.parent, []).append(found)
        return [Symbol(
            symbol_id=ids[index], kind=found.kind, name=found.name,
            qualified_name=found.qualified_name, signature=self._signature(found),
            doc=self._doc(found), start_line=found.name_line,
            end_line=found.node.end_point.row + 1,
            parent=None if found.parent is None else ids[found.parent],
            text=self._elided(found, children.get(index, [])),
        ) for index, found in enumerate(self.found)]

    def _references(self, ids: list[str]) -> list[CodeReference]:
        return [CodeReference(kind, name, qualifier,
                              ids[where] if isinstance(where, int) else where, line)
                for kind, name, qualifier, where, line in self.references]

    def _signature(self, found: _Found) -> str:
        """From the keyword that declares it on its line (``export``, Go's ``type``, not a
        decorator above) to its body, comments left out; without a body, its first line."""
        node, body, outer = found.node, found.body, found.outer
        start = outer.start_byte if outer.start_point.row == node.start_point.row \
            else node.start_byte
        if body is not None and body.parent == node:
            end = max((child.end_byte for child in node.children
                       if child.end_byte <= body.start_byte
                       and child.type not in self.grammar.comments), default=body.start_byte)
        elif body is not None:
            end = body.start_byte
        else:
            end = self.data.find(b"\n", start, node.end_byte)
            end = node.end_byte if end < 0 else end
        head = self.data[start:end].decode("utf-8", "replace").rstrip()
        return head.removesuffix("{").rstrip()[:_MAX_SIGNATURE]

    def _doc(self, found: _Found) -> str:
        if self.grammar.docstrings and found.body is not None:
            first = found.body.named_children[:1]
            if first and first[0].type == "expression_statement" and \
                    first[0].named_children[:1] and first[0].named_children[0].type == "string":
                return references.docstring(self.text(first[0].named_children[0]))
        return references.leading_comment(found.outer, self.grammar, self.text)

    def _elided(self, found: _Found, children: list[_Found]) -> str:
        """The symbol's own code: each nested symbol's body replaced by ``...``."""
        start, end = found.outer.start_byte, found.node.end_byte
        parts, at = [], start
        for child in sorted(children, key=lambda c: c.node.start_byte):
            if child.body is None or child.body.start_byte < at:
                continue
            parts += [self.data[at:child.body.start_byte], b"..."]
            at = child.node.end_byte
        parts.append(self.data[at:end])
        indent = " " * found.outer.start_point.column  # so that dedent sees the first line's
        return textwrap.dedent(indent + b"".join(parts).decode("utf-8", "replace"))


def _type_name(node: Node | None) -> Node | None:
    """The first type identifier in ``node`` (a receiver ``(c *Context)``, an
    ``impl<T> Trait for Type<T>``'s type)."""
    stack = [node] if node is not None else []
    while stack:
        current = stack.pop()
        if current.type == "type_identifier":
            return current
        stack.extend(reversed(current.named_children))
    return None


def _symbol_ids(found: list[_Found]) -> list[str]:
    """Qualified names, with ``@<line>`` where a file defines one more than once."""
    counts: dict[str, int] = {}
    for item in found:
        counts[item.qualified_name] = counts.get(item.qualified_name, 0) + 1
    ids, taken = [], set()
    for item in found:
        symbol_id = item.qualified_name
        if counts[symbol_id] > 1:
            symbol_id = f"{symbol_id}@{item.name_line}"
        while symbol_id in taken:  # two definitions on one line
            symbol_id += "'"
        taken.add(symbol_id)
        ids.append(symbol_id)
    return ids

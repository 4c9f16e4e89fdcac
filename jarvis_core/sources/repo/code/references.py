"""The small readings of syntax nodes that every language shares: a definition's name behind
its declarators, a call's name and what it was called on, an import's module and name, the
base types a clause lists, a docstring or leading comment without its markers."""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Iterator

from tree_sitter import Node

from jarvis_core.sources.repo.code.languages import Grammar

# Node types that are a name, in one grammar or another.
IDENTIFIERS = frozenset({
    "identifier", "type_identifier", "field_identifier", "property_identifier",
    "private_property_identifier", "shorthand_property_identifier", "constant", "name",
    "simple_identifier", "destructor_name", "operator_name", "package_identifier",
    "namespace_identifier", "operator", "setter"})  # Ruby's `def <=>`, `def name=`
# Fields leading from a declarator, member expression or call to the name it ends in.
_NAME_FIELDS = ("declarator", "name", "property", "field", "attribute", "method")
_CALLEE_FIELDS = _NAME_FIELDS + ("function",)  # Rust's generic_function
# Fields holding what a member expression or qualified name is taken from.
_OWNER_FIELDS = ("object", "scope", "path", "qualifier", "receiver", "expression", "operand")
# Maximal nodes naming a type in a base clause; the subtrees never searched for one.
_TYPE_NAMES = IDENTIFIERS | {"scoped_type_identifier", "scoped_identifier", "attribute",
                             "member_expression", "qualified_name", "qualified_identifier",
                             "scope_resolution", "nested_type_identifier"}
_NOT_BASES = frozenset({"type_arguments", "type_argument_list", "keyword_argument", "arguments",
                        "value_arguments", "type_parameters", "call_suffix", "comment"})
_MAX_STEPS = 32  # a name is never further down than this
_MAX_QUALIFIER = 200
_QUOTES = "'\"`<>"


def name_node(node: Node | None) -> tuple[Node, list[Node]] | None:
    """The name a definition's name field ends in (``*f(int)`` → ``f``, ``a.b.c`` → ``c``),
    with the owners written before it (``Foo::bar`` → ``Foo``)."""
    return _name_in(node, _NAME_FIELDS, last_child=False)


def callee(call: Node, field: str) -> tuple[Node, Node] | None:
    """The called name and the expression it ends (``os.path.join(…)`` → ``join``, and
    ``os.path.join``); ``field`` "" reads the call node itself (Java's ``obj.m()``)."""
    node = call.child_by_field_name(field) if field else call
    if node is not None and field == "" and _first_field(node, _NAME_FIELDS) is None:
        node = node.named_children[0] if node.named_children else None  # Kotlin
    found = _name_in(node, _CALLEE_FIELDS, last_child=True)
    return (found[0], node) if found is not None and node is not None else None


def _name_in(node: Node | None, fields: tuple[str, ...], last_child: bool
             ) -> tuple[Node, list[Node]] | None:
    """Down ``fields`` (or, with ``last_child``, the last child that is no argument list:
    Kotlin's navigation suffix, a generic type's name) to an identifier, with the owners
    passed on the way."""
    owners: list[Node] = []
    for _ in range(_MAX_STEPS):
        if node is None:
            return None
        if node.type in IDENTIFIERS:
            return node, owners
        owner = _first_field(node, _OWNER_FIELDS)
        if owner is not None:
            owners.append(owner)
        inner = _first_field(node, fields)
        if inner is None and last_child:
            parts = [child for child in node.named_children if child.type not in _NOT_BASES]
            inner = parts[-1] if parts else None
        node = inner
    return None


def qualifier(written: bytes) -> str | None:
    """What a call was made on, as written, without the member operator."""
    text = " ".join(written.decode("utf-8", "replace").split()).rstrip(".:->?&!")
    return text[:_MAX_QUALIFIER] or None


def string_argument(call: Node, text: Callable[[Node], str]) -> str | None:
    """The first argument of ``require('x')`` when it is a plain string."""
    arguments = call.child_by_field_name("arguments")
    for argument in arguments.named_children if arguments is not None else ():
        if argument.type in ("string", "string_literal", "interpreted_string_literal"):
            return text(argument).strip(_QUOTES) or None
        return None
    return None


def imports(how: str, node: Node, text: Callable[[Node], str]
            ) -> Iterator[tuple[str, str | None]]:
    """(module or path as written, imported name or the module's alias) for one import."""
    if how == "python":
        module = node.child_by_field_name("module_name")
        for child in node.children_by_field_name("name"):
            original = child.child_by_field_name("name") or child
            if module is not None:
                yield text(module), text(original)
            else:
                alias = child.child_by_field_name("alias")
                yield text(original), text(alias) if alias is not None else None
        if module is not None and any(c.type == "wildcard_import" for c in node.children):
            yield text(module), "*"
    elif how == "javascript":
        yield from _javascript_imports(node, text)
    elif how == "path":
        path, alias = node.child_by_field_name("path"), node.child_by_field_name("name")
        if path is not None:
            yield text(path).strip(_QUOTES), text(alias) if alias is not None else None
    elif how == "dotted":
        written = text(node).removeprefix("import").removesuffix(";").replace(" ", "")
        module, _, name = written.removeprefix("static").rpartition(".")
        yield module, name or None
    else:  # "written": the statement without its keyword
        written = " ".join(text(node).split()).rstrip(";")
        yield written.split(" ", 1)[-1], None


def _javascript_imports(node: Node, text: Callable[[Node], str]
                        ) -> Iterator[tuple[str, str | None]]:
    source = node.child_by_field_name("source")
    if source is None:
        return
    module = text(source).strip(_QUOTES)
    clause = next((c for c in node.named_children if c.type == "import_clause"), None)
    if clause is None:
        yield module, None
        return
    for part in clause.named_children:
        if part.type == "identifier":
            yield module, "default"
        elif part.type == "namespace_import":
            yield module, text(part.named_children[-1]) if part.named_children else None
        elif part.type == "named_imports":
            for specifier in part.named_children:
                name = specifier.child_by_field_name("name")
                if name is not None:
                    yield module, text(name)


def type_names(clause: Node) -> Iterator[Node]:
    """The base types a clause lists (``(Base, mixins.Logged, metaclass=M)`` → ``Base``,
    ``mixins.Logged``), without their type arguments."""
    stack = [clause]
    while stack:
        node = stack.pop()
        if node.type in _TYPE_NAMES:
            yield node
        elif node.type not in _NOT_BASES:
            stack.extend(reversed(node.named_children))


def docstring(literal: str) -> str:
    """A string literal's text without prefix and quotes, indentation cleaned."""
    body = re.sub(r'^[rRbBuUfF]*("""|\'\'\'|"|\')', "", literal)
    body = re.sub(r'("""|\'\'\'|"|\')$', "", body)
    return inspect.cleandoc(body)


def leading_comment(outer: Node, grammar: Grammar, text: Callable[[Node], str]) -> str:
    """The comment lines right above a definition (attributes between them skipped), without
    their markers."""
    lines: list[str] = []
    row = outer.start_point.row
    while outer.prev_sibling is None and outer.parent is not None and \
            outer.parent.start_byte == outer.start_byte:  # first in a body (Ruby)
        outer = outer.parent
    sibling = outer.prev_sibling
    while sibling is not None and sibling.end_point.row >= row - 1 and \
            (sibling.type in grammar.comments or sibling.type in grammar.wrappers):
        if sibling.type in grammar.comments:
            before = sibling.prev_sibling
            if sibling.start_point.row == row or (  # (a `#include` ends with its newline)
                    before is not None and before.end_point.row == sibling.start_point.row
                    and before.end_point.column > 0):
                break  # a comment ending a line of code is that code's, not the definition's
            lines[:0] = _uncommented(text(sibling))
        row = sibling.start_point.row
        sibling = sibling.prev_sibling
    return "\n".join(lines).strip()


def _uncommented(comment: str) -> list[str]:
    lines = []
    for line in comment.splitlines():
        line = re.sub(r"^\s*(/\*+|\*+/|///?!?|#|\*|--)", "", line)
        lines.append(re.sub(r"\s*\*+/\s*$", "", line).strip())
    return lines


def _first_field(node: Node, fields: tuple[str, ...]) -> Node | None:
    for field in fields:
        child = node.child_by_field_name(field)
        if child is not None:
            return child
    return None

"""The languages Jarvis reads source code in: which file names each covers, where its grammar
comes from (a tree-sitter grammar wheel from PyPI, loaded on first use, nothing fetched at run
time) and, as data, which syntax nodes define symbols, call, import and name base types.

One table for every language rather than the grammars' own ``queries/tags.scm``: those are
uneven (C# and Kotlin ship none; Python's omits methods and docstrings; several rely on
predicates such as ``#strip!`` that only the tree-sitter CLI implements) and none gives the
enclosing names a qualified name needs.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cache, cached_property
from pathlib import PurePosixPath

from tree_sitter import Language

from jarvis_core.sources.repo.code.model import (
    CLASS,
    CONSTANT,
    ENUM,
    EXTENDS,
    FUNCTION,
    IMPLEMENTS,
    INTERFACE,
    METHOD,
    MODULE,
    STRUCT,
    TRAIT,
    TYPE,
)

# The nodes a function value is written as: `const f = () => {}` defines f.
FUNCTION_VALUES = frozenset({"arrow_function", "function_expression", "generator_function",
                             "lambda"})


@dataclass(frozen=True)
class Definition:
    """A node type that defines a symbol of ``kind`` (a function becomes a method inside a
    type). ``name`` is the field holding its name, followed down nested declarators or member
    expressions to the name itself. ``value``: it defines a function only when that field
    holds one (``const f = () => …``); ``kinds``: its kind by the node type in field ``type``
    (Go's ``type X struct``), another type giving ``kind``; ``upper``: only a name in capitals
    at file or type level (a constant by convention); ``owner``: a field naming the type the
    symbol belongs to (Go's method receiver); ``inside``: only where its parent's parent is
    one of these (an object literal's function is a method of a declared object, not of an
    argument); ``unnamed``: its name when none is written (Kotlin's companion object);
    ``body``: the field holding its body (in the
    value's node when ``value`` is set); ``needs_body``: without one it is only a mention
    (C's ``struct s *p;``)."""

    kind: str
    name: str = "name"
    body: str = "body"
    needs_body: bool = False
    value: str | None = None
    kinds: Mapping[str, str] = field(default_factory=dict)
    upper: bool = False
    owner: str | None = None
    inside: frozenset[str] | None = None
    unnamed: str | None = None


@dataclass(frozen=True)
class Grammar:
    """How one language's syntax tree is read. ``scopes``: nodes that qualify the names inside
    them without being symbols (a Rust ``impl``), by the field naming the type; ``wrappers``:
    nodes around a definition that its leading comment precedes (decorators, ``export``);
    ``calls``: call node types by the field holding the callee ("" for the node itself);
    ``imports``: import node types by the way they are read (references.py); ``import_calls``:
    functions whose string argument is imported (``require``); ``bases``: nodes and
    ``base_fields``: definition fields listing base types; ``docstrings``: a body's first
    string is its docstring."""

    name: str
    module: str
    definitions: Mapping[str, Definition | tuple[Definition, ...]]
    calls: Mapping[str, str]
    imports: Mapping[str, str]
    function: str = "language"
    scopes: Mapping[str, str] = field(default_factory=dict)
    wrappers: frozenset[str] = frozenset()
    import_calls: frozenset[str] = frozenset()
    bases: Mapping[str, str] = field(default_factory=dict)
    base_fields: Mapping[str, str] = field(default_factory=dict)
    comments: frozenset[str] = frozenset({"comment"})
    bodies: frozenset[str] = frozenset()
    anonymous: frozenset[str] = frozenset()
    docstrings: bool = False

    @cached_property
    def read(self) -> frozenset[str]:
        """Every node type the table names: the others are only walked through."""
        return frozenset({*self.definitions, *self.scopes, *self.calls, *self.imports,
                          *self.bases, *self.anonymous})

    @property
    def language(self) -> Language:
        return _load(self.module, self.function)


@cache
def _load(module: str, function: str) -> Language:
    """The grammar compiled into the wheel, loaded once per process."""
    return Language(getattr(importlib.import_module(module), function)())


_FUNCTION, _METHOD, _CLASS = Definition(FUNCTION), Definition(METHOD), Definition(CLASS)
_JS_DEFINITIONS = {
    "function_declaration": _FUNCTION, "generator_function_declaration": _FUNCTION,
    "class_declaration": _CLASS, "method_definition": _METHOD,
    "variable_declarator": (Definition(FUNCTION, value="value"),
                            Definition(CONSTANT, upper=True)),
    "assignment_expression": Definition(FUNCTION, name="left", value="right"),
    "pair": Definition(METHOD, name="key", value="value", inside=frozenset({
        "variable_declarator", "assignment_expression"})),
    # a named function written as a value (a callback, a getter): as ctags reads it
    "function_expression": _FUNCTION, "generator_function": _FUNCTION,
    "field_definition": Definition(METHOD, name="property", value="value"),
}
_JS = Grammar(
    "javascript", "tree_sitter_javascript",
    definitions=_JS_DEFINITIONS,
    calls={"call_expression": "function", "new_expression": "constructor"},
    imports={"import_statement": "javascript"}, import_calls=frozenset({"require"}),
    wrappers=frozenset({"export_statement", "lexical_declaration", "variable_declaration",
                        "expression_statement"}),
    bases={"class_heritage": EXTENDS})
_TS = replace(
    _JS, name="typescript", module="tree_sitter_typescript", function="language_typescript",
    definitions={
        **{kind: spec for kind, spec in _JS_DEFINITIONS.items() if kind != "field_definition"},
        "public_field_definition": Definition(METHOD, value="value"),
        "abstract_class_declaration": _CLASS,
        "interface_declaration": Definition(INTERFACE), "enum_declaration": Definition(ENUM),
        "type_alias_declaration": Definition(TYPE), "internal_module": Definition(MODULE),
        "function_signature": _FUNCTION, "method_signature": _METHOD,
        "abstract_method_signature": _METHOD},
    bases={"extends_clause": EXTENDS, "implements_clause": IMPLEMENTS,
           "extends_type_clause": EXTENDS},
    wrappers=_JS.wrappers | {"ambient_declaration"})
_C_FUNCTION = Definition(FUNCTION, name="declarator")
_C_DEFINITIONS = {
    "function_definition": _C_FUNCTION, "struct_specifier": Definition(STRUCT, needs_body=True),
    "union_specifier": Definition(STRUCT, needs_body=True),
    "enum_specifier": Definition(ENUM, needs_body=True),
    "type_definition": Definition(TYPE, name="declarator"),
}
_JAVA_LIKE = {  # the same node types in Java and C#
    "class_declaration": _CLASS, "record_declaration": _CLASS,
    "interface_declaration": Definition(INTERFACE), "enum_declaration": Definition(ENUM),
    "method_declaration": _METHOD, "constructor_declaration": _METHOD,
}
_C = Grammar("c", "tree_sitter_c", definitions=_C_DEFINITIONS,
             calls={"call_expression": "function"}, imports={"preproc_include": "path"})

GRAMMARS: tuple[Grammar, ...] = (
    Grammar(
        "python", "tree_sitter_python",
        definitions={"function_definition": _FUNCTION, "class_definition": _CLASS,
                     "assignment": (Definition(FUNCTION, name="left", value="right"),
                                    Definition(CONSTANT, name="left", upper=True))},
        calls={"call": "function"},
        imports={"import_statement": "python", "import_from_statement": "python"},
        wrappers=frozenset({"decorated_definition", "expression_statement"}),
        base_fields={"superclasses": EXTENDS}, docstrings=True),
    _JS, _TS, replace(_TS, name="tsx", function="language_tsx"),
    Grammar(
        "go", "tree_sitter_go",
        definitions={"function_declaration": _FUNCTION,
                     "method_declaration": Definition(METHOD, owner="receiver"),
                     "type_spec": Definition(TYPE, kinds={"struct_type": STRUCT,
                                                          "interface_type": INTERFACE}),
                     "const_spec": Definition(CONSTANT)},
        calls={"call_expression": "function"}, imports={"import_spec": "path"},
        wrappers=frozenset({"type_declaration", "const_declaration"})),
    Grammar(
        "java", "tree_sitter_java",
        definitions={**_JAVA_LIKE, "annotation_type_declaration": Definition(INTERFACE),
                     "annotation_type_element_declaration": _METHOD},
        calls={"method_invocation": "", "object_creation_expression": "type"},
        anonymous=frozenset({"object_creation_expression"}),
        imports={"import_declaration": "dotted"},
        bases={"superclass": EXTENDS, "super_interfaces": IMPLEMENTS,
               "extends_interfaces": EXTENDS},
        comments=frozenset({"line_comment", "block_comment"})),
    Grammar(
        "rust", "tree_sitter_rust",
        definitions={"function_item": _FUNCTION, "function_signature_item": _FUNCTION,
                     "struct_item": Definition(STRUCT), "union_item": Definition(STRUCT),
                     "enum_item": Definition(ENUM), "trait_item": Definition(TRAIT),
                     "mod_item": Definition(MODULE), "type_item": Definition(TYPE),
                     "const_item": Definition(CONSTANT), "static_item": Definition(CONSTANT),
                     "macro_definition": _FUNCTION},
        scopes={"impl_item": "type"},
        calls={"call_expression": "function"}, imports={"use_declaration": "written"},
        base_fields={"trait": IMPLEMENTS, "bounds": EXTENDS},
        wrappers=frozenset({"attribute_item"}),
        comments=frozenset({"line_comment", "block_comment"})),
    _C,
    replace(_C, name="cpp", module="tree_sitter_cpp", definitions={
        **_C_DEFINITIONS, "class_specifier": Definition(CLASS, needs_body=True),
        "namespace_definition": Definition(MODULE)},
        wrappers=frozenset({"template_declaration"}),
        bases={"base_class_clause": EXTENDS}),
    Grammar(
        "csharp", "tree_sitter_c_sharp",
        definitions={**_JAVA_LIKE, "struct_declaration": Definition(STRUCT),
                     "namespace_declaration": Definition(MODULE),
                     "file_scoped_namespace_declaration": Definition(MODULE)},
        calls={"invocation_expression": "function", "object_creation_expression": "type"},
        imports={"using_directive": "written"}, bases={"base_list": EXTENDS}),
    Grammar(
        "kotlin", "tree_sitter_kotlin",
        definitions={"class_declaration": _CLASS, "object_declaration": _CLASS,
                     "companion_object": Definition(CLASS, unnamed="Companion"),
                     "function_declaration": _FUNCTION},
        calls={"call_expression": ""}, imports={"import": "written"},
        bases={"delegation_specifiers": EXTENDS},
        bodies=frozenset({"class_body", "function_body", "enum_class_body"}),
        comments=frozenset({"line_comment", "block_comment"})),
    Grammar(
        "ruby", "tree_sitter_ruby",
        definitions={"class": _CLASS, "module": Definition(MODULE), "method": _FUNCTION,
                     "singleton_method": _FUNCTION},
        calls={"call": ""}, imports={}, import_calls=frozenset({"require", "require_relative"}),
        base_fields={"superclass": EXTENDS}),
    Grammar(
        "php", "tree_sitter_php", function="language_php",
        definitions={"class_declaration": _CLASS, "interface_declaration": Definition(INTERFACE),
                     "trait_declaration": Definition(TRAIT), "enum_declaration": Definition(ENUM),
                     "function_definition": _FUNCTION, "method_declaration": _METHOD,
                     "namespace_definition": Definition(MODULE)},
        calls={"function_call_expression": "function", "member_call_expression": "",
               "scoped_call_expression": "", "object_creation_expression": ""},
        imports={"namespace_use_declaration": "written"},
        bases={"base_clause": EXTENDS, "class_interface_clause": IMPLEMENTS}),
)

_BY_NAME = {grammar.name: grammar for grammar in GRAMMARS}
EXTENSIONS: Mapping[str, str] = {
    ".py": "python", ".pyi": "python",
    ".js": "javascript", ".mjs": "javascript", ".cjs": "javascript", ".jsx": "javascript",
    ".ts": "typescript", ".mts": "typescript", ".cts": "typescript", ".tsx": "tsx",
    ".go": "go", ".java": "java", ".rs": "rust", ".c": "c", ".h": "cpp",  # C++ reads C headers
    ".cc": "cpp", ".cpp": "cpp", ".cxx": "cpp", ".hpp": "cpp", ".hh": "cpp", ".hxx": "cpp",
    ".cs": "csharp", ".kt": "kotlin", ".kts": "kotlin", ".rb": "ruby", ".php": "php",
}


def grammar_for(path: str) -> Grammar | None:
    """The grammar a file is read with, by its extension; None for a language not read."""
    language = EXTENSIONS.get(PurePosixPath(path).suffix.lower())
    return _BY_NAME[language] if language else None


def language_name(grammar: Grammar) -> str:
    """The language a file is reported in: TSX is TypeScript."""
    return "typescript" if grammar.name == "tsx" else grammar.name

"""Source code into symbols and references (jarvis_core/sources/repo/code): one small source
per language read through its real tree-sitter grammar, the elided text, each kind of bad
input skipped or partial with its reason, and the agreement with Universal Ctags on a tiny
repository."""

import json
import shutil
import subprocess
from textwrap import dedent

import pytest
from tree_sitter import Language

from jarvis_core.sources.repo.code import parse as parse_module
from jarvis_core.sources.repo.code import references as reading
from jarvis_core.sources.repo.code.languages import GRAMMARS
from jarvis_core.sources.repo.code.model import PARSED, PARTIAL, SKIPPED, CodeReference
from jarvis_core.sources.repo.code.parse import parse_file
from jarvis_core.sources.repo.settings import CodeSettings

PYTHON = dedent('''\
    """Users."""
    import os.path
    import numpy as np
    from collections import OrderedDict as OD, defaultdict

    MAX_SIZE = 10


    # The service.
    class UserService(Base, mixins.Logged, metaclass=Meta):
        """Creates users."""

        @property
        def name(self) -> str:
            """The name."""
            return self._name

        def create_user(self, name):
            def check(value):
                return os.path.exists(value)
            self.save(check(name))
            return User(name)


    def helper(a, b=1):
        # not the doc: inside the body
        return helper(a - 1)


    def helper(a):
        pass

    square = lambda x: x * x
    ''')

# One source per language: (path, source, {qualified name: kind}, (a symbol, its leading
# comment, its signature)).
SOURCES = {
    "javascript": ("app.js", '''\
        const express = require('express');
        import React, { useState } from 'react';
        const MAX_RETRIES = 3;
        /**
         * Creates an application.
         */
        function createApplication(options) {
          return express().init(options);
        }
        class Router extends Base {
          handle(req) { return this.stack.run(req); }
        }
        const route = (path) => new Route(path);
        app.use = function use(fn) { return this; };
        router.get('/', function home(req) { res.format({ html: function () {} }); });
        module.exports = { listen: function (port) {} };
        ''', {"MAX_RETRIES": "constant", "createApplication": "function", "Router": "class",
              "Router.handle": "method", "route": "function", "app.use": "function",
              "home": "function", "listen": "method"},
        ("createApplication", "Creates an application.", "function createApplication(options)")),
    "typescript": ("request.ts", '''\
        /** A request's options. */
        export interface RequestOptions extends Options { send(body: string): void; }
        export enum Method { Get, Post }
        export type Hook = (options: RequestOptions) => void;
        export abstract class Request<T> extends Stream implements Handler<T> {
          handler = (event: Event) => this.emit(event);
          async retry(count: number): Promise<void> { await this.send(count); }
        }
        namespace Internal { export function helper() {} }
        ''', {"RequestOptions": "interface", "RequestOptions.send": "method", "Method": "enum",
              "Hook": "type", "Request": "class", "Request.handler": "method",
              "Request.retry": "method", "Internal": "module", "Internal.helper": "function"},
        ("RequestOptions", "A request's options.",
         "export interface RequestOptions extends Options")),
    "go": ("engine.go", '''\
        package gin

        import (
        \tstr "strings"
        )

        const MaxSize = 10

        // Engine is the framework's instance.
        type Engine struct {
        \ttrees []string
        }

        type Handler interface {
        \tServe() error
        }

        type HandlerFunc func()

        func New() *Engine {
        \treturn str.ToUpper("x")
        }

        func (engine *Engine) ServeHTTP(w Writer) {
        \tengine.handle(w)
        }
        ''', {"MaxSize": "constant", "Engine": "struct", "Handler": "interface",
              "HandlerFunc": "type", "New": "function", "Engine.ServeHTTP": "method"},
        ("Engine", "Engine is the framework's instance.", "type Engine struct")),
    "java": ("UserService.java", '''\
        package com.example;
        import java.util.List;
        /**
         * Creates users.
         */
        @Service
        public class UserService extends BaseService implements Creator {
            public UserService(Repo repo) {
                this.hook = new Runnable() { public void run() { repo.close(); } };
            }
            @Override
            public User createUser(String name) { return repo.save(new User(name)); }
            interface Listener { void onCreate(User user); }
            enum Role { ADMIN }
        }
        ''', {"UserService": "class", "UserService.UserService": "method",
              "UserService.createUser": "method", "UserService.Listener": "interface",
              "UserService.Listener.onCreate": "method", "UserService.Role": "enum"},
        ("UserService", "Creates users.",
         "@Service\npublic class UserService extends BaseService implements Creator")),
    "rust": ("store.rs", '''\
        use std::collections::HashMap;
        /// A key-value store.
        #[derive(Debug)]
        pub struct Store { items: HashMap<String, String> }
        pub trait Backend: Send { fn get(&self) -> u8; }
        impl Backend for Store {
            fn get(&self) -> u8 { self.items.len() }
        }
        pub enum Kind { A }
        const LIMIT: usize = 10;
        mod tests { fn helper() {} }
        ''', {"Store": "struct", "Backend": "trait", "Backend.get": "method",
              "Store.get": "method", "Kind": "enum", "LIMIT": "constant", "tests": "module",
              "tests.helper": "function"},
        ("Store", "A key-value store.", "pub struct Store")),
    "c": ("point.c", '''\
        #include <stdio.h>
        /* A point. */
        struct point { int x; };
        static int
        distance(struct point *a)
        {
            return abs(a->x);
        }
        ''', {"point": "struct", "distance": "function"}, ("point", "A point.", "struct point")),
    "cpp": ("shape.cpp", '''\
        namespace geo {
        // A shape.
        class Shape : public Base {
            int sides() const { return count(); }
        };
        double Shape::area() const { return std::sqrt(2.0); }
        }
        ''', {"geo": "module", "geo.Shape": "class", "geo.Shape.sides": "method",
              "geo.Shape.area": "function"},
        ("geo.Shape", "A shape.", "class Shape : public Base")),
    "csharp": ("Orders.cs", '''\
        using System.Collections.Generic;
        namespace Shop.Orders
        {
            /// Places orders.
            public class OrderService : ServiceBase
            {
                public Order Place(Cart cart) { return _repo.Save(cart); }
            }
            public interface IOrders { }
            public struct Money { }
        }
        ''', {"Shop.Orders": "module", "Shop.Orders.OrderService": "class",
              "Shop.Orders.OrderService.Place": "method", "Shop.Orders.IOrders": "interface",
              "Shop.Orders.Money": "struct"}, ("Shop.Orders.OrderService", "Places orders.",
                                           "public class OrderService : ServiceBase")),
    "kotlin": ("Orders.kt", '''\
        import kotlin.math.max
        class OrderService(val repo: Repo) : ServiceBase() {
            /** Places an order. */
            fun place(cart: Cart): Order { return repo.save(Order(cart)) }
            companion object {
                fun create() = OrderService(Repo())
            }
        }
        object Registry {
            fun lookup(name: String) = names.get(name)
        }
        fun topLevel() = println("x")
        ''', {"OrderService": "class", "OrderService.place": "method",
              "OrderService.Companion": "class", "OrderService.Companion.create": "method",
              "Registry": "class",
              "Registry.lookup": "method", "topLevel": "function"},
        ("OrderService.place", "Places an order.", "fun place(cart: Cart): Order")),
    "ruby": ("orders.rb", '''\
        require 'json'
        module Shop
          # Places orders.
          class OrderService < ServiceBase
            def place(cart)
              repo.save(Order.new(cart))
            end
            def self.build
            end
            def <=>(other)
            end
            def status=(value)
            end
          end
        end
        ''', {"Shop": "module", "Shop.OrderService": "class",
              "Shop.OrderService.place": "method", "Shop.OrderService.build": "method",
              "Shop.OrderService.<=>": "method", "Shop.OrderService.status=": "method"},
        ("Shop.OrderService", "Places orders.", "class OrderService < ServiceBase")),
    "php": ("Orders.php", '''\
        <?php
        use Shop\\Repo\\OrderRepository;
        /** Places orders. */
        class OrderService extends ServiceBase implements OrderApi
        {
            public function place(Cart $cart) { return $this->repo->save($cart); }
        }
        interface OrderApi { }
        trait Logs { }
        function helper($x) { return strlen($x); }
        ''', {"OrderService": "class", "OrderService.place": "method", "OrderApi": "interface",
              "Logs": "trait", "helper": "function"}, ("OrderService", "Places orders.",
                              "class OrderService extends ServiceBase implements OrderApi")),
}


def _parse(path: str, source: str, **limits):
    return parse_file(path, source.encode(), CodeSettings(**limits))


def test_python_symbols_have_kind_qualified_name_span_signature_and_doc():
    parsed = _parse("users/service.py", PYTHON)
    assert (parsed.language, parsed.status, parsed.reason) == ("python", PARSED, None)
    by_id = {symbol.symbol_id: symbol for symbol in parsed.symbols}
    assert {key: symbol.kind for key, symbol in by_id.items()} == {
        "MAX_SIZE": "constant", "UserService": "class", "UserService.name": "method",
        "UserService.create_user": "method", "UserService.create_user.check": "function",
        "helper@25": "function", "helper@30": "function", "square": "function"}
    service, name, check = by_id["UserService"], by_id["UserService.name"], \
        by_id["UserService.create_user.check"]
    assert (service.start_line, service.end_line, service.parent) == (10, 22, None)
    assert service.signature == "class UserService(Base, mixins.Logged, metaclass=Meta):"
    assert service.doc == "Creates users."
    assert (name.signature, name.doc, name.parent) == ("def name(self) -> str:", "The name.",
                                                       "UserService")
    assert (check.qualified_name, check.parent) == ("UserService.create_user.check",
                                                    "UserService.create_user")
    assert by_id["helper@25"].signature == "def helper(a, b=1):"
    assert by_id["helper@25"].doc == ""


def test_a_symbols_text_is_its_own_code_with_nested_bodies_elided():
    by_id = {s.symbol_id: s for s in _parse("service.py", PYTHON).symbols}
    assert by_id["UserService"].text == dedent('''\
        class UserService(Base, mixins.Logged, metaclass=Meta):
            """Creates users."""

            @property
            def name(self) -> str:
                ...

            def create_user(self, name):
                ...''')
    assert by_id["UserService.create_user"].text == dedent('''\
        def create_user(self, name):
            def check(value):
                ...
            self.save(check(name))
            return User(name)''')


def test_python_references_are_calls_imports_and_base_classes_in_their_scope():
    refs = set(_parse("service.py", PYTHON).references)
    assert {
        CodeReference("import", "os.path", None, None, 2),
        CodeReference("import", "numpy", "np", None, 3),
        CodeReference("import", "collections", "OrderedDict", None, 4),
        CodeReference("import", "collections", "defaultdict", None, 4),
        CodeReference("extends", "Base", None, "UserService", 10),
        CodeReference("extends", "mixins.Logged", None, "UserService", 10),
        CodeReference("call", "exists", "os.path", "UserService.create_user.check", 20),
        CodeReference("call", "save", "self", "UserService.create_user", 21),
        CodeReference("call", "User", None, "UserService.create_user", 22),
        CodeReference("call", "helper", None, "helper@25", 27),
    } <= refs
    assert not any(ref.name == "Meta" for ref in refs)  # a keyword argument is no base


@pytest.mark.parametrize("language", sorted(SOURCES))
def test_each_language_reads_its_symbols_leading_comment_and_signature(language):
    path, source, kinds, (documented, doc, signature) = SOURCES[language]
    parsed = _parse(path, dedent(source))
    assert (parsed.status, parsed.reason) == (PARSED, None)
    found = {symbol.qualified_name: symbol.kind for symbol in parsed.symbols}
    assert found == kinds
    symbol = next(s for s in parsed.symbols if s.qualified_name == documented)
    assert (symbol.doc, symbol.signature) == (doc, signature)


@pytest.mark.parametrize(("language", "expected"), [
    ("javascript", {("import", "express", None), ("import", "react", "useState"),
                    ("call", "init", "express()"), ("extends", "Base", None),
                    ("call", "run", "this.stack"), ("call", "Route", None)}),
    ("typescript", {("extends", "Stream", None), ("implements", "Handler", None),
                    ("call", "send", "this"), ("extends", "Options", None)}),
    ("go", {("import", "strings", "str"), ("call", "ToUpper", "str"),
            ("call", "handle", "engine")}),
    ("java", {("import", "java.util", "List"), ("extends", "BaseService", None),
              ("implements", "Creator", None), ("call", "save", "repo"),
              ("call", "User", None)}),
    ("rust", {("import", "std::collections::HashMap", None), ("implements", "Backend", None),
              ("extends", "Send", None), ("call", "len", "self.items")}),
    ("cpp", {("extends", "Base", None), ("call", "sqrt", "std"), ("call", "count", None)}),
    ("ruby", {("import", "json", None), ("extends", "ServiceBase", None),
              ("call", "new", "Order"), ("call", "save", "repo")}),
    ("php", {("extends", "ServiceBase", None), ("implements", "OrderApi", None),
             ("call", "save", "$this->repo"), ("call", "strlen", None)}),
])
def test_each_language_reads_calls_imports_and_base_types(language, expected):
    path, source, _kinds, _doc = SOURCES[language]
    refs = {(ref.kind, ref.name, ref.qualifier) for ref in _parse(path, dedent(source)).references}
    assert expected <= refs


def test_go_methods_are_qualified_by_their_receiver_and_scope_their_calls():
    path, source, _kinds, _doc = SOURCES["go"]
    parsed = _parse(path, dedent(source))
    serve = next(s for s in parsed.symbols if s.name == "ServeHTTP")
    assert (serve.symbol_id, serve.start_line, serve.end_line) == ("Engine.ServeHTTP", 24, 26)
    assert serve.signature == "func (engine *Engine) ServeHTTP(w Writer)"
    assert CodeReference("call", "handle", "engine", "Engine.ServeHTTP", 25) in \
        parsed.references


def test_a_comment_ending_a_line_of_code_is_not_the_next_definitions_doc():
    parsed = _parse("app.js", "const size = 65536; // 64 KB\nfunction after() {}\n"
                              "// Sends.\nfunction send() {}\n")
    assert [(symbol.name, symbol.doc) for symbol in parsed.symbols] == [
        ("after", ""), ("send", "Sends.")]


def test_a_header_is_read_as_cpp_which_reads_c_too():
    parsed = parse_file("include/shape.h", b"struct point { int x; };\n"
                                           b"namespace geo { class Shape { }; }\n")
    assert parsed.language == "cpp"
    assert [symbol.qualified_name for symbol in parsed.symbols] == ["point", "geo", "geo.Shape"]


def test_a_file_in_no_language_read_here_is_none():
    assert parse_file("README.md", b"# Title\n") is None


def test_syntax_errors_make_a_partial_file_that_keeps_its_symbols():
    parsed = _parse("broken.py", "def good():\n    pass\n\ndef broken(:\n    return )\n\n"
                                 "class After:\n    pass\n")
    assert parsed.status == PARTIAL
    assert parsed.reason.startswith("syntax errors (the first at line 4")
    assert {"good", "After"} <= {symbol.name for symbol in parsed.symbols}


def test_a_large_or_minified_file_is_skipped_before_parsing(monkeypatch):
    def parsed_anyway(*_args):
        raise AssertionError("the file was parsed")

    monkeypatch.setattr(parse_module, "_parse", parsed_anyway)
    big = "x = 1\n" * 200_000
    assert _parse("big.py", big).reason == "1200000 bytes, over the limit of 1000000"
    minified = "var a=function(){return 1};" * 200_000  # 5.4 MB on one line
    parsed = _parse("app.js", minified, max_file_bytes=10_000_000)
    assert (parsed.status, parsed.reason) == (
        SKIPPED, "minified or data: a line of 5400000 bytes, over the limit of 10000")
    lines = "var alpha=function(){return beta(gamma,delta)};" * 8 + "\n"
    assert _parse("bundle.js", lines * 100).reason == (
        "minified: lines of 373 bytes on average, over the limit of 300")


def test_binary_files_and_nul_bytes_are_skipped():
    png = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256))
    assert parse_file("image.py", png).reason == "binary: it holds NUL bytes"
    assert parse_file("text.go", b"package x\x00\n").status == SKIPPED


def test_generated_and_vendored_files_are_skipped():
    generated = "// Code generated by protoc-gen-go. DO NOT EDIT.\npackage pb\n"
    assert _parse("api.pb.go", generated).reason == \
        "generated (marked 'Code generated by protoc-gen-go. DO NOT EDIT')"
    assert _parse("tool.py", '# Skips what says "DO NOT EDIT" and "@generated".\n').status \
        == PARSED  # only a comment that is the marker marks the file
    assert _parse("schema.py", "# @generated by tool\nX = 1\n").reason == \
        "generated (marked '@generated')"
    assert _parse("vendor/github.com/x/y.go", "package y\n").reason == \
        "excluded as vendored or built (pattern '**/vendor/**')"
    assert _parse("web/node_modules/a/index.js", "f()\n").status == SKIPPED
    assert _parse("static/app.min.js", "f()\n").status == SKIPPED
    assert _parse("src/app.js", "f()\n", exclude=()).status == PARSED


def test_deep_nesting_is_read_without_recursion_to_a_bounded_depth():
    depth = 3000  # far past Python's recursion limit if the walk recursed
    source = "x = " + "[\n" * depth + "]\n" * depth + "def after():\n    pass\n"
    parsed = _parse("deep.py", source, max_depth=200)
    assert parsed.status == PARTIAL
    assert parsed.reason == "nesting deeper than 200 levels was not read"
    assert [symbol.name for symbol in parsed.symbols] == ["after"]
    assert _parse("deep.py", source, max_depth=10_000).status == PARSED


def test_a_parse_over_its_time_budget_is_skipped():
    source = "def f(x):\n    return g(x) + h(x)\n" * 30_000
    parsed = _parse("slow.py", source, time_budget_seconds=0.001,
                    max_file_bytes=10_000_000)
    assert (parsed.status, parsed.reason) == (
        SKIPPED, "parsing took over the time budget of 0.001 s")


def test_every_node_type_and_field_the_tables_name_exists_in_its_grammar():
    """A table entry the grammar does not know would silently read nothing."""
    for grammar in GRAMMARS:
        language: Language = grammar.language
        types = {language.node_kind_for_id(i) for i in range(language.node_kind_count)}
        fields = {language.field_name_for_id(i) for i in range(1, language.field_count + 1)}
        named = set(grammar.definitions) | set(grammar.calls) | set(grammar.imports) | \
            set(grammar.scopes) | grammar.wrappers | set(grammar.bases) | grammar.comments | \
            grammar.bodies
        assert named <= types, (grammar.name, named - types)
        used_fields = set(grammar.scopes.values()) | set(grammar.base_fields) | \
            {field for field in grammar.calls.values() if field}
        assert used_fields <= fields, (grammar.name, used_fields - fields)


def test_a_call_on_a_long_expression_keeps_a_bounded_qualifier():
    chain = "a" + ".b" * 500
    ref = next(r for r in _parse("chain.py", f"{chain}.run()\n").references if r.name == "run")
    assert len(ref.qualifier) == 200 and ref.qualifier.startswith("a.b.b")
    assert reading.qualifier(b"self.items.") == "self.items"


def test_bench_code_prints_the_agreement_with_universal_ctags_on_a_tiny_repository(tmp_path):
    if shutil.which("ctags") is None:
        pytest.skip("Universal Ctags (Debian package universal-ctags) is not installed")
    from click.testing import CliRunner

    from jarvis_cli.main import cli

    (tmp_path / "service.py").write_text(PYTHON)
    path, source, _kinds, _doc = SOURCES["go"]
    (tmp_path / path).write_text(dedent(source))
    (tmp_path / "vendor").mkdir()
    (tmp_path / "vendor" / "lib.py").write_text("def vendored():\n    pass\n")
    for args in (["init", "-q"], ["add", "."], ["-c", "user.name=t", "-c", "user.email=t@t",
                                                 "commit", "-qm", "tiny"]):
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True)
    shown = CliRunner().invoke(cli, ["bench", "code", str(tmp_path), "--json"])
    assert shown.exit_code == 0, shown.output
    result = json.loads(shown.stdout)
    agreement = result["ctags"]
    assert agreement["languages"]["python"] == {
        "ctags_definitions": 7, "jarvis_definitions": 7, "matched": 7, "recall": 1.0,
        "precision": 1.0}
    assert agreement["languages"]["go"]["recall"] == 1.0
    assert (agreement["recall"], agreement["precision"]) == (1.0, 1.0)
    assert result["parse"]["skipped"] == {"excluded as vendored or built": 1}
    assert result["parse"]["files"] == 3 and result["parse"]["files_per_s"] > 0
    table = CliRunner().invoke(cli, ["bench", "code", str(tmp_path)])
    assert "python" in table.stdout and "files/s" in table.stdout

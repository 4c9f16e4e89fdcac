"""The raw tables of a repository's source code at its branch head: one row per source file
read (its blob, language, status), per symbol it defines and per reference it makes
(jarvis_core/sources/repo/code/model.py says what each field holds)."""

from __future__ import annotations

import polars as pl

from jarvis_core.stores.tables import Table

CODE_FILES = Table("code_files", pl.Schema({
    "source": pl.Utf8, "path": pl.Utf8, "blob_sha": pl.Utf8, "language": pl.Utf8,
    "status": pl.Utf8, "reason": pl.Utf8, "symbols": pl.Int32, "parse_ms": pl.Float64,
}), ("source", "path"))

CODE_SYMBOLS = Table("code_symbols", pl.Schema({
    "source": pl.Utf8, "path": pl.Utf8, "symbol_id": pl.Utf8, "kind": pl.Utf8,
    "name": pl.Utf8, "qualified_name": pl.Utf8, "signature": pl.Utf8, "doc": pl.Utf8,
    "start_line": pl.Int32, "end_line": pl.Int32, "parent": pl.Utf8, "language": pl.Utf8,
    "text": pl.Utf8,
}), ("source", "path", "symbol_id"))

CODE_REFERENCES = Table("code_references", pl.Schema({
    "source": pl.Utf8, "path": pl.Utf8, "kind": pl.Utf8, "name": pl.Utf8,
    "qualifier": pl.Utf8, "scope": pl.Utf8, "line": pl.Int32,
}))

# The parser version and code settings the stored rows were made with.
CODE_STATE = Table("code_state", pl.Schema({"source": pl.Utf8, "settings": pl.Utf8}),
                   ("source",))

CODE_TABLES = (CODE_FILES, CODE_SYMBOLS, CODE_REFERENCES, CODE_STATE)

"""The keyword index's fields and what they hold: the schemas and their FORMAT, the
analyzers, a chunk's indexed body, and the identifiers in it, whole and split into words.

The body's analyzer is Tantivy's: simple word splitting, long tokens dropped, lower case,
ASCII folding, the English stop words (Lucene's list), Snowball English stemming. It keeps
``createUser`` as one word and cuts ``create_user`` and ``os.path.join`` into words, the
whole lost. tantivy-py offers no filter that emits a token's parts beside the token (Lucene's
word delimiter graph), and its regex tokenizer cannot split ``HTTPServer`` at the acronym
(Rust's regex has no look-ahead), so the identifiers are expanded here, in Python: a second
field of the chunk holds what the body's words miss, each identifier whole and the words it
joins (``identifier_terms``), analyzed alike but split at whitespace only. A query is
expanded the same way and its terms are looked up in both fields, so ``createUser`` finds
``create_user`` by its parts and ``createUser`` itself first, by its parts and its whole.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import tantivy

from jarvis_core.stores.places import PLACE_FIELDS

# 3: each chunk's place stored (source, doc_key, heading), so a search's hits need no table
# lookup to be grouped by document; 2: the identifiers field; 1: the body alone; ledgers
# made before FORMAT say 0.
FORMAT = 3
# What a match counts. A word among an identifier's parts (the identifiers field) counts half
# what it counts in the text; the words an identifier in a query joins (``http`` of
# ``HTTPServerError``) a quarter: they find its relatives, and prose with those words does not
# outrank the identifier itself. Measured against 1 and 0.5 on SciFact and on code searched by
# docstring sentence and by name (Python and TypeScript): the only setting with no figure down
# by more than 0.01.
FIELD_WEIGHTS = {"body": 1.0, "identifiers": 0.5}
PART_WEIGHT = 0.25
ANALYZER = "jarvis_en"
IDENTIFIER_ANALYZER = "jarvis_identifiers"
MAX_TOKEN_CHARS = 40
# "Identifiers" as long are blobs (base64, minified code) whose parts are noise.
MAX_IDENTIFIER_CHARS = 100
# Ends a chunk's title and heading path in its indexed body: the analyzer splits at it as at
# a line break, and a preview is made of what follows it, the chunk's text, alone.
TEXT_MARK = "\x1e"

# A name as code writes it (letters, digits and underscores, not starting with a digit: not
# inside a word either, so no hash or number gives one), in components joined by dots or
# double colons: os.path.join, UserService.createUser, std::fmt.
_NAME = r"[^\W\d]\w*"
_IDENTIFIER = re.compile(rf"\b{_NAME}(?:(?:\.|::){_NAME})*")
_COMPONENT_SEPARATOR = re.compile(r"\.|::")
# Where Tantivy's simple tokenizer splits: the body's words of an identifier.
_BODY_WORD_SEPARATOR = re.compile(r"[\W_]+")
# The words an identifier joins: an acronym (HTTP in HTTPServer), a capitalised or lower-case
# run (letters beyond ASCII count as lower case), a run of digits (dropped below).
_LOWER = r"[^\W\dA-Z_]"
_PART = re.compile(rf"[A-Z]+(?!{_LOWER})|[A-Z]?{_LOWER}+|\d+")


def _filters(builder: tantivy.TextAnalyzerBuilder, max_chars: int) -> tantivy.TextAnalyzer:
    return (builder.filter(tantivy.Filter.remove_long(max_chars))
            .filter(tantivy.Filter.lowercase())
            .filter(tantivy.Filter.ascii_fold())
            .filter(tantivy.Filter.stopword("english"))
            .filter(tantivy.Filter.stemmer("english"))
            .build())


def analyzer() -> tantivy.TextAnalyzer:
    """The body's analyzer (and the names')."""
    return _filters(tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple()), MAX_TOKEN_CHARS)


def identifier_analyzer() -> tantivy.TextAnalyzer:
    """The identifiers field's: the body's filters over ``identifier_terms`` joined by
    spaces, so a whole ``create_user`` stays one term."""
    return _filters(tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.whitespace()),
                    MAX_IDENTIFIER_CHARS)


def chunk_body(title: str | None, heading_path: Sequence[str] | None, text: str | None) -> str:
    """The indexed text of a chunk: title and heading path (they rank a chunk), then
    ``TEXT_MARK`` and the text."""
    heading = " > ".join(heading_path or [])
    prefix = "\n".join(part.replace(TEXT_MARK, " ") for part in (title, heading) if part)
    return f"{prefix}{TEXT_MARK}{text or ''}"


def chunk_schema() -> tantivy.Schema:
    builder = tantivy.SchemaBuilder()
    for field in ("chunk_id", "source", "source_type", "tags", "doc_key", "heading"):
        builder.add_text_field(field, stored=field in ("chunk_id", *PLACE_FIELDS),
                               tokenizer_name="raw")
    builder.add_date_field("modified_at", indexed=True, fast=True)
    builder.add_text_field("body", stored=True, tokenizer_name=ANALYZER)
    builder.add_text_field("identifiers", tokenizer_name=IDENTIFIER_ANALYZER)
    return builder.build()


def name_schema() -> tantivy.Schema:
    builder = tantivy.SchemaBuilder()
    builder.add_text_field("name_key", tokenizer_name="raw")
    for field in ("source", "doc_key", "source_type"):
        builder.add_text_field(field, stored=True, tokenizer_name="raw")
    for field in ("title", "path"):
        builder.add_text_field(field, stored=True, tokenizer_name=ANALYZER)
    return builder.build()


def open_index(path: Path, schema: tantivy.Schema, create: bool) -> tantivy.Index:
    if create:
        path.mkdir(parents=True, exist_ok=True)
        index = tantivy.Index(schema, path=str(path), reuse=True)
    else:
        if not (path / "meta.json").is_file():
            raise FileNotFoundError(f"no keyword index at {path}")
        index = tantivy.Index.open(str(path))
    index.register_tokenizer(ANALYZER, analyzer())
    index.register_tokenizer(IDENTIFIER_ANALYZER, identifier_analyzer())
    return index


def text_fields(index_dir: Path) -> dict[str, float]:
    """The chunk index's searched fields and their weights (a version published before
    FORMAT 2 has no identifiers field and is searched by its body alone)."""
    meta = json.loads((index_dir / "meta.json").read_text())
    present = {field["name"] for field in meta["schema"]}
    return {field: weight for field, weight in FIELD_WEIGHTS.items() if field in present}


class _Identifier(NamedTuple):
    """An identifier, lower-cased: its names, the whole and each dotted component
    (``user_service.create_user``, ``user_service``, ``create_user``); its parts, the words
    its camelCase, acronyms and snake_case join (``HTTPServerError``: ``http``, ``server``,
    ``error``) but one-letter and all-digit ones; and what the identifiers field holds of
    it, the names and parts the body's words miss."""

    names: tuple[str, ...]
    parts: tuple[str, ...]
    indexed: tuple[str, ...]


_NOT_AN_IDENTIFIER = _Identifier((), (), ())


@functools.lru_cache(maxsize=1 << 16)  # text repeats its words: most are looked up here
def _identifier(token: str) -> _Identifier:
    plain_word = token.isalpha() and (token.islower() or token.isupper()
                                      or token[1:].islower())
    if plain_word or len(token) >= MAX_IDENTIFIER_CHARS:
        return _NOT_AN_IDENTIFIER
    body_words = {word.lower() for word in _BODY_WORD_SEPARATOR.split(token) if word}
    if not body_words:
        return _NOT_AN_IDENTIFIER
    names = dict.fromkeys(name.lower() for name in [token, *_COMPONENT_SEPARATOR.split(token)])
    parts = dict.fromkeys(part.lower() for part in _PART.findall(token)
                          if len(part) > 1 and not part.isdigit())
    return _Identifier(tuple(names), tuple(part for part in parts if part not in names),
                       tuple(term for term in {**names, **parts} if term not in body_words))


def identifier_terms(text: str) -> list[str]:
    """What the identifiers field holds of ``text``. ``createUser`` gives ``create user``,
    ``create_user`` gives ``create_user``, a plain word nothing."""
    return [term for token in _IDENTIFIER.findall(text) for term in _identifier(token).indexed]


def query_identifiers(query: str) -> tuple[list[str], list[str]]:
    """The names and the parts of the identifiers in ``query``, all of them (a part that is
    also a name, as ``os`` of ``os.path``, counts as a name)."""
    identifiers = [_identifier(token) for token in _IDENTIFIER.findall(query)]
    names = dict.fromkeys(name for identifier in identifiers for name in identifier.names)
    parts = dict.fromkeys(part for identifier in identifiers for part in identifier.parts)
    return list(names), [part for part in parts if part not in names]

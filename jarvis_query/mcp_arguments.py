"""The MCP tools' parameters: JSON schemas with ranges and descriptions, validated strictly
(``true`` is no limit, ``"yes"`` no boolean), except that numbers and booleans may come as
their text (the strictness is declared before the conversion, which pydantic requires for an
optional number): clients such as the MCP Inspector send what is typed into a form as a string,
so ``"10"``, ``"0.5"`` and ``"true"`` are taken, and ``"ten"`` is refused as before."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import BeforeValidator, Field

from jarvis_query.retrievers.grouping import GROUPS
from jarvis_query.validation import (
    MAX_DEPTH,
    MAX_LIMIT,
    MAX_LIST_ITEMS,
    MAX_NAME_CHARS,
    MAX_PATH_CHARS,
    MAX_QUERY_CHARS,
    MIN_DEPTH,
    SOURCE_TYPES,
)

_INTEGER = re.compile(r"[+-]?\d+")
_DECIMAL = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
_BOOLEANS = {"true": True, "false": False}


def integer_from_text(value: object) -> object:
    """'10' -> 10; anything else is left for strict validation to accept or refuse."""
    if isinstance(value, str) and _INTEGER.fullmatch(value.strip()):
        return int(value)
    return value


def number_from_text(value: object) -> object:
    """'0.5' -> 0.5, '1' -> 1.0; anything else is left for strict validation."""
    if isinstance(value, str) and _DECIMAL.fullmatch(value.strip()):
        return float(value)
    return value


def boolean_from_text(value: object) -> object:
    """'true' / 'false' (any case) -> the boolean; anything else is left for strict
    validation."""
    if isinstance(value, str):
        return _BOOLEANS.get(value.strip().lower(), value)
    return value


def _integer(description: str, **schema) -> object:
    return Annotated[int, Field(description=description, strict=True, json_schema_extra=schema),
                     BeforeValidator(integer_from_text)]


def _number(description: str) -> object:
    return Annotated[float | None, Field(description=description, strict=True),
                     BeforeValidator(number_from_text)]


Query = Annotated[str, Field(description="What to look for, in natural language.",
                             max_length=MAX_QUERY_CHARS)]
Limit = _integer(f"Number of results, 1-{MAX_LIMIT}.", minimum=1, maximum=MAX_LIMIT)
Vault = Annotated[str | None, Field(description="Only this source (see list-vaults); "
                                                "all sources when omitted.",
                                    max_length=MAX_NAME_CHARS)]
Depth = _integer(f"Hops from the note, {MIN_DEPTH}-{MAX_DEPTH}.", minimum=MIN_DEPTH,
                 maximum=MAX_DEPTH)
MaxTokens = _integer("Token budget of the context block.")
SimilarityThreshold = _number("Drop results below this cosine similarity (-1 to 1).")
Alpha = _number("Weight of the semantic side, 0 (keyword only) to 1 (semantic only); "
                "reciprocal rank fusion when omitted.")
SearchContent = Annotated[bool, Field(description="Match the text instead of names and paths.",
                                      strict=True),
                          BeforeValidator(boolean_from_text)]
Group = Annotated[Literal[GROUPS], Field(
    description="document (the default): one hit per document, shown by its best chunk, with "
                "how many of its chunks matched and their headings; chunk: every matching "
                "chunk, a document's chunks apart.")]
SourceTypes = Annotated[list[Literal[SOURCE_TYPES]] | None, Field(
    description="Only these source types: note, commit, repo_doc, code (one document per "
                "symbol), ticket, email (mail threads), page (Confluence).",
    max_length=MAX_LIST_ITEMS)]
Tags = Annotated[list[Annotated[str, Field(max_length=MAX_NAME_CHARS)]] | None, Field(
    description="Only chunks carrying any of these tags.", max_length=MAX_LIST_ITEMS)]
ModifiedAfter = Annotated[str | None, Field(
    description="ISO date: only documents modified on or after it.", max_length=MAX_NAME_CHARS)]
ModifiedBefore = Annotated[str | None, Field(
    description="ISO date: only documents modified before it.", max_length=MAX_NAME_CHARS)]
NotePath = Annotated[str, Field(
    description="Vault-relative note path ('.md' optional) or a note title; or a ticket key, "
                "a commit hash, a thread or page key; or a symbol: its name, qualified name, "
                "path:line or key.", max_length=MAX_PATH_CHARS)]
ReadPath = Annotated[str, Field(
    description="A search hit's path (with its vault), or an identifier: a document key, a "
                "note's path ('.md' optional; may start with the vault name) or title, a "
                "ticket key ('LUM-4', 'owner/repo#12'), a commit hash or its first 7+ "
                "digits, a Message-ID, a Confluence page id or title.",
    max_length=MAX_PATH_CHARS)]
VaultName = Annotated[str, Field(description="The vault name (see list-vaults).",
                                 max_length=MAX_NAME_CHARS)]
SymbolName = Annotated[str, Field(
    description="A symbol's name ('clamp_future'), qualified name ('UserService.create_user'), "
                "file and line ('src/app/service.py:42'), or key ('symbol:<repo>/<path>::<id>').",
    max_length=MAX_PATH_CHARS)]
Repo = Annotated[str | None, Field(description="Only this repository (see list-vaults); every "
                                               "repository when omitted.",
                                   max_length=MAX_NAME_CHARS)]

"""The MCP server: Jarvis's query tools for assistants (Claude Desktop and others) over stdio.

One process holds one ``KnowledgeBase`` (the query encoder loaded once per published
version, in the background from the start, new versions picked up per request). Every
answer is readable text plus structured JSON carrying ``schema_version`` and a
``correlation_id`` that the server also logs, with the tool name and duration, to stderr
and optionally a log file; stdout is the protocol and nothing else writes to it. Failures
come back as tool results with ``isError`` set and text starting ``Error: …``
(``Error reading note: …`` for read-note), never as crashes; their envelope and error type
ride in ``_meta``.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from contextvars import ContextVar
from importlib.metadata import version
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import ValidationError

from jarvis_core.stores.serving import NotPublished, VersionDamaged
from jarvis_query import mcp_arguments as arg
from jarvis_query import mcp_schemas as out
from jarvis_query.knowledge_base import KnowledgeBase
from jarvis_query.reading import NoteAccessError
from jarvis_query.render import (
    render_document,
    render_graph,
    render_graphrag,
    render_results,
    render_vault_context,
    render_vaults,
)
from jarvis_query.render_code import render_code_results, render_symbol
from jarvis_query.results import jsonable
from jarvis_query.validation import QueryError, shown, too_long

SCHEMA_VERSION = "v1"
SERVER_NAME = "jarvis"
log = logging.getLogger("jarvis.mcp")
_correlation_id: ContextVar[str] = ContextVar("correlation_id", default="-")
_READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)


def _envelope(data: dict) -> dict:
    return {"schema_version": SCHEMA_VERSION, "correlation_id": _correlation_id.get(), **data}


def error_result(message: str, kind: str) -> CallToolResult:
    """The message as text and no ``structuredContent``: TypeScript-SDK clients (the MCP
    Inspector) check structured content against the tool's ``outputSchema`` even when
    ``isError`` is set, and would show a schema error instead of the message. The error's
    type and the envelope ride in ``_meta``, which no schema constrains."""
    return CallToolResult(content=[TextContent(type="text", text=message)], is_error=True,
                          _meta=_envelope({"error_type": kind}))


def correlation_id(result: CallToolResult) -> str:
    """The id a result was logged under: in its structured content, or an error's ``_meta``."""
    return (result.structured_content or result.meta or {}).get("correlation_id", "-")


def answer(compute: Callable[[], dict], render: Callable[[dict], str]) -> CallToolResult:
    """Run one tool body: ``render``'s text of its answer and the answer's JSON (its hits as
    ``Hit.as_dict``) as structured content, or the error an assistant can act on (bad
    argument, nothing published yet, refused path)."""
    try:
        data = compute()
    except NoteAccessError as exc:
        return error_result(f"Error reading note: {exc}", "note_unreadable")
    except QueryError as exc:
        return error_result(f"Error: {exc}", "invalid_argument")
    except VersionDamaged as exc:
        return error_result(f"Error: {exc}", "corrupt")
    except NotPublished as exc:
        return error_result(f"Error: {exc}", "not_published")
    except Exception as exc:  # a bug or a broken store: logged with its traceback
        log.exception("correlation_id=%s failed", _correlation_id.get())
        return error_result(f"Error: {type(exc).__name__}: {shown(str(exc))} (correlation_id "
                            f"{_correlation_id.get()}, details in the server log)", "internal")
    return CallToolResult(content=[TextContent(type="text", text=render(data))],
                          structured_content=_envelope(jsonable(data)))


# --- the server -------------------------------------------------------------------------

def _argument_problem(exc: ToolError) -> str:
    """The SDK's argument validation errors in the style of the tools' own messages."""
    cause = exc.__cause__
    if not isinstance(cause, ValidationError):
        return str(exc)
    problems = []
    for error in cause.errors():
        field = ".".join(str(part) for part in error["loc"])
        if error["type"] == "missing":
            problems.append(f"{field} parameter is required")
        elif error["type"] in ("string_too_long", "too_long"):  # the input is never echoed
            unit = "characters" if error["type"] == "string_too_long" else "items"
            problems.append(str(too_long(field, len(error["input"]),
                                         error["ctx"]["max_length"], unit)))
        else:
            problems.append(f"{field}: {shown(error['msg'])}")
    return "; ".join(problems)


class JarvisMCPServer(MCPServer):
    """MCPServer whose every tool call gets a correlation id, a log line with its duration,
    and argument errors phrased like the tools' own."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context=None):
        token = _correlation_id.set(uuid.uuid4().hex[:16])
        started = time.perf_counter()
        try:
            try:
                result = await super().call_tool(name, arguments, context)
            except ToolError as exc:
                result = error_result(f"Error: {_argument_problem(exc)}", "invalid_argument")
            log.info("correlation_id=%s tool=%s status=%s duration_ms=%.1f%s",
                     _correlation_id.get(), name, "error" if result.is_error else "ok",
                     (time.perf_counter() - started) * 1000,
                     f" message={result.content[0].text!r}" if result.is_error else "")
            return result
        finally:
            _correlation_id.reset(token)


def build_server(kb: KnowledgeBase, server: JarvisMCPServer | None = None) -> JarvisMCPServer:
    """The query tools on ``server``: a new JarvisMCPServer when None; the server with
    profiles, the access log and memory (jarvis_query/mcp_assistant.py) passes its own."""
    server = server or JarvisMCPServer(
        name=SERVER_NAME, version=version("jarvis"),
        instructions="Search and read the user's knowledge base (markdown vaults, code, "
                     "tickets, mail and Confluence): semantic, keyword, hybrid, graph and "
                     "GraphRAG search, read notes, threads and pages, list sources, vault "
                     "analytics. Paths are relative to their source.")

    def tool(name: str, description: str):
        return server.tool(name=name, description=description, annotations=_READ_ONLY)

    @tool("search-semantic", "Documents nearest in meaning to the query (embeddings), best "
                             "first, each with path, heading, cosine score and a snippet of "
                             "its best chunk (group=chunk: every chunk). An item the query "
                             "names (ticket key, commit hash, Message-ID, page id, title) "
                             "comes first.")
    def search_semantic(query: arg.Query, limit: arg.Limit = 10, vault: arg.Vault = None,
                        similarity_threshold: arg.SimilarityThreshold = None,
                        group: arg.Group = "document") -> out.SearchAnswer:
        return answer(lambda: kb.search_semantic(
            query, limit=limit, vault=vault, similarity_threshold=similarity_threshold,
            group=group).answer(query), render_results)

    @tool("search-vault", "Keyword search (BM25) over note names, titles and paths; with "
                          "search_content, over the text instead (one hit per document, "
                          "group=chunk: every chunk), with the matched words in bold in each "
                          "preview. An item the query names comes first.")
    def search_vault(query: arg.Query, search_content: arg.SearchContent = False,
                     limit: arg.Limit = 10, vault: arg.Vault = None,
                     source_types: arg.SourceTypes = None,
                     group: arg.Group = "document") -> out.SearchAnswer:
        return answer(lambda: kb.search_vault(
            query, search_content=search_content, limit=limit, vault=vault,
            source_types=source_types, group=group).answer(query), render_results)

    @tool("search-hybrid", "Keyword and semantic search fused (reciprocal rank fusion, or "
                           "weighted by alpha) over documents (group=chunk: chunks), with "
                           "filters on source type, tags and dates. An item the query names "
                           "(ticket key, commit hash, Message-ID, page id, title) comes first.")
    def search_hybrid(query: arg.Query, limit: arg.Limit = 10, vault: arg.Vault = None,
                      alpha: arg.Alpha = None, source_types: arg.SourceTypes = None,
                      tags: arg.Tags = None, modified_after: arg.ModifiedAfter = None,
                      modified_before: arg.ModifiedBefore = None,
                      group: arg.Group = "document") -> out.SearchAnswer:
        return answer(lambda: kb.search_hybrid(
            query, limit=limit, vault=vault, alpha=alpha, source_types=source_types, tags=tags,
            modified_after=modified_after, modified_before=modified_before,
            group=group).answer(query), render_results)

    @tool("search-graph", "The knowledge graph around a note (or a ticket, commit, thread, "
                          "page or code symbol): connected notes with tags and distance, "
                          "relationships by type with their evidence, counts.")
    def search_graph(query_note_path: arg.NotePath, depth: arg.Depth = 1) -> out.GraphAnswer:
        return answer(lambda: kb.search_graph(query_note_path, depth=depth), render_graph)

    @tool("search-graphrag", "An evidence pack for a question: the best sources reranked with "
                             "their graph neighbourhood, the subgraph linking them and a "
                             "context block packed to max_tokens.")
    def search_graphrag(query: arg.Query, limit: arg.Limit = 10, vault: arg.Vault = None,
                        depth: arg.Depth = 1, max_tokens: arg.MaxTokens = 6500,
                        source_types: arg.SourceTypes = None) -> out.GraphRAGAnswer:
        return answer(lambda: kb.search_graphrag(query, limit=limit, vault=vault, depth=depth,
                                                  max_tokens=max_tokens,
                                                  source_types=source_types), render_graphrag)

    @tool("search-code", "Hybrid search (keyword and semantic) over source code, one hit "
                         "per symbol (function, class, method...), each shown as "
                         "path:start-end, qualified name and signature. A symbol the query "
                         "names comes first.")
    def search_code(query: arg.Query, limit: arg.Limit = 10,
                    repo: arg.Repo = None) -> out.CodeSearchAnswer:
        return answer(lambda: kb.search_code(query, limit=limit, repo=repo),
                      render_code_results)

    @tool("get-symbol", "A symbol of the code by name, qualified name or path:line: its "
                        "definition and code, its callers and callees (with the line of each "
                        "call and how sure the link is), base and derived types, and its "
                        "story: the commits that changed it, the tickets they cite and the "
                        "notes, tickets, mail and pages that mention it, each openable with "
                        "read. A name several symbols share lists them instead.")
    def get_symbol(name: arg.SymbolName, repo: arg.Repo = None) -> out.SymbolAnswer:
        return answer(lambda: kb.get_symbol(name, repo=repo), render_symbol)

    def read_note(path: arg.ReadPath, vault: arg.Vault = None) -> out.NoteAnswer:
        return answer(lambda: kb.read_note(path, vault), render_document)

    # One tool under two names: read-note, as assistants configured for it call it, and read.
    for name in ("read-note", "read"):
        tool(name, "Open any document a search hit names (note, commit, repository doc, "
                   "ticket, mail thread, Confluence page): pass the hit's path and vault, or "
                   "a bare identifier (a ticket key or owner/repo#12, a commit hash or a "
                   "prefix of 7+ digits, a Message-ID, a page id or title, a note's path or "
                   "title, a document key). Gives its text (a note as it is on disk, any "
                   "other document as it was indexed), its dates, tags and kind's details "
                   "(a ticket's status, people and links, a commit's files with +/- lines, a "
                   "thread's messages, a page's space), links and backlinks. Only the "
                   "configured sources are read.")(read_note)

    @tool("list-vaults", "Every configured source with its kind (vault, repo, tickets, mail, "
                         "confluence), path, counts (notes, commits, tickets, messages and "
                         "threads, pages), chunks by type and when it was last published.")
    def list_vaults() -> out.VaultsAnswer:
        return answer(kb.list_vaults, render_vaults)

    @tool("get-vault-context", "Analytics of one vault: the newest snapshot with its figures, "
                               "generated_at, content_hash and whether it is stale.")
    def get_vault_context(vault: arg.VaultName) -> out.VaultContextAnswer:
        return answer(lambda: kb.get_vault_context(vault), render_vault_context)

    return server

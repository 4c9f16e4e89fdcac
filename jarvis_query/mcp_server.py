"""The MCP server: Jarvis's query tools for assistants (Claude Desktop and others) over stdio.

One process holds one ``KnowledgeBase`` (the model loaded once, new serving versions picked
up per request). Every answer is readable text plus structured JSON carrying
``schema_version`` and a ``correlation_id`` that the server also logs, with the tool name
and duration, to stderr and optionally a log file; stdout is the protocol and nothing else
writes to it. Failures come back as tool results with ``isError`` set and text starting
``Error: …`` (``Error reading note: …`` for read-note), never as crashes.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable
from contextvars import ContextVar
from importlib.metadata import version
from pathlib import Path
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field, ValidationError

from jarvis_core.config import ConfigError, JarvisConfig, load_config
from jarvis_core.stores.serving import NotPublished
from jarvis_query.context import format_vault_context
from jarvis_query.knowledge_base import MAX_DEPTH, MAX_LIMIT, MIN_DEPTH, KnowledgeBase, QueryError
from jarvis_query.reading import (
    NoteAccessError,
    format_note,
    format_vaults,
    list_vaults,
    read_note,
)

SCHEMA_VERSION = "v1"
SERVER_NAME = "jarvis"
log = logging.getLogger("jarvis.mcp")
_correlation_id: ContextVar[str] = ContextVar("correlation_id", default="-")
_READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)

Query = Annotated[str, Field(description="What to look for, in natural language.")]
# strict: JSON numbers and booleans only, so `true` or "5" is not taken for a limit of 1 or 5
Limit = Annotated[int, Field(description=f"Number of results, 1-{MAX_LIMIT}.", strict=True,
                             json_schema_extra={"minimum": 1, "maximum": MAX_LIMIT})]
Vault = Annotated[str | None, Field(description="Only this vault (see list-vaults); "
                                                "all vaults when omitted.")]
Depth = Annotated[int, Field(description=f"Hops from the note, {MIN_DEPTH}-{MAX_DEPTH}.",
                             strict=True,
                             json_schema_extra={"minimum": MIN_DEPTH, "maximum": MAX_DEPTH})]


def _envelope(data: dict) -> dict:
    return {"schema_version": SCHEMA_VERSION, "correlation_id": _correlation_id.get(), **data}


def error_result(message: str, kind: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=message)], is_error=True,
                          structured_content=_envelope({"error": {"type": kind,
                                                                  "message": message}}))


def _answer(compute: Callable[[], dict], render: Callable[[dict], str]) -> CallToolResult:
    """Run one tool body: its dict as structured content and ``render``'s text, or the error
    an assistant can act on (bad argument, nothing published yet, refused path)."""
    try:
        data = compute()
    except NoteAccessError as exc:
        return error_result(f"Error reading note: {exc}", "note_unreadable")
    except QueryError as exc:
        return error_result(f"Error: {exc}", "invalid_argument")
    except NotPublished as exc:
        return error_result(f"Error: {exc}", "not_published")
    except Exception as exc:  # a bug or a broken store: logged with its traceback
        log.exception("correlation_id=%s failed", _correlation_id.get())
        return error_result(f"Error: {type(exc).__name__}: {exc} (correlation_id "
                            f"{_correlation_id.get()}, details in the server log)", "internal")
    structured = _envelope(data)
    return CallToolResult(content=[TextContent(type="text", text=render(structured))],
                          structured_content=structured)


# --- readable text ----------------------------------------------------------------------

def _hit_lines(results: list[dict]) -> list[str]:
    lines = []
    for rank, hit in enumerate(results, 1):
        heading = f" › {hit['heading']}" if hit.get("heading") else ""
        score = f"{hit['score']:.3f}  " if isinstance(hit.get("score"), int | float) else ""
        lines.append(f"{rank}. {score}{hit.get('vault', '')}/{hit.get('path', '')}{heading}")
        if hit.get("snippet"):
            lines.append(f"   {hit['snippet']}")
    return lines


def render_results(data: dict) -> str:
    results = data.get("results") or []
    head = f"{len(results)} result(s) for {data.get('query', '')!r}"
    return "\n".join([head, *_hit_lines(results)]) if results else head + ": no results"


def render_graph(data: dict) -> str:
    if not data["available"]:
        return "\n".join([data["message"], "Semantic results instead:",
                          *_hit_lines(data["fallback"])])
    center = data["center"]
    counts = ", ".join(f"{n} {what}" for what, n in data["counts"].items()
                       if what != "by_relation")
    lines = [f"{center['title']} ({data['vault']}/{data['path']}), depth {data['depth']}: "
             f"{counts}"]
    for relation, edges in data["relationships"].items():
        pairs = "; ".join(f"{e['src_title']} → {e['dst_title']}" for e in edges[:10])
        more = f"; … {len(edges) - 10} more" if len(edges) > 10 else ""
        lines.append(f"{relation} ({len(edges)}): {pairs}{more}")
    lines.append("Notes: " + "; ".join(f"[{n['distance']}] {n['title']}" for n in data["notes"]))
    return "\n".join(lines)


def render_json(data: dict) -> str:
    """For answers whose structure is their content (evidence packs, analytics)."""
    return json.dumps({k: v for k, v in data.items()
                       if k not in ("schema_version", "correlation_id")},
                      indent=1, ensure_ascii=False, default=str)


def render_graphrag(data: dict) -> str:
    context = data.get("context")
    return context if isinstance(context, str) and context else render_json(data)


# --- the server -------------------------------------------------------------------------

def _argument_problem(exc: ToolError) -> str:
    """The SDK's argument validation errors in the style of the tools' own messages."""
    cause = exc.__cause__
    if not isinstance(cause, ValidationError):
        return str(exc)
    problems = []
    for error in cause.errors():
        field = ".".join(str(part) for part in error["loc"])
        problems.append(f"{field} parameter is required" if error["type"] == "missing"
                        else f"{field}: {error['msg']}")
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


def build_server(kb: KnowledgeBase) -> JarvisMCPServer:
    server = JarvisMCPServer(
        name=SERVER_NAME, version=version("jarvis"),
        instructions="Search and read the user's knowledge base (markdown vaults and other "
                     "sources): semantic, keyword, hybrid, graph and GraphRAG search, read "
                     "notes, list vaults, vault analytics. Paths are vault-relative.")

    def tool(name: str, description: str):
        return server.tool(name=name, description=description, annotations=_READ_ONLY)

    @tool("search-semantic", "Chunks nearest in meaning to the query (embeddings), best first, "
                             "with path, heading, cosine score and a snippet.")
    def search_semantic(
            query: Query, limit: Limit = 10, vault: Vault = None,
            similarity_threshold: Annotated[float | None, Field(
                description="Drop results below this cosine similarity (-1 to 1).",
                strict=True)] = None,
    ) -> CallToolResult:
        return _answer(lambda: {"query": query, "results": [r.as_dict() for r in
                                kb.search_semantic(query, limit=limit, vault=vault,
                                                   similarity_threshold=similarity_threshold)]},
                       render_results)

    @tool("search-vault", "Keyword search (BM25) over note names, titles and paths; with "
                          "search_content, over the text instead, with the matched words "
                          "in bold in each preview.")
    def search_vault(
            query: Query,
            search_content: Annotated[bool, Field(
                description="Match the text instead of names and paths.",
                strict=True)] = False,
            limit: Limit = 10, vault: Vault = None,
    ) -> CallToolResult:
        return _answer(lambda: {"query": query, "results": kb.search_vault(
            query, search_content=search_content, limit=limit, vault=vault)}, render_results)

    @tool("search-hybrid", "Keyword and semantic search fused (reciprocal rank fusion, or "
                           "weighted by alpha), with filters on source type, tags and dates.")
    def search_hybrid(
            query: Query, limit: Limit = 10, vault: Vault = None,
            alpha: Annotated[float | None, Field(
                description="Weight of the semantic side, 0 (keyword only) to 1 (semantic "
                            "only); reciprocal rank fusion when omitted.",
                strict=True)] = None,
            source_types: Annotated[list[str] | None, Field(
                description="Only these source types, e.g. note, commit, ticket.")] = None,
            tags: Annotated[list[str] | None, Field(
                description="Only chunks carrying any of these tags.")] = None,
            modified_after: Annotated[str | None, Field(
                description="ISO date: only documents modified on or after it.")] = None,
            modified_before: Annotated[str | None, Field(
                description="ISO date: only documents modified before it.")] = None,
    ) -> CallToolResult:
        return _answer(lambda: {"query": query, "results": kb.search_hybrid(
            query, limit=limit, vault=vault, alpha=alpha, source_types=source_types, tags=tags,
            modified_after=modified_after, modified_before=modified_before)}, render_results)

    @tool("search-graph", "The knowledge graph around a note: connected notes with tags and "
                          "distance, relationships by type with their evidence, counts.")
    def search_graph(
            query_note_path: Annotated[str, Field(
                description="Vault-relative note path ('.md' optional) or a note title.")],
            depth: Depth = 1,
    ) -> CallToolResult:
        return _answer(lambda: kb.search_graph(query_note_path, depth=depth), render_graph)

    @tool("search-graphrag", "An evidence pack for a question: the best sources reranked with "
                             "their graph neighbourhood, the subgraph linking them and a "
                             "context block packed to max_tokens.")
    def search_graphrag(
            query: Query, limit: Limit = 10, vault: Vault = None, depth: Depth = 1,
            max_tokens: Annotated[int, Field(
                description="Token budget of the context block.", strict=True)] = 6500,
    ) -> CallToolResult:
        return _answer(lambda: kb.search_graphrag(query, limit=limit, vault=vault, depth=depth,
                                                  max_tokens=max_tokens), render_graphrag)

    @tool("read-note", "A note's full text as it is on disk, with frontmatter, tags, links "
                       "and backlinks. Only notes inside the configured vaults can be read.")
    def read_note_tool(
            path: Annotated[str, Field(
                description="Vault-relative path ('.md' optional; may start with the vault "
                            "name) or a note title.")],
            vault: Vault = None,
    ) -> CallToolResult:
        return _answer(lambda: read_note(kb, path, vault), format_note)

    @tool("list-vaults", "The configured vaults (and other sources) with their path, note and "
                         "chunk counts and when they were last published.")
    def list_vaults_tool() -> CallToolResult:
        return _answer(lambda: list_vaults(kb), format_vaults)

    @tool("get-vault-context", "Analytics of one vault: the newest snapshot with its figures, "
                               "generated_at, content_hash and whether it is stale.")
    def get_vault_context(
            vault: Annotated[str, Field(description="The vault name (see list-vaults).")],
    ) -> CallToolResult:
        return _answer(lambda: kb.get_vault_context(vault), format_vault_context)

    return server


def configure_logging(log_file: Path | None = None, level: str = "INFO") -> None:
    """Log lines to stderr (and ``log_file``): stdout carries the protocol."""
    handlers: list[logging.Handler] = [logging.StreamHandler()]
    if log_file is not None:
        log_file.parent.mkdir(parents=True, exist_ok=True)
        handlers.append(logging.FileHandler(log_file, encoding="utf-8"))
    logging.basicConfig(level=level, handlers=handlers, force=True,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def _warm_up(kb: KnowledgeBase) -> None:
    """Open the published version and load its model while the client is still connecting."""
    try:
        kb.embedder(kb.snapshots.current().model)
    except Exception as exc:  # the tools report the same problem when they are called
        log.warning("warm-up skipped: %s", exc)


def serve(config: JarvisConfig) -> None:
    """Serve the tools over stdio until the client disconnects."""
    kb = KnowledgeBase(config)
    server = build_server(kb)
    log.info("serving %s for %s (data %s)", SERVER_NAME, config.config_path, config.data_dir)
    threading.Thread(target=_warm_up, args=(kb,), name="warm-up", daemon=True).start()
    try:
        server.run("stdio")
    finally:
        kb.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m jarvis_query.mcp_server",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--config", help="Configuration file (default: $JARVIS_CONFIG, "
                                         "else ./jarvis.yaml).")
    parser.add_argument("--log-file", type=Path, help="Also log to this file.")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    configure_logging(args.log_file)
    try:
        config = load_config(args.config)
    except ConfigError as exc:
        parser.exit(2, f"jarvis serve: {exc}\n")
    serve(config)


if __name__ == "__main__":
    main()

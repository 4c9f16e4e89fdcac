"""The MCP server with profiles, the access log, memory, health, resources and prompts: the
query tools of jarvis_query/mcp_server.py plus

- remember, recall, forget (jarvis_query/memory.py); remember and forget change the memory
  vault, so they are not read-only;
- health-status and performance-metrics (jarvis_query/health.py);
- every document a profile may see as a resource ``jarvis://<source>/<path>`` (listed a page
  at a time, read through the same checks as read-note), jarvis_query/resources.py;
- the prompts answer-from-notes and summarise-changes (jarvis_query/prompts.py).

Every tool call, resource listing and read and prompt is answered as its caller's profile
sees the knowledge base and recorded in the access log (jarvis_query/mcp_access.py).
"""

from __future__ import annotations

import logging
import time
from functools import partial
from importlib.metadata import version
from typing import Annotated, Any

import anyio
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS, ListResourcesResult, Resource, ToolAnnotations
from pydantic import BeforeValidator, Field

from jarvis_core.audit import AuditLog, AuditUnavailable, audit_path
from jarvis_core.profiles import resolve_profile
from jarvis_core.stores.serving import NotPublished
from jarvis_query import health, prompts
from jarvis_query import mcp_arguments as arg
from jarvis_query import mcp_schemas as out
from jarvis_query import memory as memory_tools
from jarvis_query.mcp_access import Access
from jarvis_query.mcp_server import (
    SERVER_NAME,
    JarvisMCPServer,
    answer,
    build_server,
    correlation_id,
    error_result,
)
from jarvis_query.render_assistant import (
    render_forget,
    render_health,
    render_metrics,
    render_recall,
    render_remember,
)
from jarvis_query.resources import SCHEME, document_uri, list_documents, read_document
from jarvis_query.validation import QueryError

log = logging.getLogger("jarvis.mcp")
INSTRUCTIONS = (
    "Search and read the user's knowledge base (markdown vaults, code, tickets, mail and "
    "Confluence): semantic, keyword, hybrid, graph and GraphRAG search, read notes, threads "
    "and pages, list sources, vault analytics. Remember what is worth keeping with remember "
    "(a note in the user's memory vault), get it back with recall, drop it with forget. "
    "Documents are resources jarvis://<source>/<path>; cite them by that URI.")
_READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)
_WRITES = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False,
                          open_world_hint=False)
_ARCHIVES = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True,
                            open_world_hint=False)

MemoryText = Annotated[str, Field(description="What to remember, in a sentence or a few "
                                              "paragraphs of markdown.")]
Importance = Annotated[float, Field(description="How much it matters, 0 (trivia) to 1 "
                                                "(essential).", strict=True, ge=0, le=1),
                       BeforeValidator(arg.number_from_text)]
MemoryTags = Annotated[list[str] | None, Field(description="Tags for the note (#memory is "
                                                           "always added).", max_length=20)]
Title = Annotated[str | None, Field(description="A title; the first line of the text when "
                                                "omitted.", max_length=200)]
Conversation = Annotated[str | None, Field(description="The conversation it came from; the "
                                                       "MCP session when omitted.",
                                           max_length=200)]
IncludeArchive = Annotated[bool, Field(description="Also search archived (faded or forgotten) "
                                                   "memories.", strict=True),
                           BeforeValidator(arg.boolean_from_text)]
TokenBudget = Annotated[int | None, Field(description="Tokens the memories may fill (the "
                                                      "configured memory.token_budget when "
                                                      "omitted).", strict=True),
                        BeforeValidator(arg.integer_from_text)]
MemoryName = Annotated[str, Field(description="The memory's path (from recall or remember) or "
                                              "its id.", max_length=1024)]
Hours = Annotated[float, Field(description="The window, in hours back from now.", strict=True,
                               gt=0, le=24 * 366), BeforeValidator(arg.number_from_text)]


def _request_context(context: Context | None):
    try:
        return context.request_context if context is not None else None
    except ValueError:  # a context built outside a request
        return None


class AssistantServer(JarvisMCPServer):
    """JarvisMCPServer answering each call as its caller's profile and recording it."""

    def __init__(self, access: Access, **options: Any) -> None:
        super().__init__(**options)
        self.access = access

    async def call_tool(self, name: str, arguments: dict[str, Any], context=None):
        """The call answered and recorded. A call that fails outside the tools (cancelled,
        say) is recorded as an error too; a call the access log cannot record gets an error
        instead of its answer."""
        caller = self.access.identify(_request_context(context))
        token = Access.acting_as(caller)
        started = time.perf_counter()
        try:
            result = await super().call_tool(name, arguments, context)
        except BaseException as exc:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(partial(
                    self.access.record, caller, name, arguments, correlation_id="-",
                    duration_ms=(time.perf_counter() - started) * 1000,
                    error=f"{type(exc).__name__}: {exc}"))
            raise
        finally:
            Access.reset(token)
        error = result.content[0].text if result.is_error and result.content else None
        try:
            await anyio.to_thread.run_sync(partial(
                self.access.record, caller, name, arguments,
                correlation_id=correlation_id(result),
                duration_ms=(time.perf_counter() - started) * 1000,
                data=None if error else result.structured_content or {}, error=error))
        except AuditUnavailable as exc:
            return error_result(f"Error: {exc}; the answer is withheld", "audit_unavailable")
        return result

    async def _handle_list_resources(self, ctx, params) -> ListResourcesResult:
        """Overrides the SDK's listing of static resources: the documents the caller's
        profile may see, a page at a time."""
        caller = self.access.identify(ctx)
        cursor = params.cursor if params is not None else None
        started = time.perf_counter()
        error = None
        try:
            documents, next_cursor = await anyio.to_thread.run_sync(
                self.access.as_caller, caller, partial(list_documents, cursor=cursor))
        except (QueryError, NotPublished) as exc:
            error = str(exc)
            raise MCPError(code=INVALID_PARAMS, message=error) from exc
        except BaseException as exc:
            error = f"{type(exc).__name__}: {exc}"
            raise
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(partial(
                    self.access.record, caller, "resources/list", {"cursor": cursor},
                    correlation_id="-", duration_ms=(time.perf_counter() - started) * 1000,
                    documents=[], error=error))
        return ListResourcesResult(
            resources=[Resource(uri=d["uri"], name=d["name"], title=d["title"],
                                mime_type=d["mime_type"]) for d in documents],
            next_cursor=next_cursor)


def _register_tools(server: AssistantServer, access: Access) -> None:
    kb = access.router

    @server.tool(name="remember", annotations=_WRITES,
                 description="Store something worth remembering as a new note in the user's "
                             "memory vault (never overwriting one); searchable after the "
                             "vault's next refresh.")
    def remember(text: MemoryText, importance: Importance = 0.5, tags: MemoryTags = None,
                 title: Title = None, conversation: Conversation = None) -> out.RememberAnswer:
        caller = Access.current_caller()
        return answer(lambda: memory_tools.remember(
            kb, text, importance=importance, tags=tags, title=title, client=caller.client,
            conversation=conversation or caller.session), render_remember)

    @server.tool(name="recall", annotations=_READ_ONLY,
                 description="Memories relevant to the query, ranked by relevance 0.4, recency "
                             "0.3, frequency of use 0.2 and importance 0.1 (each component "
                             "given), packed into a token budget.")
    def recall(query: arg.Query, limit: arg.Limit = 10,
               include_archive: IncludeArchive = False,
               token_budget: TokenBudget = None) -> out.RecallAnswer:
        return answer(lambda: memory_tools.recall(
            kb, access.audit.uses, query, limit=limit, include_archive=include_archive,
            token_budget=token_budget), render_recall)

    @server.tool(name="forget", annotations=_ARCHIVES,
                 description="Archive one memory (by path or id): it leaves recall's default "
                             "answers but is never deleted.")
    def forget(memory: MemoryName) -> out.ForgetAnswer:
        return answer(lambda: memory_tools.forget(kb, memory), render_forget)

    @server.tool(name="health-status", annotations=_READ_ONLY,
                 description="The published version and its age, whether each store is "
                             "reachable, the Dagster daemon's and sensors' last ticks, and "
                             "how stale each source is.")
    def health_status() -> out.HealthAnswer:
        return answer(lambda: health.health_status(kb, access.audit), render_health)

    @server.tool(name="performance-metrics", annotations=_READ_ONLY,
                 description="Per tool: calls, errors and latency percentiles (p50, p95, p99) "
                             "from the access log.")
    def performance_metrics(hours: Hours = 24.0) -> out.MetricsAnswer:
        caller = Access.current_caller()
        return answer(lambda: health.performance_metrics(access.audit, caller.profile, hours),
                       render_metrics)


def _register_resources_and_prompts(server: AssistantServer, access: Access) -> None:
    def answered(name: str, arguments: dict, work, context: Context):
        caller = access.identify(_request_context(context))
        started = time.perf_counter()
        try:
            result, documents = access.as_caller(caller, work)
        except Exception as exc:
            access.record(caller, name, arguments, correlation_id="-",
                          duration_ms=(time.perf_counter() - started) * 1000, error=str(exc))
            raise
        access.record(caller, name, arguments, correlation_id="-", documents=documents,
                      duration_ms=(time.perf_counter() - started) * 1000)
        return result

    @server.resource(f"{SCHEME}://{{source}}/{{+path}}", name="document",
                     description="A document of the knowledge base: a note as it is on disk, "
                                 "anything else rebuilt from its published text.",
                     mime_type="text/markdown")
    async def read(source: str, path: str, context: Context) -> str:
        uri = document_uri(source, path)

        def work(kb):
            document = read_document(kb, uri)
            return document["text"], [f"{document['source']}/{document['path']}"]

        try:
            return await anyio.to_thread.run_sync(answered, "resources/read", {"uri": uri},
                                                  work, context)
        except QueryError as exc:
            raise ResourceNotFoundError(str(exc)) from exc
        except NotPublished as exc:
            raise ResourceError(str(exc)) from exc

    async def prompt(name: str, arguments: dict, work, context: Context) -> str:
        """A prompt's text; a bad argument is the client's error (invalid params)."""
        try:
            return await anyio.to_thread.run_sync(answered, f"prompts/{name}", arguments, work,
                                                  context)
        except (QueryError, NotPublished) as exc:
            raise MCPError(code=INVALID_PARAMS, message=str(exc)) from exc

    @server.prompt(name="answer-from-notes", title="Answer from my notes, with citations",
                   description="Answer a question from the knowledge base alone, citing each "
                               "source by its jarvis:// URI.")
    async def answer_from_notes(question: str, context: Context) -> str:
        return await prompt("answer-from-notes", {"question": question},
                            lambda kb: prompts.answer_from_notes(kb, question), context)

    @server.prompt(name="summarise-changes", title="What changed in a vault",
                   description="Summarise the notes of a vault modified in the last days "
                               "(7 by default).")
    async def summarise_changes(vault: str, context: Context, days: str = "7") -> str:
        return await prompt("summarise-changes", {"vault": vault, "days": days},
                            lambda kb: prompts.summarise_changes(kb, vault, days), context)


def build_assistant_server(kb, audit: AuditLog, profile_name: str | None = None,
                           transport: str = "stdio", **options: Any) -> AssistantServer:
    """The server for ``kb`` with every tool, resource and prompt; ``options`` go to
    MCPServer (the HTTP server passes its token verifier and auth settings)."""
    access = Access(kb, audit, resolve_profile(kb.config, profile_name), transport)
    server = AssistantServer(access, name=SERVER_NAME, version=version("jarvis"),
                             instructions=INSTRUCTIONS, **options)
    build_server(access.router, server=server)
    _register_tools(server, access)
    _register_resources_and_prompts(server, access)
    return server


def open_audit(config) -> AuditLog:
    return AuditLog(audit_path(config.data_dir), config.audit)


def serve_stdio(kb, profile_name: str | None = None) -> None:
    """Serve over stdio until the client disconnects, as ``profile_name`` (every source when
    None); start ``kb.load_in_background()`` first (see KnowledgeBase.load_in_background)."""
    audit = open_audit(kb.config)
    server = build_assistant_server(kb, audit, profile_name)
    log.info("serving %s for %s (data %s, profile %s)", SERVER_NAME, kb.config.config_path,
             kb.config.data_dir, server.access.default_profile.name)
    try:
        server.run("stdio")
    finally:
        kb.close()
        audit.close()

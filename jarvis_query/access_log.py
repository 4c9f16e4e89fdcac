"""What the access log records of a query: the documents an answer returned or read, and the
`jarvis` commands' knowledge base, which records each of its queries (the MCP server records
its calls itself, jarvis_query/mcp_access.py).

Documents are named ``<source>/<path>`` wherever an answer names them so (search hits,
GraphRAG sources, notes read, memories), and by graph key otherwise (a ticket or commit in a
graph neighbourhood)."""

from __future__ import annotations

import inspect
import time
import uuid
from collections.abc import Mapping

from jarvis_core.audit import AuditEntry, AuditLog
from jarvis_query.results import jsonable

# KnowledgeBase method -> the tool name the log uses (the MCP tool of the same query)
QUERY_TOOLS = {"search_semantic": "search-semantic", "search_vault": "search-vault",
               "search_hybrid": "search-hybrid", "search_graph": "search-graph",
               "search_graphrag": "search-graphrag", "search_code": "search-code",
               "get_symbol": "get-symbol", "read_note": "read-note",
               "list_vaults": "list-vaults", "get_vault_context": "get-vault-context"}
# a symbol's answer lists its matches, and of one symbol the items around it
_SYMBOL_LISTS = ("matches", "callers", "callees", "bases", "derived", "commits", "tickets",
                 "mentions")
_LISTS = ("results", "sources", "memories", "fallback", *_SYMBOL_LISTS)
_ONE = ("memory", "forgotten", "archived_to", "symbol")


def _named(item: object) -> str | None:
    if isinstance(item, Mapping) and item.get("vault") and item.get("path"):
        return f"{item['vault']}/{item['path']}"
    return None


def documents_of(data: object) -> list[str]:
    """The documents an answer (a tool's JSON-ready dict) returned or read, in order."""
    if isinstance(data, list):
        data = {"results": data}
    if not isinstance(data, Mapping):
        return []
    found: list[str | None] = []
    if "content" in data or data.get("available"):  # a note read, a graph's centre
        found.append(_named(data))
    for key in _LISTS:
        found += [_named(item) for item in data.get(key) or []]
    for key in _ONE:
        found.append(_named(data.get(key)))
    for node in data.get("notes") or []:
        key = node.get("key", "") if isinstance(node, Mapping) else ""
        found.append(key.removeprefix("note:") if key.startswith("note:") else key or None)
    return list(dict.fromkeys(name for name in found if name))


class AuditedKnowledgeBase:
    """A KnowledgeBase whose queries are recorded in the access log, for the CLI: the client
    is ``cli``, the profile ``all`` (a person at their own terminal sees every source)."""

    def __init__(self, kb, audit: AuditLog, client: str = "cli") -> None:
        self._kb = kb
        self._audit = audit
        self._client = client
        self._session = uuid.uuid4().hex[:16]

    def __getattr__(self, name: str):
        method = getattr(self._kb, name)
        tool = QUERY_TOOLS.get(name)
        if tool is None:
            return method
        signature = inspect.signature(method)

        def recorded(*args, **kwargs):
            arguments = signature.bind_partial(*args, **kwargs).arguments
            started = time.perf_counter()
            entry = AuditEntry(tool=tool, arguments=dict(arguments), client=self._client,
                               profile="all", transport="cli",
                               correlation_id=uuid.uuid4().hex[:16], duration_ms=0.0,
                               session=self._session)
            try:
                answer = method(*args, **kwargs)
            except Exception as exc:
                entry.outcome, entry.error = "error", f"{type(exc).__name__}: {exc}"
                raise
            else:
                entry.documents = documents_of(jsonable(answer))
            finally:
                entry.duration_ms = (time.perf_counter() - started) * 1000
                self._audit.record(entry)
            return answer

        return recorded

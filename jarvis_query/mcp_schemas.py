"""The MCP tools' output schemas: what each successful call's ``structuredContent`` holds,
declared to clients (``outputSchema``) and checked by the SDK before an answer leaves.

A tool annotated ``-> Answer[Model]`` returns a ``CallToolResult`` whose structured content
validates against ``Model`` (the SDK derives the schema from it). Required fields are what
every answer of the tool carries; nested figures that vary by source (analytics, frontmatter,
node properties) are open objects; every object admits fields added later. Error results
(``isError``) carry ``{"error": {"type", "message"}}`` instead, as clients validate only
successful results against ``outputSchema``. A search hit's model derives from the query
side's one hit type (``Hit``, jarvis_query/results.py).
"""

from __future__ import annotations

from typing import Annotated, Any, get_type_hints

from mcp.types import CallToolResult
from pydantic import BaseModel, ConfigDict, create_model

from jarvis_query.results import OPTIONAL, SHOWN, Hit


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class _Envelope(_Open):
    schema_version: str
    correlation_id: str


class Embeddings(_Open):
    complete: bool
    done: int
    total: int
    message: str | None = None


def _hit_model() -> type[_Open]:
    """The JSON of a search hit (``Hit.as_dict``) as a model: every hit's fields required,
    a keyword hit's ``match`` and a fused hit's legs optional, typed as ``Hit`` types them."""
    types = get_type_hints(Hit)
    return create_model("SearchHit", __base__=_Open,
                        **{name: (types[name], ...) for name in SHOWN},
                        **{name: (types[name], None) for name in OPTIONAL})


SearchHit = _hit_model()


class SearchOutput(_Envelope):
    query: str
    results: list[SearchHit]
    embeddings: Embeddings | None = None


class GraphNote(_Open):
    key: str
    title: str
    source: str | None
    distance: int | None
    tags: list[str]


class GraphEdge(_Open):
    src: str
    dst: str
    src_title: str
    dst_title: str
    evidence: list[str]
    evidence_text: str | None
    extractor: str
    confidence: str


class GraphOutput(_Envelope):
    available: bool
    vault: str | None = None
    path: str | None = None
    center: dict[str, Any] | None = None
    depth: int | None = None
    truncated: bool | None = None
    notes: list[GraphNote] | None = None
    relationships: dict[str, list[GraphEdge]] | None = None
    counts: dict[str, Any] | None = None
    message: str | None = None
    fallback: list[SearchHit] | None = None


class PackSource(_Open):
    rank: int
    key: str
    vault: str
    path: str
    title: str
    source_type: str
    modified_at: str | None
    score: float
    components: dict[str, float]
    found_by: str
    chunk_ids: list[str]
    headings: list[str]
    text: str
    evidence: list[dict[str, Any]]


class Subgraph(_Open):
    nodes: list[dict[str, Any]]
    edges: list[dict[str, Any]]


class GraphRAGOutput(_Envelope):
    query: str
    depth: int
    weights: dict[str, float]
    graph_available: bool
    graph_message: str | None
    sources: list[PackSource]
    subgraph: Subgraph
    context: str
    tokens: int
    max_tokens: int
    truncated: bool
    embeddings: Embeddings | None = None


class CodeHit(SearchHit):
    """A code hit: its symbol's file, line span, kind, qualified name and signature (None
    when the symbol is gone from the published code tables)."""

    file: str | None
    start_line: int | None
    end_line: int | None
    kind: str | None
    qualified_name: str | None
    signature: str | None


class CodeSearchOutput(_Envelope):
    query: str
    results: list[CodeHit]
    embeddings: Embeddings | None = None


class SymbolMatch(_Open):
    key: str
    vault: str
    path: str
    file: str
    start_line: int
    end_line: int
    kind: str
    qualified_name: str
    signature: str | None


class SymbolDefinition(SymbolMatch):
    name: str
    doc: str | None
    parent: str | None
    language: str | None
    code: str


class SymbolOutput(_Envelope):
    """The symbols a name matches; of the one it names (``symbol``), the items around it."""

    name: str
    matches: list[SymbolMatch]
    symbol: SymbolDefinition | None
    counts: dict[str, int]
    commits_by: str | None = None
    callers: list[dict[str, Any]] | None = None
    callees: list[dict[str, Any]] | None = None
    ambiguous_calls: list[dict[str, Any]] | None = None
    bases: list[dict[str, Any]] | None = None
    derived: list[dict[str, Any]] | None = None
    commits: list[dict[str, Any]] | None = None
    tickets: list[dict[str, Any]] | None = None
    mentions: list[dict[str, Any]] | None = None


class NoteOutput(_Envelope):
    """Any read document, whatever its kind (jarvis_query/documents.py); ``links`` and
    ``backlinks`` are None before anything is published."""

    kind: str
    vault: str
    path: str
    key: str
    title: str
    created_at: str | None
    modified_at: str | None
    tags: list[str]
    named: str | None
    details: dict[str, Any]
    warnings: list[str]
    published: bool
    links: list[dict[str, Any]] | None
    backlinks: list[dict[str, Any]] | None
    content: str


class SourceEntry(_Open):
    name: str
    kind: str
    path: str | None


class VaultsOutput(_Envelope):
    vaults: list[SourceEntry]
    other_sources: list[SourceEntry]
    published: dict[str, Any] | None


class VaultContextOutput(_Envelope):
    vault: str
    kind: str
    snapshot_id: str
    generated_at: str
    content_hash: str
    published_hash: str
    is_stale: bool
    serving_version: str
    summary: dict[str, Any]
    changes: dict[str, Any] | None
    trend: list[dict[str, Any]]
    figures: dict[str, Any]
    cache_hit: bool


class MemoryInfo(_Open):
    path: str
    vault: str
    uri: str
    id: str
    title: str
    created: str | None
    importance: float
    tags: list[str]
    client: str | None
    conversation: str | None
    archived: bool


class RecalledMemory(MemoryInfo):
    text: str
    uses: int
    score: float
    components: dict[str, float]
    tokens: int


class RememberOutput(_Envelope):
    memory: MemoryInfo
    searchable: str


class RecallOutput(_Envelope):
    query: str
    weights: dict[str, float]
    memories: list[RecalledMemory]
    context: str
    tokens: int
    token_budget: int
    found: int
    omitted: int
    moved_since_publish: int
    pending: int
    include_archive: bool


class ForgetOutput(_Envelope):
    forgotten: MemoryInfo
    archived_to: MemoryInfo


class StoreCheck(_Open):
    store: str
    reachable: bool
    detail: str | None = None
    error: str | None = None


class SourceHealth(_Open):
    name: str
    kind: str
    published: bool
    last_ingested_at: str | None
    age_seconds: float | None
    changed_since_publish: int | None
    change: str | None = None


class HealthOutput(_Envelope):
    status: str
    message: str | None
    published: dict[str, Any] | None
    stores: list[StoreCheck]
    dagster: dict[str, Any]
    sources: list[SourceHealth]


class ToolMetrics(_Open):
    tool: str
    calls: int
    errors: int
    p50_ms: float
    p95_ms: float
    p99_ms: float
    mean_ms: float
    max_ms: float


class MetricsOutput(_Envelope):
    since: str
    hours: float
    profile: str
    calls: int
    tools: list[ToolMetrics]


SearchAnswer = Annotated[CallToolResult, SearchOutput]
GraphAnswer = Annotated[CallToolResult, GraphOutput]
GraphRAGAnswer = Annotated[CallToolResult, GraphRAGOutput]
NoteAnswer = Annotated[CallToolResult, NoteOutput]
CodeSearchAnswer = Annotated[CallToolResult, CodeSearchOutput]
SymbolAnswer = Annotated[CallToolResult, SymbolOutput]
VaultsAnswer = Annotated[CallToolResult, VaultsOutput]
VaultContextAnswer = Annotated[CallToolResult, VaultContextOutput]
RememberAnswer = Annotated[CallToolResult, RememberOutput]
RecallAnswer = Annotated[CallToolResult, RecallOutput]
ForgetAnswer = Annotated[CallToolResult, ForgetOutput]
HealthAnswer = Annotated[CallToolResult, HealthOutput]
MetricsAnswer = Annotated[CallToolResult, MetricsOutput]

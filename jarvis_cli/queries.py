"""The commands that read the published knowledge base: search (semantic, keyword, hybrid,
graph, GraphRAG, code), a symbol of the code, read a note, list the sources, analytics,
status and failure notices (the MCP server is `jarvis serve`, jarvis_cli/assistants.py).
They import the query package and what answering needs, never Dagster or torch: a cold
`jarvis search` answers in about a second."""

from __future__ import annotations

import click

from jarvis_cli.common import CliContext, answering, emit_text
from jarvis_query.render import (
    render_document,
    render_graph,
    render_graphrag_ranking,
    render_notifications,
    render_results,
    render_status,
    render_vault_context,
    render_vaults,
)
from jarvis_query.render_code import render_code_results, render_symbol

_TYPE_HELP = ("Only this source type (repeatable): note, commit, repo_doc, code (one "
              "document per symbol), ticket, email (mail threads), page (Confluence).")
_CHUNKS = click.option("--chunks", "chunks", is_flag=True,
                       help="Every matching chunk (a document's chunks apart) instead of one "
                            "hit per document.")


def _group(chunks: bool) -> str:
    return "chunk" if chunks else "document"


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_obj
def status(obj: CliContext, as_json: bool) -> None:
    """Show the configured sources and the row counts of every layer, as published."""
    from jarvis_query.status import store_status

    config = obj.config()
    with answering():
        data = store_status(config)
    emit_text(data, as_json, render_status)


@click.command()
@click.option("--limit", default=20, show_default=True, help="Number of notices.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_obj
def notifications(obj: CliContext, limit: int, as_json: bool) -> None:
    """Show the newest failure notices (failed runs and refreshes), newest first."""
    from jarvis_core.notifications import recent

    notices = recent(obj.config().notifications_path, limit)
    emit_text({"notifications": notices}, as_json, render_notifications)


@click.command()
@click.argument("query")
@click.option("--vault", default=None, help="Search only this vault.")
@click.option("--limit", default=10, show_default=True, help="Number of results (1-50).")
@click.option("--threshold", "similarity_threshold", type=float, default=None,
              help="Drop results with a lower cosine similarity.")
@_CHUNKS
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_obj
def search(obj: CliContext, query: str, vault: str | None, limit: int,
           similarity_threshold: float | None, chunks: bool, as_json: bool) -> None:
    """Semantic search: the documents (--chunks: chunks) nearest in meaning to QUERY; an
    item QUERY names (ticket key, commit hash, Message-ID, page id, title) first."""
    with answering():
        hits = obj.knowledge_base().search_semantic(
            query, limit=limit, vault=vault, similarity_threshold=similarity_threshold,
            group=_group(chunks))
    emit_text(hits.answer(query), as_json, render_results)


@click.command()
@click.argument("note")
@click.option("--depth", default=1, show_default=True, help="Hops from the note (1-3).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_obj
def graph(obj: CliContext, note: str, depth: int, as_json: bool) -> None:
    """Graph search: the notes, tags and links around NOTE (a path or a title)."""
    with answering():
        result = obj.knowledge_base().search_graph(note, depth=depth)
    emit_text(result, as_json, render_graph)


@click.command()
@click.argument("name")
@click.option("--vault", default=None, help="Read from this source (a search hit's vault).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_obj
def read(obj: CliContext, name: str, vault: str | None, as_json: bool) -> None:
    """Open the document NAME names, of any kind: a search hit's path (with --vault), a
    document key, a note's path or title, a ticket key (LUM-4, owner/repo#12), a commit hash
    or its first 7+ digits, a Message-ID, a Confluence page id or title. A note is read as
    it is on disk, any other document as it was indexed; with its details and links."""
    with answering():
        data = obj.knowledge_base().read_note(name, vault)
    emit_text(data, as_json, render_document)


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_obj
def vaults(obj: CliContext, as_json: bool) -> None:
    """List every configured source with its kind and what is published for it."""
    emit_text(obj.knowledge_base().list_vaults(), as_json, render_vaults)


@click.command()
@click.argument("vault")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_obj
def context(obj: CliContext, vault: str, as_json: bool) -> None:
    """VAULT's newest analytics snapshot: figures, trend and whether it is stale (for a
    repository or ticket set, its cross-source figures)."""
    with answering():
        data = obj.knowledge_base().get_vault_context(vault)
    emit_text(data, as_json, render_vault_context)


@click.command()
@click.argument("query")
@click.option("--content", "search_content", is_flag=True,
              help="Match chunk text (with a highlighted preview), not note names and paths.")
@click.option("--vault", default=None, help="Search only this vault (or source).")
@click.option("--limit", default=10, show_default=True, help="Number of results (1-50).")
@click.option("--type", "source_types", multiple=True, help=_TYPE_HELP)
@_CHUNKS
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_obj
def keyword(obj: CliContext, query: str, search_content: bool, vault: str | None, limit: int,
            source_types: tuple[str, ...], chunks: bool, as_json: bool) -> None:
    """Keyword search (BM25): notes whose name or path matches QUERY, or with --content the
    documents (--chunks: chunks) whose text does; an item QUERY names first."""
    with answering():
        hits = obj.knowledge_base().search_vault(query, search_content=search_content,
                                                 limit=limit, vault=vault,
                                                 source_types=list(source_types) or None,
                                                 group=_group(chunks))
    emit_text(hits.answer(query), as_json, render_results)


@click.command()
@click.argument("query")
@click.option("--vault", default=None, help="Search only this vault (or source).")
@click.option("--limit", default=10, show_default=True, help="Number of results (1-50).")
@click.option("--alpha", type=float, default=None,
              help="Weighted fusion instead of RRF: 0 = keyword only, 1 = vector only.")
@click.option("--type", "source_types", multiple=True, help=_TYPE_HELP)
@click.option("--tag", "tags", multiple=True, help="Only chunks with this tag (repeatable: any).")
@click.option("--after", "modified_after", default=None,
              help="Modified on or after this ISO date or date-time.")
@click.option("--before", "modified_before", default=None,
              help="Modified on or before this ISO date (the whole day) or date-time.")
@_CHUNKS
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_obj
def hybrid(obj: CliContext, query: str, vault: str | None, limit: int, alpha: float | None,
           source_types: tuple[str, ...], tags: tuple[str, ...], modified_after: str | None,
           modified_before: str | None, chunks: bool, as_json: bool) -> None:
    """Hybrid search: keyword (BM25) and semantic results for QUERY fused, one hit per
    document (--chunks: chunks); an item QUERY names first."""
    with answering():
        hits = obj.knowledge_base().search_hybrid(
            query, limit=limit, vault=vault, alpha=alpha, source_types=list(source_types) or None,
            tags=list(tags) or None, modified_after=modified_after,
            modified_before=modified_before, group=_group(chunks))
    emit_text(hits.answer(query), as_json, render_results)


@click.command()
@click.argument("query")
@click.option("--vault", default=None, help="Search only this vault (or source).")
@click.option("--limit", default=10, show_default=True, help="Number of sources (1-50).")
@click.option("--depth", default=1, show_default=True, help="Graph hops around each hit (1-3).")
@click.option("--max-tokens", default=6500, show_default=True,
              help="Token budget of the context block.")
@click.option("--type", "source_types", multiple=True, help=_TYPE_HELP)
@click.option("--context", "context_only", is_flag=True,
              help="Print only the context block (for pasting into an assistant).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_obj
def graphrag(obj: CliContext, query: str, vault: str | None, limit: int, depth: int,
             max_tokens: int, source_types: tuple[str, ...], context_only: bool,
             as_json: bool) -> None:
    """GraphRAG evidence pack: hits for QUERY reranked through the knowledge graph, the
    subgraph linking them and a context block within the token budget."""
    with answering():
        pack = obj.knowledge_base().search_graphrag(query, limit=limit, vault=vault,
                                                    depth=depth, max_tokens=max_tokens,
                                                    source_types=list(source_types) or None)
    if context_only:
        if pack["embeddings"]["message"]:  # beside the block, not in it
            click.echo(f"note: {pack['embeddings']['message']}", err=True)
        click.echo(pack["context"])
    else:
        emit_text(pack, as_json, render_graphrag_ranking)


@click.command()
@click.argument("name")
@click.option("--repo", default=None, help="Only this repository.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_obj
def symbol(obj: CliContext, name: str, repo: str | None, as_json: bool) -> None:
    """A symbol of the code: NAME is its name (clamp_future), qualified name
    (UserService.create_user) or file and line (src/app/service.py:42). Shows its definition
    and code, callers and callees, base and derived types, and its story: the commits that
    changed it, the tickets they cite and the documents that mention it. A name several
    symbols share lists them instead."""
    with answering():
        data = obj.knowledge_base().get_symbol(name, repo=repo)
    emit_text(data, as_json, render_symbol)


@click.command("search-code")
@click.argument("query")
@click.option("--repo", default=None, help="Only this repository.")
@click.option("--limit", default=10, show_default=True, help="Number of results (1-50).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_obj
def search_code(obj: CliContext, query: str, repo: str | None, limit: int,
                as_json: bool) -> None:
    """Hybrid search over source code, one hit per symbol: path:start-end, qualified name
    and signature; a symbol QUERY names first."""
    with answering():
        data = obj.knowledge_base().search_code(query, limit=limit, repo=repo)
    emit_text(data, as_json, render_code_results)


QUERY_COMMANDS = [status, notifications, search, graph, read, vaults, context, keyword, hybrid,
                  graphrag, symbol, search_code]

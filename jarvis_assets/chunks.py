"""Text layer: heading-aware chunks that fit the embedding model, for every source kind."""

import time

import dagster as dg
from dagster_duckdb import DuckDBResource

from jarvis_assets.automation import follows_upstream
from jarvis_assets.metadata import counts_table, markdown_table
from jarvis_assets.notes import DUCKDB_POOL, raw_notes
from jarvis_assets.partitions import source_partitions
from jarvis_assets.repos import raw_repository
from jarvis_assets.tickets import raw_tickets
from jarvis_core.stores import tables
from jarvis_core.text.documents import (
    Document,
    chunk_config_id,
    chunk_frames,
    plan_chunks,
    stale_documents,
)
from jarvis_core.text.tokens import token_counter
from jarvis_resources import JarvisConfigResource

# Every source kind contributes its documents through one select of this shape ($1 is the
# source); only parsing is source-specific, chunking and everything after it is shared.
_DOCUMENT_SELECTS = (
    """SELECT source, 'note' AS source_type, note_key AS doc_key, path, title,
              body AS text, content_hash AS doc_hash
       FROM notes WHERE source = $1""",
    """SELECT source, 'commit' AS source_type, 'commit:' || source || '/' || sha AS doc_key,
              'commits/' || sha AS path, subject AS title, message AS text, sha AS doc_hash
       FROM commits WHERE source = $1""",
    """SELECT source, 'repo_doc' AS source_type, 'repo_doc:' || source || '/' || path AS doc_key,
              path, title, text, blob_sha AS doc_hash
       FROM repo_docs WHERE source = $1""",
    """SELECT source, 'ticket' AS source_type, 'ticket:' || key AS doc_key,
              'tickets/' || key AS path, key || ': ' || summary AS title, text,
              content_hash AS doc_hash
       FROM tickets WHERE source = $1""",
)
_DOCUMENTS_SQL = "\nUNION ALL\n".join(_DOCUMENT_SELECTS)


@dg.asset(
    partitions_def=source_partitions,
    deps=[raw_notes, raw_repository, raw_tickets],
    group_name="text",
    kinds={"duckdb", "python"},
    pool=DUCKDB_POOL,
    automation_condition=follows_upstream,
)
def chunks(
    context: dg.AssetExecutionContext, jarvis: JarvisConfigResource, duckdb: DuckDBResource
) -> dg.MaterializeResult:
    """Chunks of one source's documents, each within the embedding model's token limit.

    Tokens are counted with the model's own tokenizer; chunk ids derive from the
    document, heading path and text, so unchanged chunks keep their ids across runs.
    """
    source = context.partition_key
    config = jarvis.load()
    started = time.perf_counter()
    counter = token_counter(config.embedding.model, config.chunking.max_tokens)
    config_id = chunk_config_id(config.embedding.model, counter.max_tokens,
                                config.chunking.overlap_tokens)

    with duckdb.get_connection() as conn:
        tables.ensure_schema(conn)
        current = tables.read_frame(
            conn, f"SELECT path, doc_hash FROM ({_DOCUMENTS_SQL})", [source])
        chunked = tables.read_frame(
            conn, "SELECT path, doc_hash, chunk_config FROM chunked_documents WHERE source = ?",
            [source])
        new, changed, deleted, unchanged = stale_documents(current, chunked, config_id)
        documents = [
            Document(**row) for row in tables.read_frame(
                conn, f"SELECT * FROM ({_DOCUMENTS_SQL}) WHERE list_contains($2, path)",
                [source, new + changed]).iter_rows(named=True)
        ]
        existing_ids: dict[str, set[str]] = {}
        for path, chunk_id in conn.execute(
                "SELECT path, chunk_id FROM chunks WHERE source = ?", [source]).fetchall():
            existing_ids.setdefault(path, set()).add(chunk_id)

    plan = plan_chunks(source, documents, set(new), deleted, unchanged, existing_ids,
                       counter, config.chunking.overlap_tokens, config_id)
    chunked_at = time.perf_counter()
    for path, reason in plan.failed:
        context.log.warning(f"{source}/{path}: not chunked: {reason}")
    chunk_rows, document_rows = chunk_frames(plan)

    with duckdb.get_connection() as conn:
        tables.replace_rows(conn, "chunks", source=source, remove_paths=plan.removed_paths,
                           rows=chunk_rows)
        tables.replace_rows(conn, "chunked_documents", source=source,
                           remove_paths=plan.removed_paths, rows=document_rows)
        total, max_tokens = conn.execute(
            "SELECT count(*), coalesce(max(token_count), 0) FROM chunks WHERE source = ?",
            [source]).fetchone()

    counts = plan.counts()
    context.log.info(f"{source}: chunks {counts}")
    return dg.MaterializeResult(metadata={
        **counts,
        "dagster/row_count": total,
        "token_limit": counter.max_tokens,
        "largest_chunk_tokens": max_tokens,
        "chunk_config": config_id,
        "chunk_seconds": round(chunked_at - started, 3),
        "write_seconds": round(time.perf_counter() - chunked_at, 3),
        "summary": counts_table(counts),
        "preview": markdown_table(plan.chunk_rows,
                                  ["path", "heading_path", "token_count", "text"]),
    })

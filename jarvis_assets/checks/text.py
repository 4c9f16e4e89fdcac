"""Checks of the text layer: every document is chunked, chunks fit the model, chunk ids are
unique, and the keyword index holds exactly the chunks."""

import dagster as dg

from jarvis_assets.keyword_index import keyword_index
from jarvis_assets.metadata import markdown_table
from jarvis_assets.partitions import source_partitions
from jarvis_core.stores.tables import read_frame
from jarvis_core.text.documents import documents_sql, recount_unchecked_tokens
from jarvis_core.text.tokens import token_counter
from jarvis_resources import JarvisConfigResource, KeywordIndexResource, TablesResource


@dg.asset_check(asset="chunks", blocking=True, partitions_def=source_partitions,
                description="Every document with text (a note's body, a ticket, a thread, a "
                "page...) has at least one chunk.")
def every_document_has_chunks(context: dg.AssetCheckExecutionContext,
                              jarvis: JarvisConfigResource,
                              tables: TablesResource) -> dg.AssetCheckResult:
    source = context.partition_key
    with tables.get_connection() as conn:
        missing = read_frame(conn, f"""
            SELECT d.source, d.path FROM ({documents_sql(jarvis.load().kind_of(source))}) d
            WHERE trim(d.text) <> ''
              AND NOT EXISTS (SELECT 1 FROM chunks c
                              WHERE c.source = d.source AND c.doc_key = d.doc_key)
            ORDER BY d.path
        """, [source]).to_dicts()
    return dg.AssetCheckResult(
        passed=not missing,
        metadata={"documents_without_chunks": len(missing),
                  "examples": markdown_table(missing, ["source", "path"])})


@dg.asset_check(asset="chunks", blocking=True, partitions_def=source_partitions,
                description="No chunk exceeds the embedding model's token limit: the chunks "
                "of documents chunked since the last check are recounted with the model's own "
                "tokenizer, every stored count is held to the limit.")
def chunks_within_token_limit(context: dg.AssetCheckExecutionContext,
                              jarvis: JarvisConfigResource,
                              tables: TablesResource) -> dg.AssetCheckResult:
    config, source = jarvis.load(), context.partition_key
    counter = token_counter(config.embedding.model, config.chunking.max_tokens)
    recount = recount_unchecked_tokens(tables.get_connection, source, counter,
                                       config.resources.batch_rows)
    with tables.get_connection() as conn:
        stored_over, stored_largest = conn.execute(
            "SELECT count(*) FILTER (WHERE token_count > $2), coalesce(max(token_count), 0) "
            "FROM chunks WHERE source = $1", [source, counter.max_tokens]).fetchone()
    return dg.AssetCheckResult(
        passed=not recount.over and not recount.miscounted and not stored_over,
        metadata={"token_limit": counter.max_tokens, "chunks_checked": recount.chunks,
                  "documents_checked": recount.documents,
                  "largest_chunk_tokens": max(stored_largest, recount.largest),
                  "chunks_over_limit": len(recount.over), "stored_counts_wrong": recount.miscounted,
                  "stored_counts_over_limit": stored_over,
                  "examples": markdown_table(recount.over, ["path", "chunk_id", "tokens"])})


@dg.asset_check(asset="chunks", blocking=True,
                description="Chunk ids are unique across every source: vectors and graph "
                "evidence are keyed by them.")
def chunk_ids_unique(tables: TablesResource) -> dg.AssetCheckResult:
    with tables.get_connection() as conn:
        duplicates = read_frame(conn, """
            SELECT chunk_id, count(*) AS copies, string_agg(DISTINCT path, ', ') AS paths
            FROM chunks GROUP BY chunk_id HAVING count(*) > 1 ORDER BY copies DESC
        """).to_dicts()
    return dg.AssetCheckResult(
        passed=not duplicates,
        metadata={"duplicate_ids": len(duplicates),
                  "examples": markdown_table(duplicates, ["chunk_id", "copies", "paths"])})


@dg.asset_check(asset=keyword_index, blocking=True, partitions_def=source_partitions,
                description="The keyword index holds exactly the chunk ids of the source's "
                "chunks, each once.")
def keyword_index_matches_chunks(context: dg.AssetCheckExecutionContext,
                                 tables: TablesResource,
                                 keyword: KeywordIndexResource) -> dg.AssetCheckResult:
    source = context.partition_key
    with tables.get_connection() as conn:
        expected = {chunk_id for (chunk_id,) in conn.execute(
            "SELECT chunk_id FROM chunks WHERE source = ?", [source]).fetchall()}
    with keyword.open() as index:
        ledger = index.chunk_ids(source)
        row = {"source": source, "chunks": len(expected),
               "indexed": index.indexed_count(source), "missing": len(expected - ledger),
               "extra": len(ledger - expected)}
    wrong = bool(row["missing"] or row["extra"] or row["indexed"] != row["chunks"])
    return dg.AssetCheckResult(
        passed=not wrong,
        metadata={"sources_checked": 1, "sources_wrong": int(wrong),
                  "per_source": markdown_table([row], ["source", "chunks", "indexed",
                                                       "missing", "extra"])})

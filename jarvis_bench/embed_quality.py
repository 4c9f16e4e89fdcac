"""The quality gate of ``jarvis bench embed --scifact``: SciFact nDCG@10, dense and hybrid,
of each embedding backend against float32, through Jarvis's own chunking, vector store,
keyword index and fusion (jarvis_bench/evaluation.py).

Each backend embeds the whole corpus into its own fresh index (the time that takes, vector
store writes included as in a refresh, gives the chunks/s on real chunks). Its queries are
encoded twice: by the backend itself, and in float32 by the reference, as the published
query model encodes them whatever precision the chunks were embedded in; both rankings are
scored, so the gate also answers whether float32 queries suit a bf16 corpus.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from jarvis_bench.evaluation import (
    chunk_corpus,
    dense_hits,
    keyword_hits,
    load_beir,
    places,
    ranked_by_group,
    score,
)
from jarvis_core.config import JarvisConfig
from jarvis_core.text.embedder import Embedder
from jarvis_query.retrievers.grouping import DOCUMENT

# A backend keeps retrieval quality when each nDCG@10 is at most this far below float32's.
MAX_NDCG_LOSS = 0.003


def scifact_quality(dataset_dir: Path, config: JarvisConfig, embedders: dict[str, Embedder],
                    reference: str) -> dict:
    """Per backend: chunks/s over the corpus, nDCG@10 and recall@10 dense and hybrid with
    its own queries and with the reference's, and whether it passes the gate."""
    data = load_beir(dataset_dir)
    chunks = chunk_corpus(data, config)
    found = places(chunks)
    texts = [data.queries[query_id] for query_id in data.queries]
    reference_queries = embedders[reference].embed(texts)
    with tempfile.TemporaryDirectory(prefix="jarvis-bench-embed-") as tmp:
        workdir = Path(tmp)
        keyword = keyword_hits(data, chunks, workdir / "keyword")
        results = {}
        for name, embedder in embedders.items():
            index_dir = workdir / name
            own_queries = embedder.embed(texts)
            started = time.perf_counter()  # embedding the corpus and writing its vectors
            own = dense_hits(data, chunks, embedder, index_dir, own_queries)
            seconds = time.perf_counter() - started
            with_reference = dense_hits(data, chunks, embedder, index_dir, reference_queries)
            results[name] = {
                "chunks": chunks.height,
                "chunks_per_s": round(chunks.height / seconds, 1),
                "own_queries": _scores(data, found, own, keyword),
                "f32_queries": _scores(data, found, with_reference, keyword),
            }
    floor = {mode: results[reference]["own_queries"][mode]["ndcg_at_10"] - MAX_NDCG_LOSS
             for mode in ("dense", "hybrid")}
    for result in results.values():
        result["meets_gate"] = all(result[queries][mode]["ndcg_at_10"] >= floor[mode]
                                   for queries in ("own_queries", "f32_queries")
                                   for mode in floor)
    return {"dataset": data.name, "queries": len(data.queries), "documents": len(data.corpus),
            "reference_backend": reference, "max_ndcg_loss": MAX_NDCG_LOSS,
            "backends": results}


def _scores(data, found, dense: dict, keyword: dict) -> dict[str, dict[str, float]]:
    """nDCG@10 and recall@10 by document, as the searches rank by default."""
    modes = ("dense", "hybrid")
    ranked = ranked_by_group({"dense": dense, "bm25": keyword}, modes, found)
    return {mode: score(data, ranked[mode][DOCUMENT]) for mode in modes}
